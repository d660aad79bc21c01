//! Microsoft Teams through a workflow webhook (Power Automate's "When a
//! Teams webhook request is received"): `POST <url>` with a message that
//! carries one Adaptive Card (schema 1.4, which Teams renders on every
//! client):
//!
//! ```json
//! {"type": "message",
//!  "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": null,
//!                   "content": {"type": "AdaptiveCard", "version": "1.4", "body": […]}}]}
//! ```
//!
//! The card: the headline, why the run is high risk, a fact set with the
//! run's identity (asset, requesting object and uid, ticket, fencing
//! token), the known-exploited CVEs, the top findings. Every text is
//! escaped ([`super::untrusted::full_width_markup`]): Adaptive Cards render a
//! markdown subset, and an advisory's words must not become a link.
//!
//! The workflow answers 202 (an incoming webhook connector answered 200);
//! any 2xx is a delivery, 4xx other than 429 is permanent, 429 and 5xx are
//! retried. There is no idempotency key: a re-send is a second card, and
//! its ticket line says it is one ([`super::message::resend_note`]).

use super::error::NotifyError;
use super::message::{finding_line, headline, known_exploited, resend_note, top_findings};
use super::untrusted::full_width_markup as escape;
use crate::pipeline::Notification;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, SecretUrl};
use crate::providers::secret::SecretFrom;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

const PROFILE: HttpProfile = HttpProfile::webhook("teams");

/// The card's schema version.
pub const CARD_VERSION: &str = "1.4";

/// `{kind: teams, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamsConfig {
    /// The workflow's HTTP POST URL (its `sig` parameter is the credential).
    pub url_from: SecretFrom,
    /// `timeout` (default `10s`), `maxBodyBytes`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

#[derive(Debug)]
pub struct TeamsNotifier {
    http: HttpClient,
    url: SecretUrl,
}

impl TeamsNotifier {
    pub fn new(config: &TeamsConfig) -> Result<TeamsNotifier, ProviderConfigError> {
        Ok(TeamsNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: SecretUrl::load(PROFILE.provider, "urlFrom", &config.url_from)?,
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let message = message(notification);
        let reply = self
            .http
            .send(self.http.post(self.url.url()).json(&message))
            .await?;
        let reply = reply.success()?;
        Ok(format!("HTTP {}", reply.status.as_u16()))
    }
}

/// The message with its one card.
fn message(n: &Notification) -> Value {
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": card(n),
        }],
    })
}

fn card(n: &Notification) -> Value {
    let text = |text: String| json!({"type": "TextBlock", "text": escape(&text), "wrap": true});
    let mut facts = vec![("Asset", n.asset.clone())];
    if let Some(o) = &n.origin {
        facts.push(("Requested by", format!("{}/{}", o.namespace, o.name)));
        facts.push(("UID", o.uid.clone()));
    }
    facts.push(("Ticket", n.ticket_id.clone()));
    facts.push(("Fencing token", n.fencing_token.to_string()));
    if let Some(note) = resend_note(n) {
        facts.push(("Re-sent", note));
    }
    if !known_exploited(n).is_empty() {
        facts.push(("Known exploited", known_exploited(n).join(", ")));
    }
    let facts: Vec<Value> = (facts.into_iter())
        .map(|(title, value)| json!({"title": title, "value": escape(&value)}))
        .collect();
    let mut body = vec![
        json!({"type": "TextBlock", "text": escape(&headline(n)), "size": "Large",
               "weight": "Bolder", "color": "Attention", "wrap": true}),
        json!({"type": "FactSet", "facts": facts}),
    ];
    body.extend(n.risk.reasons.iter().map(|r| text(r.clone())));
    let findings: Vec<Value> = top_findings(n)
        .iter()
        .map(|f| text(finding_line(f)))
        .collect();
    if !findings.is_empty() {
        body.push(
            json!({"type": "TextBlock", "text": "Top findings", "weight": "Bolder",
                         "separator": true, "wrap": true}),
        );
        body.extend(findings);
    }
    json!({
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": CARD_VERSION,
        "fallbackText": escape(&headline(n)),
        "body": body,
    })
}
