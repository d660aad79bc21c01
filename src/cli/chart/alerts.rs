//! `prometheusRule`: the optional PrometheusRule, one entry per alert, each
//! on metrics the operator exports.

use super::kinds::{PromDuration, Rendered, StringMap};
use schemars::JsonSchema;

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrometheusRule {
    #[serde(flatten)]
    pub rendered: Rendered,
    #[serde(default)]
    pub alert_labels: StringMap,
    pub alerts: Alerts,
}

#[derive(Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Alerts {
    pub redis_unavailable: Held,
    pub runs_failed: Windowed,
    pub step_errors: Ratio,
    pub notification_undelivered: Threshold,
    pub overdue_scans: Threshold,
    pub no_replica_scraped: Held,
}

/// An alert that fires once its condition has held for `for`.
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Held {
    pub enabled: bool,
    #[schemars(length(min = 1))]
    pub severity: String,
    pub r#for: PromDuration,
}

/// An alert on what happened within `window`.
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Windowed {
    pub enabled: bool,
    #[schemars(length(min = 1))]
    pub severity: String,
    pub window: PromDuration,
}

/// An alert on a share of failures above `ratio`.
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Ratio {
    pub enabled: bool,
    #[schemars(length(min = 1))]
    pub severity: String,
    #[schemars(range(max = 1.0), extend("exclusiveMinimum" = 0))]
    pub ratio: f64,
    pub r#for: PromDuration,
}

/// An alert on an age above `threshold` seconds.
#[derive(Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    pub enabled: bool,
    #[schemars(length(min = 1))]
    pub severity: String,
    /// Seconds.
    #[schemars(range(min = 1))]
    pub threshold: u32,
    pub r#for: PromDuration,
}
