//! PagerDuty Events API v2: `POST https://events.pagerduty.com/v2/enqueue`
//! with a `trigger` event:
//!
//! ```json
//! {"routing_key": "…", "event_action": "trigger", "dedup_key": "assetscan/team-a/web-1",
//!  "client": "assetscan-operator",
//!  "payload": {"summary": "High risk on web-1: 3 findings, max CVSS 10.0",
//!              "source": "web-1", "severity": "critical", "timestamp": "…",
//!              "group": "team-a", "component": "web-1-scan", "class": "high-risk vulnerabilities",
//!              "custom_details": {"ticket": "web-1/r1", "run": "r1", "fencing_token": 7,
//!                                 "origin": {"namespace": "team-a", "name": "web-1-scan", "uid": "…"},
//!                                 "reasons": […], "findings": […], "known_exploited": […]}}}
//! ```
//!
//! The `dedup_key` names the asset's incident ([`incident_key`]), not the
//! run: PagerDuty folds every trigger with an open alert's key into that
//! alert, so a re-send of a run, and a later high-risk run of the asset
//! while the incident is open, page once.
//!
//! A clean run after a high-risk one sends `resolve` with the same key,
//! which closes the alert (and its incident when it is the last).
//!
//! PagerDuty answers 202 with `{"status": "success", "dedup_key": …}`;
//! 400 (an event it cannot read) is permanent; 429 and 5xx are retried.

use super::error::NotifyError;
use super::message::{
    alert_severity, finding_line, headline, incident_key, known_exploited, top_findings,
};
use crate::pipeline::{Notification, Resolution};
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, parse_http_url};
use crate::providers::secret::{Secret, SecretFrom};
use assetscan_domain::text::truncate_chars;
use assetscan_domain::ticket::Severity;
use k8s_openapi::jiff::Timestamp;
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

const PROFILE: HttpProfile = HttpProfile::webhook("pagerduty");

/// The Events API v2 endpoint (`https://events.eu.pagerduty.com/v2/enqueue`
/// for an EU account).
pub const DEFAULT_URL: &str = "https://events.pagerduty.com/v2/enqueue";

/// `payload.summary` is cut at 1024 characters by PagerDuty.
const SUMMARY_CHARS: usize = 1024;

/// `{kind: pagerduty, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PagerDutyConfig {
    /// The integration key of an Events API v2 integration (its "routing
    /// key").
    pub routing_key_from: SecretFrom,
    /// The endpoint; default `https://events.pagerduty.com/v2/enqueue`.
    #[serde(default)]
    pub url: Option<String>,
    /// `timeout` (default `10s`), `maxBodyBytes`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

#[derive(Debug)]
pub struct PagerDutyNotifier {
    http: HttpClient,
    url: Url,
    routing_key: Secret,
}

impl PagerDutyNotifier {
    pub fn new(config: &PagerDutyConfig) -> Result<PagerDutyNotifier, ProviderConfigError> {
        let routing_key = config
            .routing_key_from
            .load()
            .map_err(|e| ProviderConfigError::secret(PROFILE.provider, "routingKeyFrom", e))?;
        let key = routing_key.expose();
        if key.is_empty() || key.len() > 64 || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ProviderConfigError::invalid(
                PROFILE.provider,
                "routingKeyFrom",
                "an integration key is 1 to 64 printable ASCII characters",
            ));
        }
        let url = config.url.as_deref().unwrap_or(DEFAULT_URL);
        Ok(PagerDutyNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: parse_http_url(PROFILE.provider, "url", url)?,
            routing_key,
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let event = trigger(notification, self.routing_key.expose(), Timestamp::now());
        self.enqueue(&event).await
    }

    /// A `resolve` event for the asset's incident: PagerDuty resolves the
    /// open alert of that `dedup_key`, and ignores it when none is open.
    pub async fn resolve(&self, resolution: &Resolution) -> Result<String, NotifyError> {
        let event = json!({
            "routing_key": self.routing_key.expose(),
            "event_action": "resolve",
            "dedup_key": incident_key(&resolution.asset, resolution.origin.as_ref()),
        });
        self.enqueue(&event).await
    }

    async fn enqueue(&self, event: &Value) -> Result<String, NotifyError> {
        let request = self.http.post(self.url.clone()).json(event);
        let reply = self.http.send(request).await?.success()?;
        Ok(format!("HTTP {}", reply.status.as_u16()))
    }
}

/// PagerDuty's four severities: a high-risk run is at least a `warning`.
fn severity(n: &Notification) -> &'static str {
    match alert_severity(n) {
        Severity::Critical => "critical",
        Severity::High => "error",
        _ => "warning",
    }
}

/// The `trigger` event of the run.
fn trigger(n: &Notification, routing_key: &str, now: Timestamp) -> Value {
    let findings: Vec<String> = top_findings(n).iter().map(finding_line).collect();
    let mut payload = json!({
        "summary": truncate_chars(&headline(n), SUMMARY_CHARS),
        "source": n.asset,
        "severity": severity(n),
        "timestamp": format!("{now:.3}"),
        "class": "high-risk vulnerabilities",
        "custom_details": {
            "ticket": n.ticket_id,
            "run": n.run,
            "fencing_token": n.fencing_token,
            "origin": n.origin,
            "reasons": n.risk.reasons,
            "findings": findings,
            "known_exploited": known_exploited(n),
        },
    });
    if let Some(o) = &n.origin {
        payload["group"] = o.namespace.as_str().into();
        payload["component"] = o.name.as_str().into();
    }
    json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": incident_key(&n.asset, n.origin.as_ref()),
        "client": "assetscan-operator",
        "payload": payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routing_key_of_the_wrong_shape_is_refused_without_being_shown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "not a key\n with spaces").unwrap();
        let config = PagerDutyConfig {
            routing_key_from: SecretFrom::File(path),
            url: None,
            http: HttpSettings::default(),
        };
        let err = PagerDutyNotifier::new(&config).unwrap_err().to_string();
        assert!(err.contains("routingKeyFrom"), "{err}");
        assert!(!err.contains("with spaces"), "{err}");
    }
}
