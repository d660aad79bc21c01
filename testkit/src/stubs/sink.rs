//! Webhook sink: an idempotent receiver for the generic webhook at
//! `POST /hook`.
//!
//! It checks the Standard Webhooks signature (`webhook-signature: v1,<base64
//! HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the
//! decoded `whsec_` secret; 401 when wrong or missing) and demands an
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

/// The sink's secret, and what it accepted and refused.
#[derive(Debug)]
pub struct SinkState {
    secret: Vec<u8>,
    deliveries: Vec<Delivery>,
    keys: BTreeSet<String>,
    rejected: u64,
}

pub type WebhookSink = Stub<SinkState>;

impl WebhookSink {
    /// A sink for deliveries signed with `secret` (`whsec_<base64>`).
    pub async fn start(secret: &str) -> std::io::Result<WebhookSink> {
        let key = secret
            .strip_prefix("whsec_")
            .and_then(|encoded| STANDARD.decode(encoded).ok())
            .ok_or_else(|| std::io::Error::other("the sink's secret must be whsec_<base64>"))?;
        let state = SinkState {
            secret: key,
            deliveries: Vec::new(),
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
    if !standard_signature_is_valid(&state.secret, &headers, &body) {
        state.rejected += 1;
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "bad signature"})),
        )
            .into_response();
    }
    let Some(key) = header("idempotency-key").map(str::to_owned) else {
        state.rejected += 1;
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "Idempotency-Key missing"})),
        )
            .into_response();
    };
    let new_effect = state.keys.insert(key);
    let headers = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    state.deliveries.push(Delivery {
        headers,
        body: body.to_vec(),
        new_effect,
    });
    Json(json!({"accepted": true, "duplicate": !new_effect})).into_response()
}
