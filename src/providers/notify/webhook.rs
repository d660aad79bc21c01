//! The generic webhook: `POST <url>` with the pipeline's [`Notification`]
//! as JSON — the ticket's facts as they stand:
//!
//! ```json
//! {"ticket_id":"web-1/r1","asset":"web-1","run":"r1","fencing_token":7,
//!  "risk":{"high_risk":true,"reasons":["UBUNTU-CVE-2024-3094 (CVE-2024-3094) CVSS 10.0 >= 7.0"]},
//!  "vulnerabilities":{"total":1,"by_severity":{"CRITICAL":1},"max_cvss":10.0,"cves":["CVE-2024-3094"],
//!    "findings":[{"id":"UBUNTU-CVE-2024-3094","cves":["CVE-2024-3094"],"package":"…","cvss":10.0,"severity":"CRITICAL","summary":"…"}]},
//!  "threat_intel":null,
//!  "origin":{"namespace":"team-a","name":"web-1","uid":"0b7c…"}}
//! ```
//!
//! `origin` names the AssetScan that asked for the run (`null` for the
//! CLI's runs); it is under the signature like every other key.
//!
//! and these headers:
//!
//! | header | value |
//! |---|---|
//! | `Idempotency-Key` | the ticket id: receivers deduplicate on it |
//! | `X-AssetScan-Ticket` | the ticket id |
//! | `X-AssetScan-Fencing-Token` | the sender's fencing token |
//! | `X-AssetScan-Timestamp` | unix seconds at sending |
//! | `X-AssetScan-Signature` | `sha256=<hex HMAC-SHA256 of the exact body bytes>` |
//!
//! The signature covers the body only; the body carries the ticket id and
//! fencing token, so a forged header cannot change what was signed. Any 2xx
//! is a delivery; the receipt is the status and the start of the body.

use super::error::NotifyError;
use crate::pipeline::Notification;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpError, HttpProfile, HttpSettings, SecretUrl};
use crate::providers::secret::{Secret, SecretFrom};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::header::CONTENT_TYPE;
use serde::Deserialize;
use sha2::Sha256;

const PROVIDER: &str = "webhook";

const PROFILE: HttpProfile = HttpProfile::webhook(PROVIDER);

pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
pub const TICKET_HEADER: &str = "X-AssetScan-Ticket";
pub const FENCING_TOKEN_HEADER: &str = "X-AssetScan-Fencing-Token";
pub const TIMESTAMP_HEADER: &str = "X-AssetScan-Timestamp";
pub const SIGNATURE_HEADER: &str = "X-AssetScan-Signature";

/// `{kind: webhook, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookConfig {
    /// The receiver's URL (treated as a secret: it may embed a token).
    pub url_from: SecretFrom,
    /// The HMAC-SHA256 key for `X-AssetScan-Signature`.
    pub secret_from: SecretFrom,
    /// `timeout` (default `10s`), `maxBodyBytes` for the receiver's answer
    /// (default 64 KiB), `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

#[derive(Debug)]
pub struct WebhookNotifier {
    http: HttpClient,
    url: SecretUrl,
    signer: Signer,
}

impl WebhookNotifier {
    pub fn new(config: &WebhookConfig) -> Result<WebhookNotifier, ProviderConfigError> {
        let key = config
            .secret_from
            .load()
            .map_err(|e| ProviderConfigError::secret(PROVIDER, "secretFrom", e))?;
        Ok(WebhookNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: SecretUrl::load(PROVIDER, "urlFrom", &config.url_from)?,
            signer: Signer::new(&key)?,
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let body = serde_json::to_vec(notification).map_err(|e| HttpError::Request {
            provider: PROVIDER,
            reason: e.to_string(),
        })?;
        let request = self
            .http
            .post(self.url.url())
            .header(CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_KEY, &notification.ticket_id)
            .header(TICKET_HEADER, &notification.ticket_id)
            .header(FENCING_TOKEN_HEADER, notification.fencing_token.to_string())
            .header(
                TIMESTAMP_HEADER,
                (assetscan_domain::ticket::now_ms() / 1000).to_string(),
            )
            .header(
                SIGNATURE_HEADER,
                format!("sha256={}", self.signer.sign(&body)),
            )
            .body(body);
        let reply = self.http.send(request).await?.success()?;
        let excerpt = reply.excerpt();
        Ok(match excerpt.is_empty() {
            true => format!("HTTP {}", reply.status.as_u16()),
            false => format!("HTTP {}: {excerpt}", reply.status.as_u16()),
        })
    }
}

/// An HMAC-SHA256 keyed once with the configured secret. Its `Debug` hides
/// the keyed state.
#[derive(Clone)]
struct Signer(Hmac<Sha256>);

impl Signer {
    fn new(key: &Secret) -> Result<Signer, ProviderConfigError> {
        <Hmac<Sha256> as KeyInit>::new_from_slice(key.expose().as_bytes())
            .map(Signer)
            .map_err(|e| ProviderConfigError::invalid(PROVIDER, "secretFrom", e.to_string()))
    }

    /// Hex HMAC-SHA256 of `body`. Receivers compute the same over the raw
    /// bytes they received and compare in constant time.
    fn sign(&self, body: &[u8]) -> String {
        let mut mac = self.0.clone();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_rfc_4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let signer = Signer::new(&Secret::new("Jefe")).unwrap();
        let sig = signer.sign(b"what do ya want for nothing?");
        assert_eq!(format!("{signer:?}"), "Signer(***)");
        assert_eq!(
            sig,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
