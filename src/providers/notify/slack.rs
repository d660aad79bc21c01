//! Slack incoming webhook: `POST <url>` with `{"text": …, "blocks": […]}`
//! (`text` is the fallback shown in notifications).
//!
//! Success is HTTP 200 with the plain-text body `ok`. Errors are plain-text
//! codes with a status (`400 invalid_payload`, `404 channel_not_found`,
//! `410 channel_is_archived`, `403 action_prohibited`, …): permanent. 429
//! (over one message a second) is retryable after `Retry-After`, which the
//! error exposes; 5xx (`500 rollup_error`) is retryable.
//!
//! The URL is the credential: errors show the host alone. There is no
//! idempotency header; the ticket id is in the text.

use super::error::{NotifyError, SlackError};
use super::message::{
    finding_line, headline, known_exploited, origin_line, ticket_line, top_findings,
};
use super::untrusted::slack as escape;
use crate::pipeline::Notification;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, SecretUrl};
use crate::providers::secret::SecretFrom;
use assetscan_domain::text::truncate_chars;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

const PROFILE: HttpProfile = HttpProfile::webhook("slack");

/// Block Kit limits, in characters.
const HEADER_CHARS: usize = 150;
const SECTION_CHARS: usize = 3000;

/// `{kind: slack, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackConfig {
    /// The incoming-webhook URL, `https://hooks.slack.com/services/T…/B…/…`.
    pub url_from: SecretFrom,
    /// `timeout` (default `10s`), `maxBodyBytes` for Slack's answer
    /// (default 64 KiB), `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

#[derive(Debug)]
pub struct SlackNotifier {
    http: HttpClient,
    url: SecretUrl,
}

impl SlackNotifier {
    pub fn new(config: &SlackConfig) -> Result<SlackNotifier, ProviderConfigError> {
        Ok(SlackNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: SecretUrl::load(PROFILE.provider, "urlFrom", &config.url_from)?,
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let reply = self
            .http
            .send(self.http.post(self.url.url()).json(&message(notification)))
            .await?;
        if reply.status.as_u16() == 200 && reply.body.trim_ascii() == b"ok" {
            return Ok("ok".to_owned());
        }
        Err(NotifyError::Slack {
            status: reply.status.as_u16(),
            code: SlackError::parse(&reply.body),
            retry_after: reply.retry_after,
        })
    }
}

/// The Block Kit message: a header, the reasons, the top findings, and a
/// context line with the ticket id.
fn message(n: &Notification) -> Value {
    let reasons: String = n
        .risk
        .reasons
        .iter()
        .map(|r| format!("• {}\n", escape(r)))
        .collect();
    let findings: String = top_findings(n)
        .iter()
        .map(|f| format!("• {}\n", escape(&finding_line(f))))
        .collect();
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": truncate_chars(&headline(n), HEADER_CHARS)}}),
        section(&format!("*Why*\n{reasons}")),
    ];
    if !known_exploited(n).is_empty() {
        let cves = known_exploited(n).join(", ");
        blocks.push(section(&format!("*Known exploited:* {}", escape(&cves))));
    }
    if !findings.is_empty() {
        blocks.push(section(&format!("*Top findings*\n{findings}")));
    }
    let context: Vec<Value> = std::iter::once(ticket_line(n))
        .chain(origin_line(n))
        .map(|line| json!({"type": "mrkdwn", "text": escape(&line)}))
        .collect();
    blocks.push(json!({"type": "context", "elements": context}));
    let origin = origin_line(n).map(|o| format!(", {o}")).unwrap_or_default();
    json!({
        "text": escape(&format!("{} ({}{origin})", headline(n), ticket_line(n))),
        "blocks": blocks,
    })
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate_chars(text, SECTION_CHARS)}})
}
