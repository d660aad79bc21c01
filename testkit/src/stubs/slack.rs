//! Slack incoming-webhook stub: `POST /services/T0000/B0000/XXXX`.
//!
//! Answers `200 ok` (text/plain) for JSON with `text` or `blocks`;
//! `400 invalid_payload` for a body that is not JSON and `400 no_text` for
//! one with neither. `rate_limit_next` and `reject_next` queue Slack's
//! failures: 429 with `Retry-After`, or a status with a plain-text code.

use super::server::{Fault, StubServer, lock};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

/// The webhook path; in real URLs the last three segments are the secret.
pub const WEBHOOK_ROUTE: &str = "/services/T0000/B0000/XXXX";

#[derive(Debug)]
pub struct SlackStub {
    server: StubServer,
    messages: Arc<Mutex<Vec<Value>>>,
}

impl SlackStub {
    pub async fn start() -> std::io::Result<SlackStub> {
        let messages = Arc::new(Mutex::new(Vec::new()));
        let router = Router::new()
            .route(WEBHOOK_ROUTE, post(receive))
            .with_state(Arc::clone(&messages));
        Ok(SlackStub {
            server: StubServer::start(router, &[WEBHOOK_ROUTE]).await?,
            messages,
        })
    }

    pub fn webhook_url(&self) -> String {
        format!("{}{WEBHOOK_ROUTE}", self.server.url())
    }

    /// The next `n` calls get 429 with `Retry-After: <seconds>`.
    pub fn rate_limit_next(&self, n: usize, retry_after_secs: u64) {
        self.server.faults().fail_next(
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
        self.server.faults().fail_next(
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
        lock(&self.messages).clone()
    }

    pub fn webhook_calls(&self) -> u64 {
        self.server.calls(WEBHOOK_ROUTE)
    }
}

impl Deref for SlackStub {
    type Target = StubServer;

    fn deref(&self) -> &StubServer {
        &self.server
    }
}

async fn receive(
    State(messages): State<Arc<Mutex<Vec<Value>>>>,
    body: axum::body::Bytes,
) -> Response {
    let text = |status: StatusCode, body: &'static str| {
        (status, [("content-type", "text/plain")], body).into_response()
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return text(StatusCode::BAD_REQUEST, "invalid_payload");
    };
    if message.get("text").is_none() && message.get("blocks").is_none() {
        return text(StatusCode::BAD_REQUEST, "no_text");
    }
    lock(&messages).push(message);
    text(StatusCode::OK, "ok")
}
