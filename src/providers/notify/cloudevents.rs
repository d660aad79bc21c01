//! CloudEvents 1.0 over HTTP, for event buses (Knative Eventing, Argo
//! Events) and anything else that speaks them: `POST <url>` with one event
//! whose data is the generic webhook's body (the pipeline's
//! [`Notification`]).
//!
//! | attribute | value |
//! |---|---|
//! | `specversion` | `1.0` |
//! | `id` | the ticket id: a re-send of a run is the same event |
//! | `source` | `<source>/namespaces/<ns>/assetscans/<name>` (`<source>/cli` for the CLI's runs) |
//! | `type` | `io.assetscan.asset.highrisk.v1` |
//! | `subject` | the asset id |
//! | `time` | when it was sent |
//! | `datacontenttype` | `application/json` |
//! | `fencingtoken` | the sender's fencing token (an extension attribute) |
//!
//! `mode: binary` (the default) sends the attributes as `ce-` headers,
//! percent-encoded as the HTTP binding says, and the data as the body;
//! `mode: structured` sends the whole event as
//! `application/cloudevents+json`. A ticket id is unique within its
//! namespace, and the source names the namespace, so `source` + `id`
//! identify one run's alert as the specification asks: a consumer that
//! drops duplicates by them turns re-sends into one effect.
//!
//! Any 2xx is a delivery (a Knative broker answers 202); 4xx other than
//! 429 is permanent, 429 and 5xx are retried.

use super::error::NotifyError;
use crate::pipeline::Notification;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpError, HttpProfile, HttpSettings, SecretUrl};
use crate::providers::secret::SecretFrom;
use k8s_openapi::jiff::Timestamp;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use reqwest::header::CONTENT_TYPE;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

const PROFILE: HttpProfile = HttpProfile::webhook("cloudevents");

/// The event type of a high-risk run.
pub const EVENT_TYPE: &str = "io.assetscan.asset.highrisk.v1";

/// The `source` prefix when none is configured.
const DEFAULT_SOURCE: &str = "/assetscan-operator";

/// What the HTTP binding (3.1.3.2) percent-encodes in a header value:
/// space, `"`, `%`, controls, and everything outside printable ASCII (which
/// `utf8_percent_encode` always encodes).
const HEADER_VALUE: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'%');

/// How the event travels in the HTTP message.
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Attributes as `ce-` headers, the data as the body.
    #[default]
    Binary,
    /// The whole event as `application/cloudevents+json`.
    Structured,
}

/// `{kind: cloudevents, ...}` in `notifications`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloudEventsConfig {
    /// The sink's URL (a broker's ingress, an event source's endpoint).
    pub url_from: SecretFrom,
    /// `binary` (default) or `structured`.
    #[serde(default)]
    pub mode: Mode,
    /// The URI reference that starts every event's `source`; default
    /// `/assetscan-operator`. Say which cluster sends when several do
    /// (`//assetscan.example.com/prod-eu`).
    #[serde(default)]
    pub source: Option<String>,
    /// `timeout` (default `10s`), `maxBodyBytes`, `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

#[derive(Debug)]
pub struct CloudEventsNotifier {
    http: HttpClient,
    url: SecretUrl,
    mode: Mode,
    source: String,
}

impl CloudEventsNotifier {
    pub fn new(config: &CloudEventsConfig) -> Result<CloudEventsNotifier, ProviderConfigError> {
        let source = config.source.as_deref().unwrap_or(DEFAULT_SOURCE);
        let source = source.trim_end_matches('/');
        if source.is_empty() || !source.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ProviderConfigError::invalid(
                PROFILE.provider,
                "source",
                "must be a URI reference of printable ASCII characters",
            ));
        }
        Ok(CloudEventsNotifier {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: SecretUrl::load(PROFILE.provider, "urlFrom", &config.url_from)?,
            mode: config.mode,
            source: source.to_owned(),
        })
    }

    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        let data = serde_json::to_value(notification).map_err(|e| HttpError::Request {
            provider: PROFILE.provider,
            reason: e.to_string(),
        })?;
        let attributes = attributes(notification, &self.source, Timestamp::now());
        let request = self.http.post(self.url.url());
        let request = match self.mode {
            Mode::Binary => attributes
                .iter()
                .fold(request, |request, (name, value)| {
                    let value = utf8_percent_encode(value, HEADER_VALUE).to_string();
                    request.header(format!("ce-{name}"), value)
                })
                .header("ce-fencingtoken", notification.fencing_token.to_string())
                .json(&data),
            Mode::Structured => {
                let mut event: serde_json::Map<String, Value> = (attributes.into_iter())
                    .map(|(name, value)| (name.to_owned(), Value::from(value)))
                    .collect();
                event.insert("fencingtoken".into(), notification.fencing_token.into());
                event.insert("data".into(), data);
                let body = serde_json::to_vec(&event).map_err(|e| HttpError::Request {
                    provider: PROFILE.provider,
                    reason: e.to_string(),
                })?;
                (request.header(CONTENT_TYPE, "application/cloudevents+json; charset=UTF-8"))
                    .body(body)
            }
        };
        let reply = self.http.send(request).await?.success()?;
        Ok(format!("HTTP {}", reply.status.as_u16()))
    }
}

/// The event's attributes as text, but `fencingtoken` (an integer) and
/// the data.
fn attributes(n: &Notification, source: &str, now: Timestamp) -> Vec<(&'static str, String)> {
    let source = match &n.origin {
        Some(o) => format!("{source}/namespaces/{}/assetscans/{}", o.namespace, o.name),
        None => format!("{source}/cli"),
    };
    vec![
        ("specversion", "1.0".to_owned()),
        ("id", n.ticket_id.clone()),
        ("source", source),
        ("type", EVENT_TYPE.to_owned()),
        ("subject", n.asset.clone()),
        ("time", format!("{now:.3}")),
        ("datacontenttype", "application/json".to_owned()),
    ]
}
