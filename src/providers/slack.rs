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

use super::ConfigError;
use super::http::{Exposure, HttpClient, SecretUrl};
use super::notify::{
    Notification, NotifyError, finding_line, headline, known_exploited, ticket_line, top_findings,
};
use super::secret::SecretFrom;
use crate::text::{excerpt, truncate_chars};
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt;
use std::time::Duration;

const PROVIDER: &str = "slack";

/// Block Kit limits, in characters.
const HEADER_CHARS: usize = 150;
const SECTION_CHARS: usize = 3000;

/// `{kind: slack, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlackConfig {
    /// The incoming-webhook URL, `https://hooks.slack.com/services/T…/B…/…`.
    pub url_from: SecretFrom,
    #[serde(
        default = "default_timeout",
        deserialize_with = "crate::duration::config"
    )]
    pub timeout: Duration,
    /// Cap for Slack's answer. Default 64 KiB.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u64,
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_max_body() -> u64 {
    64 * 1024
}

/// Slack's plain-text error codes for incoming webhooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlackError {
    InvalidPayload,
    UserNotFound,
    ActionProhibited,
    ChannelNotFound,
    ChannelIsArchived,
    NoText,
    MissingTextOrFallbackOrAttachments,
    InvalidToken,
    NoService,
    NoTeam,
    RollupError,
    /// Any other body (an excerpt of it), e.g. the JSON of a 429.
    Other(String),
}

impl SlackError {
    fn parse(body: &[u8]) -> SlackError {
        let text = excerpt(body);
        match text.as_str() {
            "invalid_payload" => SlackError::InvalidPayload,
            "user_not_found" => SlackError::UserNotFound,
            "action_prohibited" => SlackError::ActionProhibited,
            "channel_not_found" => SlackError::ChannelNotFound,
            "channel_is_archived" => SlackError::ChannelIsArchived,
            "no_text" => SlackError::NoText,
            "missing_text_or_fallback_or_attachments" => {
                SlackError::MissingTextOrFallbackOrAttachments
            }
            "invalid_token" => SlackError::InvalidToken,
            "no_service" => SlackError::NoService,
            "no_team" => SlackError::NoTeam,
            "rollup_error" => SlackError::RollupError,
            _ => SlackError::Other(text),
        }
    }
}

impl fmt::Display for SlackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = match self {
            SlackError::InvalidPayload => "invalid_payload",
            SlackError::UserNotFound => "user_not_found",
            SlackError::ActionProhibited => "action_prohibited",
            SlackError::ChannelNotFound => "channel_not_found",
            SlackError::ChannelIsArchived => "channel_is_archived",
            SlackError::NoText => "no_text",
            SlackError::MissingTextOrFallbackOrAttachments => {
                "missing_text_or_fallback_or_attachments"
            }
            SlackError::InvalidToken => "invalid_token",
            SlackError::NoService => "no_service",
            SlackError::NoTeam => "no_team",
            SlackError::RollupError => "rollup_error",
            SlackError::Other(body) => return write!(f, "{body:?}"),
        };
        f.write_str(code)
    }
}

#[derive(Debug)]
pub struct SlackNotifier {
    http: HttpClient,
    url: SecretUrl,
}

impl SlackNotifier {
    pub fn new(config: &SlackConfig) -> Result<SlackNotifier, ConfigError> {
        Ok(SlackNotifier {
            http: HttpClient::new(
                PROVIDER,
                config.timeout,
                config.max_body_bytes,
                Exposure::HostOnly,
            )?,
            url: SecretUrl::load(PROVIDER, "urlFrom", &config.url_from)?,
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
pub fn message(n: &Notification) -> Value {
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
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": escape(&ticket_line(n))}]}));
    json!({
        "text": format!("{} ({})", headline(n), ticket_line(n)),
        "blocks": blocks,
    })
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate_chars(text, SECTION_CHARS)}})
}

/// Slack's mrkdwn reserves `&`, `<` and `>`.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip() {
        for code in [
            "invalid_payload",
            "channel_not_found",
            "channel_is_archived",
            "no_text",
            "invalid_token",
        ] {
            assert_eq!(SlackError::parse(code.as_bytes()).to_string(), code);
        }
        assert_eq!(
            SlackError::parse(b"invalid_payload\n"),
            SlackError::InvalidPayload
        );
        assert_eq!(
            SlackError::parse(b"{\"rate\":1}"),
            SlackError::Other("{\"rate\":1}".into())
        );
    }
}
