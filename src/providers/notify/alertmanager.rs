//! Prometheus Alertmanager: `POST <url>/api/v2/alerts` with one alert, the
//! run's high-risk finding set, for Alertmanager to route, group, silence
//! and inhibit as it does Prometheus' alerts:
//!
//! ```json
//! [{"labels": {"alertname": "AssetScanHighRisk", "namespace": "team-a",
//!              "asset": "web-1", "severity": "critical"},
//!   "annotations": {"summary": "High risk on web-1: 3 findings, max CVSS 10.0",
//!                   "description": "CRITICAL 10.0 UBUNTU-CVE-2024-3094 …",
//!                   "assetscan": "web-1-scan", "uid": "0b7c…",
//!                   "ticket": "web-1/r1", "fencing_token": "7", "known_exploited": "…"},
//!   "startsAt": "2026-12-07T10:00:00Z", "endsAt": "2026-12-08T10:00:00Z"}]
//! ```
//!
//! The labels are the alert's identity (Alertmanager fingerprints them): the
//! namespace and asset id, which is one fence, and the severity. A re-send
//! of a run, and every later high-risk run of the asset at that severity,
//! is the same alert: Alertmanager merges it and notifies its receivers
//! once per group as its `repeat_interval` says. The run's identity is in
//! the annotations, which do not split alerts.
//!
//! A clean run after a high-risk one ends the alert: it posts it again with
//! `endsAt` now ([`AlertmanagerNotifier::resolve`]), and Alertmanager tells
//! its receivers that it resolved. Otherwise an alert Alertmanager hears no
//! more of resolves at its `endsAt`. A sender
//! that is not Prometheus posts once per run, not every evaluation, so
//! `endsAt` is `activeFor` (default 24 h) after the send: set it beyond the
//! assets' `rescanInterval`, so that a still-vulnerable asset's next run
//! extends the alert before it lapses.
//!
//! Alertmanager answers 200 with an empty body; 400 is a malformed alert
//! (permanent), 5xx is retried.

use super::error::NotifyError;
use super::message::{
    alert_severity, finding_line, headline, known_exploited, severity_label, top_findings,
};
use crate::pipeline::{Notification, Resolution};
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, SecretUrl, join_path};
use crate::providers::secret::SecretFrom;
use assetscan_domain::Origin;
use assetscan_domain::ticket::Severity;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

const PROFILE: HttpProfile = HttpProfile::webhook("alertmanager");

/// The `alertname` label of every alert the operator raises.
pub const ALERT_NAME: &str = "AssetScanHighRisk";

const DEFAULT_ACTIVE_FOR: Duration = Duration::from_secs(24 * 3600);

/// The labels the operator sets; `labels` may not name them.
const OWN_LABELS: [&str; 4] = ["alertname", "namespace", "asset", "severity"];

/// `{kind: alertmanager, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AlertmanagerConfig {
    /// Alertmanager's base URL (`http://alertmanager.monitoring:9093`);
    /// alerts go to `/api/v2/alerts` under it. Treated as a secret: it may
    /// carry credentials.
    pub url_from: SecretFrom,
    /// How long an alert stays firing without a later run's word (its
    /// `endsAt`); default `24h`, at least `1m`.
    #[serde(default, deserialize_with = "crate::duration::config_optional")]
    #[schemars(schema_with = "crate::duration::config_optional_schema")]
    pub active_for: Option<Duration>,
    /// More labels on every alert, for Alertmanager's routes (`team`,
    /// `cluster`); they may not replace the operator's own.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `timeout` (default `10s`), `maxBodyBytes`, `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

#[derive(Debug)]
pub struct AlertmanagerNotifier {
    http: HttpClient,
    url: SecretUrl,
    active_for: SignedDuration,
    labels: BTreeMap<String, String>,
}

impl AlertmanagerNotifier {
    pub fn new(config: &AlertmanagerConfig) -> Result<AlertmanagerNotifier, ProviderConfigError> {
        let invalid =
            |field, reason: String| ProviderConfigError::invalid(PROFILE.provider, field, reason);
        let active_for = config.active_for.unwrap_or(DEFAULT_ACTIVE_FOR);
        if active_for < Duration::from_secs(60) {
            return Err(invalid("activeFor", "must be at least 1m".to_owned()));
        }
        if let Some(own) = config
            .labels
            .keys()
            .find(|k| OWN_LABELS.contains(&k.as_str()))
        {
            return Err(invalid("labels", format!("{own:?} is set by the operator")));
        }
        if let Some(bad) = config.labels.keys().find(|k| !is_label_name(k)) {
            let shown = assetscan_domain::text::truncate_chars(bad, 64);
            return Err(invalid(
                "labels",
                format!("{shown:?} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"),
            ));
        }
        Ok(AlertmanagerNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: SecretUrl::load(PROFILE.provider, "urlFrom", &config.url_from)?,
            active_for: SignedDuration::try_from(active_for)
                .map_err(|e| invalid("activeFor", e.to_string()))?,
            labels: config.labels.clone(),
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let now = Timestamp::now();
        let ends = now + self.active_for;
        self.post(&json!([alert(notification, &self.labels, now, ends)]))
            .await
    }

    /// The asset's alert ended now, at whichever severity it was raised
    /// (the severity is one of its labels, and the clean run does not know
    /// the one of the run that raised it): Alertmanager resolves the one
    /// that fires and tells its receivers; the others it merely records as
    /// resolved, having never seen them fire.
    pub async fn resolve(&self, resolution: &Resolution) -> Result<String, NotifyError> {
        let now = Timestamp::now();
        let alerts: Vec<Value> = (SEVERITIES.iter())
            .map(|severity| resolved(resolution, &self.labels, *severity, now))
            .collect();
        self.post(&Value::Array(alerts)).await
    }

    async fn post(&self, alerts: &Value) -> Result<String, NotifyError> {
        let url = join_path(&self.url.url(), &["api", "v2", "alerts"]);
        let request = self.http.post(url).json(alerts);
        let reply = self.http.send(request).await?.success()?;
        Ok(format!("HTTP {}", reply.status.as_u16()))
    }
}

/// Prometheus' label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn is_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Every value of the `severity` label an alert may carry.
const SEVERITIES: [Severity; 6] = [
    Severity::Critical,
    Severity::High,
    Severity::Medium,
    Severity::Low,
    Severity::None,
    Severity::Unknown,
];

/// The alert's identity: its labels.
fn labels(
    asset: &str,
    origin: Option<&Origin>,
    severity: Severity,
    extra: &BTreeMap<String, String>,
) -> Map<String, Value> {
    let mut labels: Map<String, Value> = (extra.iter())
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    labels.insert("alertname".into(), ALERT_NAME.into());
    labels.insert("asset".into(), asset.into());
    let severity = severity_label(severity).to_ascii_lowercase();
    labels.insert("severity".into(), severity.into());
    if let Some(o) = origin {
        labels.insert("namespace".into(), o.namespace.as_str().into());
    }
    labels
}

/// The asset's alert at `severity`, ended at `now` by the clean run of
/// `resolution`.
fn resolved(
    resolution: &Resolution,
    extra: &BTreeMap<String, String>,
    severity: Severity,
    now: Timestamp,
) -> Value {
    let origin = resolution.origin.as_ref();
    json!({
        "labels": labels(&resolution.asset, origin, severity, extra),
        "annotations": {
            "summary": format!("Resolved: a later run of {} found no high risk", resolution.asset),
            "ticket": resolution.ticket_id,
            "fencing_token": resolution.fencing_token.to_string(),
        },
        "startsAt": format!("{now:.3}"),
        "endsAt": format!("{now:.3}"),
    })
}

/// One `postableAlert` of Alertmanager's API v2.
fn alert(
    n: &Notification,
    extra: &BTreeMap<String, String>,
    starts: Timestamp,
    ends: Timestamp,
) -> Value {
    let labels = labels(&n.asset, n.origin.as_ref(), alert_severity(n), extra);
    let mut annotations = Map::new();
    annotations.insert("summary".into(), headline(n).into());
    let findings: Vec<String> = top_findings(n).iter().map(finding_line).collect();
    let reasons = n.risk.reasons.join("\n");
    annotations.insert(
        "description".into(),
        format!("{reasons}\n\n{}", findings.join("\n"))
            .trim()
            .into(),
    );
    annotations.insert("ticket".into(), n.ticket_id.as_str().into());
    annotations.insert("run".into(), n.run.as_str().into());
    annotations.insert("fencing_token".into(), n.fencing_token.to_string().into());
    if let Some(o) = &n.origin {
        annotations.insert("assetscan".into(), o.name.as_str().into());
        annotations.insert("uid".into(), o.uid.as_str().into());
    }
    if !known_exploited(n).is_empty() {
        annotations.insert(
            "known_exploited".into(),
            known_exploited(n).join(", ").into(),
        );
    }
    json!({
        "labels": labels,
        "annotations": annotations,
        "startsAt": format!("{starts:.3}"),
        "endsAt": format!("{ends:.3}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_labels_and_bad_names_are_refused() {
        let parse = |yaml: &str| crate::yaml::from_str::<AlertmanagerConfig>(yaml).unwrap();
        for (yaml, expected) in [
            (
                "{urlFrom: {env: U}, labels: {severity: low}}",
                "\"severity\" is set by the operator",
            ),
            (
                "{urlFrom: {env: U}, labels: {team-name: a}}",
                "is not a label name",
            ),
            (
                "{urlFrom: {env: U}, activeFor: 30s}",
                "activeFor: must be at least 1m",
            ),
        ] {
            let err = AlertmanagerNotifier::new(&parse(yaml))
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{yaml}: {err}");
        }
        for good in ["team", "_x", "Cluster_1"] {
            assert!(is_label_name(good), "{good}");
        }
        for bad in ["", "1x", "a-b", "a.b", "é"] {
            assert!(!is_label_name(bad), "{bad}");
        }
    }
}
