//! The chart's values (charts/assetscan-operator/values.yaml) as types, for
//! their schema alone: nothing builds them. `config` is the operator's own
//! [`Config`]; the rest is the chart's (image, replicas, Redis connection,
//! RBAC, metrics, pods, optional objects). A value the templates need is
//! required; the others carry `#[serde(default)]`. values.yaml holds the
//! defaults, so the schema states none.

use super::kinds::{EnvFromSource, EnvVar, IntOrString, Object, Quantity, Rendered, StringMap};
use crate::cli::config::Config;
use schemars::JsonSchema;
use std::collections::BTreeMap;

/// A Kubernetes object name (at most 253 characters; empty: none).
const MAX_NAME: u32 = 253;

/// Every value of the chart, `config` included.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(title = "assetscan-operator Helm values", description = "")]
pub struct ChartValues {
    /// Values shared with parent charts.
    #[serde(default)]
    pub global: Object,
    #[serde(default)]
    #[schemars(length(max = 63))]
    pub name_override: String,
    #[serde(default)]
    #[schemars(length(max = 63))]
    pub fullname_override: String,
    #[serde(default)]
    pub common_labels: StringMap,
    pub image: Image,
    #[serde(default)]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// Operator replicas (active-active; shard count when sharding is on, at
    /// most the 256 buckets).
    #[schemars(range(max = 256))]
    pub replicas: u32,
    pub sharding: Sharding,
    /// One namespace to watch, or empty for all.
    #[serde(default)]
    #[schemars(
        length(max = 63),
        regex(pattern = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$")
    )]
    pub watch_namespace: String,
    #[serde(default)]
    #[schemars(range(min = 1, max = 65535))]
    pub concurrency: u32,
    #[serde(default)]
    pub log_format: LogFormat,
    #[serde(default)]
    pub log_level: String,
    pub redis: Redis,
    /// The operator's configuration file (examples/config.yaml format),
    /// rendered into a ConfigMap as it is.
    pub config: Config,
    #[serde(default)]
    pub extra_env: Vec<EnvVar>,
    #[serde(default)]
    pub env_from: Vec<EnvFromSource>,
    #[serde(default)]
    pub extra_volumes: Vec<Volume>,
    #[serde(default)]
    pub extra_volume_mounts: Vec<VolumeMount>,
    pub service_account: ServiceAccount,
    pub rbac: Rbac,
    pub metrics: super::metrics::Metrics,
    pub probes: Probes,
    #[serde(default)]
    pub resources: Resources,
    pub pod_security_context: Object,
    pub security_context: Object,
    /// At least config.lock.ttl, in seconds.
    #[schemars(range(min = 1))]
    pub termination_grace_period_seconds: u32,
    #[serde(default)]
    pub strategy: Strategy,
    #[serde(default)]
    pub revision_history_limit: u32,
    pub pod_disruption_budget: PodDisruptionBudget,
    #[serde(default)]
    pub pod_annotations: StringMap,
    #[serde(default)]
    pub pod_labels: StringMap,
    #[serde(default)]
    pub priority_class_name: String,
    #[serde(default)]
    pub node_selector: StringMap,
    #[serde(default)]
    pub tolerations: Vec<Object>,
    #[serde(default)]
    pub affinity: Object,
    #[serde(default)]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default)]
    pub network_policy: super::network::NetworkPolicy,
    #[serde(default)]
    pub helm_test: HelmTest,
    #[serde(default)]
    pub prometheus_rule: super::alerts::PrometheusRule,
    #[serde(default)]
    pub grafana_dashboard: GrafanaDashboard,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Image {
    #[schemars(length(min = 1))]
    pub repository: String,
    #[serde(default)]
    pub tag: String,
    #[serde(default)]
    #[schemars(regex(pattern = "^(sha256:[a-f0-9]{64})?$"))]
    pub digest: String,
    pub pull_policy: PullPolicy,
}

#[derive(JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LogFormat {
    Text,
    #[default]
    Json,
}

/// `{name: regcred}`.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalObjectReference {
    #[schemars(length(min = 1))]
    pub name: String,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sharding {
    pub enabled: bool,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Redis {
    /// redis://, rediss://, redis+sentinel://, rediss+sentinel:// or
    /// cluster: URL; empty when existingSecret, sentinel or
    /// config.redis.url is used.
    #[serde(default)]
    #[schemars(regex(pattern = r"^(|rediss?://.+|rediss?\+sentinel://.+|cluster:.+)$"))]
    pub url: String,
    #[serde(default)]
    #[schemars(length(max = MAX_NAME))]
    pub existing_secret: String,
    #[schemars(length(min = 1))]
    pub existing_secret_key: String,
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// ACL user (REDIS_USERNAME).
    #[serde(default)]
    pub username: String,
    /// Secret with the user's password (REDIS_PASSWORD).
    #[serde(default)]
    pub password: SecretKey,
    #[serde(default)]
    pub sentinel: Sentinel,
    #[serde(default)]
    pub tls: RedisTls,
}

/// A key of a Secret (empty name: none).
#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKey {
    #[serde(default)]
    #[schemars(length(max = MAX_NAME))]
    pub existing_secret: String,
    #[schemars(length(min = 1))]
    pub key: String,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sentinel {
    pub enabled: bool,
    #[schemars(length(min = 1), regex(pattern = "^[^/,@ ]+$"))]
    pub master_name: String,
    pub hosts: Vec<SentinelHost>,
    #[serde(default)]
    pub db: u32,
    #[serde(default)]
    pub username: String,
    /// Secret with the sentinels' password (REDIS_SENTINEL_PASSWORD).
    #[serde(default)]
    pub password: SecretKey,
}

/// `host:port`, or `host` for port 26379.
#[derive(JsonSchema)]
#[schemars(transparent)]
pub struct SentinelHost(#[schemars(regex(pattern = "^[^/,@ ]+$"))] pub String);

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisTls {
    pub enabled: bool,
    #[serde(default)]
    pub ca_secret: SecretRef,
    #[serde(default)]
    #[schemars(length(max = MAX_NAME))]
    pub client_cert_secret: String,
}

/// A key of a named Secret (empty name: none).
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    #[serde(default)]
    #[schemars(length(max = MAX_NAME))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub key: String,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[schemars(length(min = 1))]
    pub name: String,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    #[schemars(length(min = 1))]
    pub name: String,
    #[schemars(regex(pattern = "^/"))]
    pub mount_path: String,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub sub_path: String,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccount {
    pub create: bool,
    #[serde(default)]
    #[schemars(length(max = MAX_NAME))]
    pub name: String,
    #[serde(default)]
    pub annotations: StringMap,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rbac {
    pub create: bool,
    #[serde(default)]
    pub aggregate_to_default_roles: bool,
    /// The namespaces whose Secrets the operator may read, for the channel
    /// objects (the teams' and the cluster's); empty: every namespace it
    /// watches.
    #[serde(default)]
    #[schemars(inner(
        length(min = 1, max = 63),
        regex(pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    ))]
    pub secret_namespaces: Vec<String>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Probes {
    pub startup: Probe,
    pub liveness: LivenessProbe,
    pub readiness: Probe,
}

/// When and how often a probe asks, and after how many failures it gives
/// up: the keys every probe shares.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
// Flattened into each user: its description would become theirs.
#[schemars(description = "")]
pub struct ProbeTiming {
    #[serde(default)]
    pub initial_delay_seconds: u32,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub period_seconds: u32,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub timeout_seconds: u32,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub failure_threshold: u32,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Probe {
    #[serde(flatten)]
    pub timing: ProbeTiming,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub success_threshold: u32,
}

/// Kubernetes requires a liveness probe's `successThreshold` to be 1.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LivenessProbe {
    #[serde(flatten)]
    pub timing: ProbeTiming,
    #[serde(default)]
    #[schemars(extend("const" = 1))]
    pub success_threshold: u32,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub termination_grace_period_seconds: u32,
}

#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub limits: BTreeMap<String, Quantity>,
    #[serde(default)]
    pub claims: Vec<Object>,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Strategy {
    #[serde(default, rename = "type")]
    pub kind: StrategyType,
    #[serde(default)]
    pub rolling_update: RollingUpdate,
}

#[derive(Default, JsonSchema)]
pub enum StrategyType {
    #[default]
    RollingUpdate,
    Recreate,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollingUpdate {
    #[serde(default)]
    pub max_surge: IntOrString,
    #[serde(default)]
    pub max_unavailable: IntOrString,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodDisruptionBudget {
    pub enabled: bool,
    /// A number of pods (at least 1) or a percentage.
    #[schemars(range(min = 1), regex(pattern = "^[0-9]+%$"))]
    pub max_unavailable: IntOrString,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpreadConstraint {
    #[schemars(range(min = 1))]
    pub max_skew: u32,
    #[schemars(length(min = 1))]
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    #[serde(default)]
    pub label_selector: Object,
}

#[derive(JsonSchema)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelmTest {
    pub enabled: bool,
    #[schemars(length(min = 1))]
    pub image: String,
    #[schemars(range(min = 1, max = 100))]
    pub attempts: u32,
}

#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrafanaDashboard {
    #[serde(flatten)]
    pub rendered: Rendered,
    #[serde(default)]
    pub annotations: StringMap,
}
