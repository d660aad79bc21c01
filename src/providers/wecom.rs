//! WeCom (企业微信) group robot: `POST <baseUrl>/cgi-bin/webhook/send?key=<KEY>`
//! with a markdown message, `{"msgtype":"markdown","markdown":{"content":…}}`.
//!
//! The robot answers HTTP 200 for errors too; only `errcode == 0` is a
//! delivery. We branch on `errcode`, never on `errmsg` (which carries a hint
//! id and the caller's IP). 45009 (rate limit: 20 messages a minute) and -1
//! (system busy) are worth retrying; every other code — 93000 invalid
//! webhook URL or robot removed, 93004 robot disabled, 93008 not in the
//! group, 44004 empty content, … — is permanent.
//!
//! The key is the only credential and sits in the query string: errors show
//! the host alone. There is no idempotency header; the ticket id is in the
//! text.

use super::ConfigError;
use super::http::{Exposure, HttpClient, join_path, parse_http_url};
use super::notify::{
    Notification, NotifyError, finding_line, headline, known_exploited, ticket_line, top_findings,
};
use super::secret::{Secret, SecretFrom};
use crate::text::{excerpt, truncate_bytes};
use reqwest::Url;
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

const PROVIDER: &str = "wecom";

/// WeCom's limit for markdown `content`, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 4096;

/// `{kind: wecom, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WeComConfig {
    /// The robot's `key` (from its webhook URL).
    pub key_from: SecretFrom,
    /// Default `https://qyapi.weixin.qq.com`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    #[serde(
        default = "default_timeout",
        deserialize_with = "crate::duration::config"
    )]
    pub timeout: Duration,
    /// Cap for the robot's answer. Default 64 KiB.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u64,
}

fn default_base_url() -> String {
    "https://qyapi.weixin.qq.com".to_owned()
}

fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_max_body() -> u64 {
    64 * 1024
}

/// 45009 (frequency limit) and -1 (system busy).
pub fn is_retryable_errcode(errcode: i64) -> bool {
    matches!(errcode, 45009 | -1)
}

#[derive(Debug)]
pub struct WeComNotifier {
    http: HttpClient,
    send_url: Url,
    key: Secret,
}

#[derive(Deserialize)]
struct Answer {
    errcode: i64,
    #[serde(default)]
    errmsg: String,
}

impl WeComNotifier {
    pub fn new(config: &WeComConfig) -> Result<WeComNotifier, ConfigError> {
        let base = parse_http_url(PROVIDER, "baseUrl", &config.base_url)?;
        Ok(WeComNotifier {
            http: HttpClient::new(
                PROVIDER,
                config.timeout,
                config.max_body_bytes,
                Exposure::HostOnly,
            )?,
            send_url: join_path(&base, &["cgi-bin", "webhook", "send"]),
            key: config
                .key_from
                .load()
                .map_err(|e| ConfigError::secret(PROVIDER, "keyFrom", e))?,
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let mut url = self.send_url.clone();
        url.query_pairs_mut().append_pair("key", self.key.expose());
        let body = json!({"msgtype": "markdown", "markdown": {"content": markdown(notification)}});
        let reply = self.http.send(self.http.post(url).json(&body)).await?;
        if reply.status.as_u16() != 200 {
            return Err(reply.status_error().into());
        }
        let answer: Answer = reply.json()?;
        match answer.errcode {
            0 => Ok("errcode 0".to_owned()),
            errcode => Err(NotifyError::WeCom {
                errcode,
                errmsg: excerpt(answer.errmsg.as_bytes()),
            }),
        }
    }
}

/// The message, most important first so that truncation to
/// [`MAX_CONTENT_BYTES`] cuts the tail of the findings, never the ticket id.
pub fn markdown(n: &Notification) -> String {
    let mut text = format!(
        "## <font color=\"warning\">{}</font>\n> {}\n",
        headline(n),
        ticket_line(n)
    );
    if !known_exploited(n).is_empty() {
        text.push_str(&format!(
            "> known exploited: {}\n",
            known_exploited(n).join(", ")
        ));
    }
    text.push_str("\n**Why**\n");
    for reason in &n.risk.reasons {
        text.push_str(&format!("- {reason}\n"));
    }
    if !top_findings(n).is_empty() {
        text.push_str("\n**Top findings**\n");
        for f in top_findings(n) {
            text.push_str(&format!("- {}\n", finding_line(f)));
        }
    }
    truncate_bytes(&text, MAX_CONTENT_BYTES)
}
