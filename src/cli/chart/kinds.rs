//! The shapes the chart's values share: Kubernetes objects the chart passes
//! through as they are, quantities, ports given as a number or a name, and
//! Prometheus durations.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Labels or annotations.
pub type StringMap = BTreeMap<String, String>;

/// A value the chart passes on, described by a schema written out: the
/// chart's values are never read as Rust values, only described.
macro_rules! described {
    ($(#[$doc:meta])* $name:ident => $schema:tt) => {
        $(#[$doc])*
        #[derive(Default)]
        pub struct $name;

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

described! {
    /// A Kubernetes object the chart copies into what it renders (a
    /// toleration, an affinity, a security context); the API server checks it.
    Object => { "type": "object" }
}

described! {
    /// A number, or a string such as a percentage (`maxSurge`,
    /// `maxUnavailable`).
    IntOrString => { "type": ["integer", "string"] }
}

described! {
    /// A resource quantity: `100m`, `128Mi`, or a number.
    Quantity => { "type": ["string", "number"] }
}

described! {
    /// A Prometheus duration in an alert rule: `10m`, `1h30m`.
    PromDuration => {
        "type": "string",
        "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$",
        "description": "A Prometheus duration, e.g. 10m, 1h30m.",
    }
}

described! {
    /// A ServiceMonitor's scrape interval or timeout: `30s`, `1m30s`.
    ScrapeDuration => { "type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$" }
}

/// An optional object the chart renders: whether, in which namespace
/// (empty: the release's), with which labels.
#[derive(Default, JsonSchema)]
// Flattened into each user: its description would become theirs.
#[schemars(description = "")]
pub struct Rendered {
    pub enabled: bool,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub labels: StringMap,
}

/// One entry of `extraEnv`, as in a container's `env`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    #[schemars(length(min = 1))]
    pub name: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub value_from: Object,
}

/// One entry of `envFrom`, as in a container's `envFrom`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvFromSource {
    #[serde(default)]
    pub prefix: String,
    #[serde(default)]
    pub secret_ref: Object,
    #[serde(default)]
    pub config_map_ref: Object,
}
