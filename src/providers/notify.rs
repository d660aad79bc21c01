//! Notifications about a high-risk asset, over the channels configured by
//! name: a generic signed webhook, a WeCom group robot, a Slack incoming
//! webhook.
//!
//! Delivery is at-least-once: a takeover at `NOTIFYING` sends again with the
//! same key (the ticket id). The generic webhook carries that key in an
//! `Idempotency-Key` header, so an idempotent receiver turns the repeats into
//! one effect. WeCom and Slack have no such header: a repeat there is a
//! second message, and the dedup is only as good as the channel. The ticket
//! id is in every message's text so that humans can tell repeats apart.

use super::ConfigError;
use super::http::HttpError;
use super::slack::{SlackConfig, SlackError, SlackNotifier};
use super::webhook::{WebhookConfig, WebhookNotifier};
use super::wecom::{WeComConfig, WeComNotifier};
use crate::ticket::{Finding, Severity};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

pub use crate::pipeline::Notification;

/// Chat messages list at most this many findings; the webhook gets all the
/// facts hold.
pub(crate) const CHAT_FINDINGS: usize = 10;

/// `High risk on web-1: 3 findings, max CVSS 10.0`.
pub(crate) fn headline(n: &Notification) -> String {
    let max = n
        .vulnerabilities
        .max_cvss
        .map(|m| format!(", max CVSS {m:.1}"))
        .unwrap_or_default();
    format!(
        "High risk on {}: {} findings{max}",
        n.asset, n.vulnerabilities.total
    )
}

/// `ticket web-1/r1, fencing token 7`: how humans tell repeats apart.
pub(crate) fn ticket_line(n: &Notification) -> String {
    format!("ticket {}, fencing token {}", n.ticket_id, n.fencing_token)
}

/// The CVEs listed as known exploited, if threat intel ran.
pub(crate) fn known_exploited(n: &Notification) -> &[String] {
    n.threat_intel
        .as_ref()
        .map_or(&[], |t| t.known_exploited.as_slice())
}

/// The most severe findings, at most [`CHAT_FINDINGS`].
pub(crate) fn top_findings(n: &Notification) -> &[Finding] {
    let findings = &n.vulnerabilities.findings;
    &findings[..findings.len().min(CHAT_FINDINGS)]
}

/// `CRITICAL 10.0 UBUNTU-CVE-2024-3094 [CVE-2024-3094] xz-utils: summary`.
pub(crate) fn finding_line(f: &Finding) -> String {
    let score = f.cvss.map(|c| format!(" {c:.1}")).unwrap_or_default();
    let cves = match f.cves.as_slice() {
        [] => String::new(),
        [one] if *one == f.id => String::new(),
        cves => format!(" [{}]", cves.join(", ")),
    };
    let package = if f.package.is_empty() {
        String::new()
    } else {
        format!(" {}", f.package)
    };
    let summary = if f.summary.is_empty() {
        String::new()
    } else {
        format!(": {}", f.summary)
    };
    format!(
        "{}{score} {}{cves}{package}{summary}",
        severity_label(f.severity),
        f.id
    )
}

pub(crate) fn severity_label(severity: Severity) -> &'static str {
    match severity {
        Severity::Critical => "CRITICAL",
        Severity::High => "HIGH",
        Severity::Medium => "MEDIUM",
        Severity::Low => "LOW",
        Severity::None => "NONE",
        Severity::Unknown => "UNSCORED",
    }
}

/// One channel's configuration, by `kind`.
///
/// ```yaml
/// notifications:
///   ops-webhook: {kind: webhook, urlFrom: {env: HOOK_URL}, secretFrom: {file: /secrets/hmac}}
///   sec-wecom:   {kind: wecom, keyFrom: {env: WECOM_KEY}}
///   sec-slack:   {kind: slack, urlFrom: {file: /secrets/slack-url}}
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum NotifierConfig {
    Webhook(WebhookConfig),
    Wecom(WeComConfig),
    Slack(SlackConfig),
}

/// A configured channel.
#[derive(Debug)]
pub enum Notifier {
    Webhook(WebhookNotifier),
    WeCom(WeComNotifier),
    Slack(SlackNotifier),
}

impl Notifier {
    pub fn from_config(config: &NotifierConfig) -> Result<Notifier, ConfigError> {
        Ok(match config {
            NotifierConfig::Webhook(c) => Notifier::Webhook(WebhookNotifier::new(c)?),
            NotifierConfig::Wecom(c) => Notifier::WeCom(WeComNotifier::new(c)?),
            NotifierConfig::Slack(c) => Notifier::Slack(SlackNotifier::new(c)?),
        })
    }

    /// Delivers the notification; the `Ok` value is the receipt (what the
    /// receiver answered, short) for the ticket.
    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        match self {
            Notifier::Webhook(n) => n.send(notification).await,
            Notifier::WeCom(n) => n.send(notification).await,
            Notifier::Slack(n) => n.send(notification).await,
        }
    }
}

/// Builds every configured channel. Names are what an AssetScan's
/// `spec.notify` lists, so they follow the CRD's pattern.
pub fn notifiers_from_config(
    configs: &BTreeMap<String, NotifierConfig>,
) -> Result<BTreeMap<String, Notifier>, ConfigError> {
    configs
        .iter()
        .map(|(name, config)| {
            if !is_channel_name(name) {
                return Err(ConfigError::invalid(
                    "notifications",
                    "channel name",
                    format!(
                        "{name:?} must match [A-Za-z0-9][A-Za-z0-9._-]*, at most 63 characters"
                    ),
                ));
            }
            Ok((name.clone(), Notifier::from_config(config)?))
        })
        .collect()
}

/// `[A-Za-z0-9][A-Za-z0-9._-]*`, 1–63 characters (the CRD's `notify` items).
fn is_channel_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 63
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A failed delivery.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The robot answered HTTP 200 with a non-zero `errcode`.
    #[error("wecom: the robot answered errcode {errcode}: {errmsg:?}")]
    WeCom { errcode: i64, errmsg: String },
    /// Slack answered something other than `200 ok`.
    #[error("slack: the webhook answered HTTP {status}: {code}")]
    Slack {
        status: u16,
        code: SlackError,
        retry_after: Option<Duration>,
    },
}

impl NotifyError {
    /// Transport failures, 429 and 5xx; WeCom errcodes 45009 (rate limit)
    /// and -1 (busy). Everything else is permanent.
    pub fn is_retryable(&self) -> bool {
        match self {
            NotifyError::Http(e) => e.is_retryable(),
            NotifyError::WeCom { errcode, .. } => super::wecom::is_retryable_errcode(*errcode),
            NotifyError::Slack { status, .. } => super::http::is_retryable_status(*status),
        }
    }

    /// How long the receiver asked us to wait (Slack's 429 `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            NotifyError::Http(e) => e.retry_after(),
            NotifyError::WeCom { .. } => None,
            NotifyError::Slack { retry_after, .. } => *retry_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_configs_by_kind() {
        let yaml = r#"
ops-webhook: {kind: webhook, urlFrom: {env: HOOK_URL}, secretFrom: {file: /s/hmac}}
sec-wecom: {kind: wecom, keyFrom: {env: WECOM_KEY}, timeout: 2s}
sec-slack: {kind: slack, urlFrom: {file: /s/slack}}
"#;
        let configs: BTreeMap<String, NotifierConfig> = serde_yaml::from_str(yaml).unwrap();
        assert!(matches!(configs["ops-webhook"], NotifierConfig::Webhook(_)));
        assert!(matches!(configs["sec-wecom"], NotifierConfig::Wecom(_)));
        assert!(matches!(configs["sec-slack"], NotifierConfig::Slack(_)));
        assert!(serde_yaml::from_str::<NotifierConfig>("{kind: slack, url: 'https://x'}").is_err());
        assert!(serde_yaml::from_str::<NotifierConfig>("{kind: email}").is_err());
    }

    #[test]
    fn bad_channel_names_are_rejected() {
        let configs: BTreeMap<String, NotifierConfig> =
            serde_yaml::from_str("'Bad Name': {kind: slack, urlFrom: {env: X}}").unwrap();
        let err = notifiers_from_config(&configs).unwrap_err();
        assert!(err.to_string().contains("Bad Name"), "{err}");
        for good in ["ops", "Sec.Slack_1", "a-b"] {
            assert!(is_channel_name(good), "{good}");
        }
        for bad in ["", "-x", "a b", "x/y", &"a".repeat(64)] {
            assert!(!is_channel_name(bad), "{bad}");
        }
    }

    #[test]
    fn finding_lines() {
        let f = Finding {
            id: "GHSA-jfh8-c2jp-5v3q".into(),
            cves: vec!["CVE-2021-44228".into()],
            package: "Maven/log4j-core@2.14.1".into(),
            cvss: Some(10.0),
            severity: Severity::Critical,
            summary: "Remote code injection in Log4j".into(),
        };
        assert_eq!(
            finding_line(&f),
            "CRITICAL 10.0 GHSA-jfh8-c2jp-5v3q [CVE-2021-44228] Maven/log4j-core@2.14.1: Remote code injection in Log4j"
        );
    }
}
