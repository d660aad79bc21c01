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

use super::error::NotifyError;
use super::message::{
    finding_line, headline, known_exploited, origin_line, ticket_line, top_findings,
};
use super::untrusted;
use crate::pipeline::Notification;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, join_path, parse_http_url};
use crate::providers::secret::{Secret, SecretFrom};
use assetscan_domain::text::{excerpt, truncate_bytes};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

const PROVIDER: &str = "wecom";

const PROFILE: HttpProfile = HttpProfile::webhook(PROVIDER);

/// WeCom's limit for markdown `content`, in UTF-8 bytes.
const MAX_CONTENT_BYTES: usize = 4096;

/// `{kind: wecom, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WeComConfig {
    /// The robot's `key` (from its webhook URL).
    pub key_from: SecretFrom,
    /// Default `https://qyapi.weixin.qq.com`.
    #[serde(default = "default_base_url")]
    pub base_url: String,
    /// `timeout` (default `10s`), `maxBodyBytes` for the robot's answer
    /// (default 64 KiB), `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

/// WeCom's API.
pub const DEFAULT_BASE_URL: &str = "https://qyapi.weixin.qq.com";

fn default_base_url() -> String {
    DEFAULT_BASE_URL.to_owned()
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
    pub fn new(config: &WeComConfig) -> Result<WeComNotifier, ProviderConfigError> {
        let base = parse_http_url(PROVIDER, "baseUrl", &config.base_url)?;
        Ok(WeComNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            send_url: join_path(&base, &["cgi-bin", "webhook", "send"]),
            key: config
                .key_from
                .load()
                .map_err(|e| ProviderConfigError::secret(PROVIDER, "keyFrom", e))?,
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
/// Every line's text is escaped ([`untrusted::full_width_markup`]); only the template
/// adds markup.
fn markdown(n: &Notification) -> String {
    let mut text = format!(
        "## <font color=\"warning\">{}</font>\n> {}\n",
        untrusted::full_width_markup(&headline(n)),
        untrusted::full_width_markup(&ticket_line(n))
    );
    if let Some(origin) = origin_line(n) {
        text.push_str(&format!("> {}\n", untrusted::full_width_markup(&origin)));
    }
    if !known_exploited(n).is_empty() {
        text.push_str(&format!(
            "> known exploited: {}\n",
            untrusted::full_width_markup(&known_exploited(n).join(", "))
        ));
    }
    text.push_str("\n**Why**\n");
    for reason in &n.risk.reasons {
        text.push_str(&format!("- {}\n", untrusted::full_width_markup(reason)));
    }
    if !top_findings(n).is_empty() {
        text.push_str("\n**Top findings**\n");
        for f in top_findings(n) {
            text.push_str(&format!(
                "- {}\n",
                untrusted::full_width_markup(&finding_line(f))
            ));
        }
    }
    truncate_bytes(&text, MAX_CONTENT_BYTES)
}
