//! `metrics`: the port of /metrics, /healthz and /readyz, who may read
//! /metrics, its Service and the optional ServiceMonitor.

use super::kinds::{Object, Rendered, ScrapeDuration, StringMap};
use schemars::JsonSchema;

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metrics {
    #[schemars(range(min = 1, max = 65535))]
    pub port: u32,
    pub secure: bool,
    #[serde(default)]
    pub tls: MetricsTls,
    #[serde(default)]
    pub reader: MetricsReader,
    pub service: MetricsService,
    pub service_monitor: ServiceMonitor,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsTls {
    #[serde(default)]
    pub secret_name: String,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetricsReader {
    #[serde(default)]
    pub create: bool,
    #[serde(default)]
    pub service_accounts: Vec<ServiceAccountRef>,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceAccountRef {
    #[schemars(length(min = 1))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub namespace: String,
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsService {
    #[schemars(range(min = 1, max = 65535))]
    pub port: u32,
    #[serde(rename = "type")]
    pub kind: ServiceType,
    #[serde(default)]
    pub annotations: StringMap,
    #[serde(default)]
    pub labels: StringMap,
}

#[derive(JsonSchema)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    LoadBalancer,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceMonitor {
    #[serde(flatten)]
    pub rendered: Rendered,
    #[serde(default)]
    pub interval: ScrapeDuration,
    #[serde(default)]
    pub scrape_timeout: ScrapeDuration,
    #[serde(default)]
    pub relabelings: Vec<Object>,
    #[serde(default)]
    pub metric_relabelings: Vec<Object>,
    #[serde(default)]
    pub tls: ServiceMonitorTls,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceMonitorTls {
    #[serde(default)]
    pub insecure_skip_verify: bool,
    #[serde(default)]
    pub ca: CaSecret,
    #[serde(default)]
    pub server_name: String,
}

/// A key of a Secret in the ServiceMonitor's namespace.
#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaSecret {
    #[serde(default)]
    pub secret_name: String,
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub key: String,
}
