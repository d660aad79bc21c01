//! Slack incoming-webhook stub: `POST /services/T0000/B0000/XXXX`.
//!
//! Answers `200 ok` (text/plain) for JSON with `text` or `blocks`;
//! `400 invalid_payload` for a body that is not JSON and `400 no_text` for
//! one with neither. `rate_limit_next` and `reject_next` queue Slack's
//! failures: 429 with `Retry-After`, or a status with a plain-text code.

use super::server::{Fault, lock};
use super::stub::{Shared, Stub};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

/// The webhook path; in real URLs the last three segments are the secret.
pub const WEBHOOK_ROUTE: &str = "/services/T0000/B0000/XXXX";

/// The messages the Slack stub accepted.
#[derive(Debug, Default)]
pub struct SlackState {
    messages: Vec<Value>,
}

pub type SlackStub = Stub<SlackState>;

impl SlackStub {
    pub async fn start() -> std::io::Result<SlackStub> {
        Stub::serve(SlackState::default(), &[(WEBHOOK_ROUTE, post(receive))]).await
    }

    pub fn webhook_url(&self) -> String {
        self.url_of(WEBHOOK_ROUTE)
    }

    /// The next `n` calls get 429 with `Retry-After: <seconds>`.
    pub fn rate_limit_next(&self, n: usize, retry_after_secs: u64) {
        self.faults().fail_next(
            n,
            Fault::Reply {
                status: 429,
                headers: vec![
                    ("retry-after".into(), retry_after_secs.to_string()),
                    ("content-type".into(), "application/json".into()),
                ],
                body: br#"{"ok":false,"error":"rate_limited"}"#.to_vec(),
            },
        );
    }

    /// The next `n` calls get `status` with the plain-text `code`
    /// (e.g. 404 `channel_not_found`).
    pub fn reject_next(&self, n: usize, status: u16, code: &str) {
        self.faults().fail_next(
            n,
            Fault::Reply {
                status,
                headers: vec![("content-type".into(), "text/plain".into())],
                body: code.as_bytes().to_vec(),
            },
        );
    }

    /// JSON bodies accepted, in order.
    pub fn messages(&self) -> Vec<Value> {
        self.state().messages.clone()
    }

    pub fn webhook_calls(&self) -> u64 {
        self.calls(WEBHOOK_ROUTE)
    }
}

async fn receive(State(state): State<Shared<SlackState>>, body: axum::body::Bytes) -> Response {
    let text = |status: StatusCode, body: &'static str| {
        (status, [("content-type", "text/plain")], body).into_response()
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return text(StatusCode::BAD_REQUEST, "invalid_payload");
    };
    if message.get("text").is_none() && message.get("blocks").is_none() {
        return text(StatusCode::BAD_REQUEST, "no_text");
    }
    lock(&state).messages.push(message);
    text(StatusCode::OK, "ok")
}
