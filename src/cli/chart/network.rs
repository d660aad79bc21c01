//! `networkPolicy`: the optional NetworkPolicy of the operator's pods.
//! Enabled, it lets in only what `metrics` names and lets out only what
//! `egress` names.

use super::kinds::{Object, StringMap};
use schemars::JsonSchema;

#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    pub enabled: bool,
    pub metrics: MetricsSources,
    pub egress: Egress,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsSources {
    /// The namespace Prometheus runs in: the only source let in to the
    /// metrics port.
    #[schemars(length(max = 63))]
    pub namespace: String,
    #[serde(default)]
    pub pod_labels: StringMap,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Egress {
    pub api_server: EgressRule,
    pub dns: EgressRule,
    pub redis: EgressRule,
    pub providers: EgressRule,
    pub assets: AssetsRule,
    #[serde(default)]
    pub extra: Vec<Object>,
}

/// Where one kind of traffic may go. At least one port: a NetworkPolicy
/// rule without ports opens every port.
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressRule {
    /// NetworkPolicy peers (podSelector, namespaceSelector, ipBlock).
    pub to: Vec<Object>,
    #[schemars(
        length(min = 1),
        inner(range(min = 1, max = 65535)),
        extend("uniqueItems" = true)
    )]
    pub ports: Vec<u32>,
}

/// The TCP online checks' destinations: off unless enabled. Its ports may
/// be empty, which opens every port of `to` (the AssetScans name theirs).
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssetsRule {
    pub enabled: bool,
    /// NetworkPolicy peers: the asset networks.
    pub to: Vec<Object>,
    #[schemars(inner(range(min = 1, max = 65535)), extend("uniqueItems" = true))]
    pub ports: Vec<u32>,
}
