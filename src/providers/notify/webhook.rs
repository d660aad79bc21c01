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
//! | `webhook-id`, `webhook-timestamp`, `webhook-signature` | the Standard Webhooks signature (see [`super::signature`]) |
//! | `Idempotency-Key` | the ticket id: receivers deduplicate on it (it is the `webhook-id` too) |
//! | `X-AssetScan-Ticket` | the ticket id |
//! | `X-AssetScan-Fencing-Token` | the sender's fencing token |
//!
//! A re-send of the same notification (a retry, a takeover) has the same
//! `webhook-id` and a new timestamp. Any 2xx is a delivery; the receipt is
//! the status (`HTTP 200`), never the receiver's words (logged at debug).

use super::error::NotifyError;
use super::signature::{Legacy, Schemes, Secrets, Signer};
use crate::pipeline::Notification;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpError, HttpProfile, HttpSettings, SecretUrl};
use crate::providers::secret::SecretFrom;
use reqwest::header::CONTENT_TYPE;
use schemars::JsonSchema;
use serde::Deserialize;

const PROVIDER: &str = "webhook";

const PROFILE: HttpProfile = HttpProfile::webhook(PROVIDER);

pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
pub const TICKET_HEADER: &str = "X-AssetScan-Ticket";
pub const FENCING_TOKEN_HEADER: &str = "X-AssetScan-Fencing-Token";

/// `{kind: webhook, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookConfig {
    /// The receiver's URL (treated as a secret: it may embed a token).
    pub url_from: SecretFrom,
    /// The Standard Webhooks secret: `whsec_` then the base64 of 24 to 64
    /// random bytes. With `legacySignature`, 0.1.0's secret is accepted
    /// here too: the channel then signs the 0.1.0 way only.
    pub secret_from: SecretFrom,
    /// More Standard Webhooks secrets, each signing every delivery beside
    /// `secretFrom` (one `v1,` signature each in `webhook-signature`): a
    /// rotation without a window in which the receiver refuses.
    #[serde(default)]
    pub additional_secrets_from: Vec<SecretFrom>,
    /// Also send 0.1.0's signature (`X-AssetScan-Signature`,
    /// `X-AssetScan-Timestamp`), for receivers not yet moved to the
    /// Standard Webhooks headers. Deprecated: removed in 0.3.0.
    #[serde(default)]
    pub legacy_signature: bool,
    /// The key of 0.1.0's signature, its secret as it was (any text); absent:
    /// `secretFrom`'s text. Only with `legacySignature: true`.
    #[serde(default)]
    pub legacy_secret_from: Option<SecretFrom>,
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
        Ok(WebhookNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: SecretUrl::load(PROVIDER, "urlFrom", &config.url_from)?,
            signer: signer(config)?,
        })
    }

    /// How the channel signs its deliveries.
    pub fn schemes(&self) -> Schemes {
        self.signer.schemes()
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let body = serde_json::to_vec(notification).map_err(|e| HttpError::Request {
            provider: PROVIDER,
            reason: e.to_string(),
        })?;
        let timestamp = assetscan_domain::ticket::now_ms() / 1000;
        let signature = self
            .signer
            .headers(&notification.ticket_id, timestamp, &body);
        let request = signature.into_iter().fold(
            self.http
                .post(self.url.url())
                .header(CONTENT_TYPE, "application/json")
                .header(IDEMPOTENCY_KEY, &notification.ticket_id)
                .header(TICKET_HEADER, &notification.ticket_id)
                .header(FENCING_TOKEN_HEADER, notification.fencing_token.to_string()),
            |request, (name, value)| request.header(name, value),
        );
        let request = request.body(body);
        let reply = self.http.send(request).await?.success()?;
        // The receipt lands in the AssetScanReport a tenant reads: the
        // status only, the receiver's words to the operator's log.
        tracing::debug!(status = reply.status.as_u16(), answer = %reply.excerpt(), "webhook delivered");
        Ok(format!("HTTP {}", reply.status.as_u16()))
    }
}

/// The channel's keys, every secret loaded and checked.
fn signer(config: &WebhookConfig) -> Result<Signer, ProviderConfigError> {
    let load = |field: &'static str, from: &SecretFrom| {
        from.load()
            .map_err(|e| ProviderConfigError::secret(PROVIDER, field, e))
    };
    let primary = load("secretFrom", &config.secret_from)?;
    let additional = config
        .additional_secrets_from
        .iter()
        .map(|from| load("additionalSecretsFrom", from))
        .collect::<Result<Vec<_>, _>>()?;
    let own_legacy = match (&config.legacy_secret_from, config.legacy_signature) {
        (Some(_), false) => {
            return Err(ProviderConfigError::invalid(
                PROVIDER,
                "legacySecretFrom",
                "is used only with `legacySignature: true`",
            ));
        }
        (Some(from), true) => Some(load("legacySecretFrom", from)?),
        (None, _) => None,
    };
    let legacy = match (&own_legacy, config.legacy_signature) {
        (Some(secret), _) => Legacy::Own(secret),
        (None, true) => Legacy::PrimaryText,
        (None, false) => Legacy::Off,
    };
    Signer::new(Secrets {
        primary: &primary,
        additional: &additional,
        legacy,
    })
    .map_err(|e| ProviderConfigError::invalid(PROVIDER, "secretFrom", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_signature_is_an_opt_in_key_of_the_channel() {
        let parse = |yaml: &str| crate::yaml::from_str::<WebhookConfig>(yaml);
        let config = parse("{urlFrom: {env: U}, secretFrom: {env: S}, timeout: 2s}").unwrap();
        assert!(!config.legacy_signature);
        let config =
            parse("{urlFrom: {env: U}, secretFrom: {env: S}, legacySignature: true}").unwrap();
        assert!(config.legacy_signature);
        assert!(
            parse("{urlFrom: {env: U}, secretFrom: {env: S}, legacySignatures: true}").is_err()
        );
    }

    #[test]
    fn a_legacy_secret_needs_legacy_signature() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let yaml = format!(
            "{{urlFrom: {{file: {}}}, secretFrom: {{file: {}}}, legacySecretFrom: {{file: {}}}}}",
            file("url", "http://127.0.0.1:1/"),
            file("secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            file("old", "the-0.1.0-secret"),
        );
        let config = crate::yaml::from_str::<WebhookConfig>(&yaml).unwrap();
        let err = WebhookNotifier::new(&config).unwrap_err().to_string();
        assert!(
            err.contains("legacySecretFrom") && err.contains("legacySignature: true"),
            "{err}"
        );
        assert!(!err.contains("the-0.1.0-secret"), "{err}");
    }
}
