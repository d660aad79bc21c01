//! Webhook sink: an idempotent receiver for the generic webhook at
//! `POST /hook`.
//!
//! It checks the Standard Webhooks signature (`webhook-signature: v1,<base64
//! HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the
//! decoded `whsec_` secret; 401 when wrong or missing), or, as a receiver
//! in the middle of an upgrade from 0.1.0 does ([`SinkKeys`]), 0.1.0's
//! `X-AssetScan-Signature` with that release's secret; and demands an
//! `Idempotency-Key` (400 without). The timestamp's age is left to the
//! receiver example's test, which verifies with the specification's library. Every accepted delivery is recorded; a
//! key seen before is acknowledged (200, `"duplicate": true`) but is not a
//! new effect. So `deliveries()` counts what arrived, `effects()` what a real
//! idempotent receiver would have done.

use super::server::lock;
use super::stub::{Shared, Stub};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;
use std::collections::{BTreeMap, BTreeSet};

pub const HOOK_ROUTE: &str = "/hook";

/// One accepted delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    /// False when its idempotency key had been seen before.
    pub new_effect: bool,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }
}

/// The signatures a sink accepts: a delivery passes when one of the schemes
/// it holds a key for verifies.
#[derive(Clone, Copy, Debug, Default)]
pub struct SinkKeys<'a> {
    /// A `whsec_` secret: the Standard Webhooks signature.
    pub standard: Option<&'a str>,
    /// 0.1.0's secret (any text): `X-AssetScan-Signature`.
    pub legacy: Option<&'a str>,
}

/// The signature that let an accepted delivery in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scheme {
    /// Standard Webhooks (`webhook-signature`); also when 0.1.0's verified
    /// too on the same delivery.
    Standard,
    /// 0.1.0's `X-AssetScan-Signature` alone.
    Legacy,
}

/// The sink's keys, and what it accepted and refused.
#[derive(Debug)]
pub struct SinkState {
    standard: Option<Vec<u8>>,
    legacy: Option<Vec<u8>>,
    deliveries: Vec<Delivery>,
    /// The scheme of each accepted delivery, in the order of `deliveries`.
    schemes: Vec<Scheme>,
    /// Every request refused for its signature or its missing key, as it
    /// came: an upgrade test names the runs whose alerts were turned away.
    refusals: Vec<Delivery>,
    keys: BTreeSet<String>,
    rejected: u64,
}

pub type WebhookSink = Stub<SinkState>;

impl WebhookSink {
    /// A sink for deliveries signed with `secret` (`whsec_<base64>`).
    pub async fn start(secret: &str) -> std::io::Result<WebhookSink> {
        Self::start_with(SinkKeys {
            standard: Some(secret),
            legacy: None,
        })
        .await
    }

    /// A sink accepting the schemes `keys` holds a key for.
    pub async fn start_with(keys: SinkKeys<'_>) -> std::io::Result<WebhookSink> {
        let standard = keys
            .standard
            .map(|secret| {
                secret
                    .strip_prefix("whsec_")
                    .and_then(|encoded| STANDARD.decode(encoded).ok())
                    .ok_or_else(|| {
                        std::io::Error::other("the sink's secret must be whsec_<base64>")
                    })
            })
            .transpose()?;
        if standard.is_none() && keys.legacy.is_none() {
            return Err(std::io::Error::other("a sink needs a key"));
        }
        let state = SinkState {
            standard,
            legacy: keys.legacy.map(|secret| secret.as_bytes().to_vec()),
            deliveries: Vec::new(),
            schemes: Vec::new(),
            refusals: Vec::new(),
            keys: BTreeSet::new(),
            rejected: 0,
        };
        Stub::serve(state, &[(HOOK_ROUTE, post(receive))]).await
    }

    /// The URL to configure as the webhook.
    pub fn hook_url(&self) -> String {
        self.url_of(HOOK_ROUTE)
    }

    /// Accepted deliveries, repeats included, in order.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.state().deliveries.clone()
    }

    /// Distinct idempotency keys accepted: the effects an idempotent receiver
    /// would have had.
    pub fn effects(&self) -> usize {
        self.state().keys.len()
    }

    /// Deliveries refused for a bad or missing signature or key.
    pub fn rejected(&self) -> u64 {
        self.state().rejected
    }

    /// Accepted deliveries (repeats included) with the scheme that
    /// verified each, in order.
    pub fn deliveries_by_scheme(&self) -> Vec<(Delivery, Scheme)> {
        let state = self.state();
        state
            .deliveries
            .iter()
            .cloned()
            .zip(state.schemes.iter().copied())
            .collect()
    }

    /// The requests refused for a bad or missing signature or key, in
    /// order (`new_effect` false).
    pub fn refusals(&self) -> Vec<Delivery> {
        self.state().refusals.clone()
    }
}

/// `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` keyed with `key`
/// (the decoded secret).
pub fn standard_signature(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(e) => return format!("unkeyed: {e}"),
    };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// True when one of the space-separated signatures of `webhook-signature`
/// is the `v1` signature of the id, timestamp and body (constant-time).
pub fn standard_signature_is_valid(key: &[u8], headers: &HeaderMap, body: &[u8]) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (Some(id), Some(timestamp), Some(signatures)) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    ) else {
        return false;
    };
    let expected = standard_signature(key, id, timestamp, body);
    signatures.split(' ').any(|candidate| {
        candidate.len() == expected.len()
            && candidate
                .bytes()
                .zip(expected.bytes())
                .fold(0, |acc, (a, b)| acc | (a ^ b))
                == 0
    })
}

/// Verifies the deprecated `X-AssetScan-Signature: sha256=<hex>` over
/// `body` in constant time.
pub fn signature_is_valid(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex_sig) = header.and_then(|h| h.strip_prefix("sha256=")) else {
        return false;
    };
    let (Ok(expected), Ok(mut mac)) = (
        hex::decode(hex_sig),
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret),
    ) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

async fn receive(
    State(state): State<Shared<SinkState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut state = lock(&state);
    let standard = state
        .standard
        .as_deref()
        .is_some_and(|key| standard_signature_is_valid(key, &headers, &body));
    let legacy = state
        .legacy
        .as_deref()
        .is_some_and(|key| signature_is_valid(key, &body, header("x-assetscan-signature")));
    let recorded = |headers: &HeaderMap| Delivery {
        headers: headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect(),
        body: body.to_vec(),
        new_effect: false,
    };
    let key = match header("idempotency-key") {
        _ if !standard && !legacy => Err((StatusCode::UNAUTHORIZED, "bad signature")),
        None => Err((StatusCode::BAD_REQUEST, "Idempotency-Key missing")),
        Some(key) => Ok(key.to_owned()),
    };
    let key = match key {
        Ok(key) => key,
        Err((status, error)) => {
            state.rejected += 1;
            state.refusals.push(recorded(&headers));
            return (status, Json(json!({ "error": error }))).into_response();
        }
    };
    let new_effect = state.keys.insert(key);
    state.deliveries.push(Delivery {
        new_effect,
        ..recorded(&headers)
    });
    state.schemes.push(if standard {
        Scheme::Standard
    } else {
        Scheme::Legacy
    });
    Json(json!({"accepted": true, "duplicate": !new_effect})).into_response()
}
