//! A receiver that answers as a service with a documented reply does and
//! keeps every JSON body it took: PagerDuty's Events API v2 (202 with
//! `{"status": "success", "dedup_key": …}`), a Teams workflow (202, no
//! body), Alertmanager's webhook receiver and its API (200). It judges nothing: the
//! tests check what it kept against the service's published schema
//! (`receivers::validate`). A body that is not JSON is answered 400, as
//! each of these services does. Faults queue the services' failures (400,
//! 429, 5xx).

use super::stub::{Shared, Stub};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub const RECEIVER_ROUTE: &str = "/receive";

/// Alertmanager's API path, served alike, so that its faults can be queued
/// for a notifier that posts there under a base URL ([`ReceiverStub::url`]).
pub const ALERTS_ROUTE: &str = "/api/v2/alerts";

/// How the receiver answers a JSON body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 202 `{"status":"success","message":"Event processed","dedup_key":<the body's>}`.
    PagerDuty,
    /// 202 with an empty body.
    Accepted,
    /// 200 with an empty body.
    Ok,
}

/// One body taken, with its headers (names in lower case).
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: BTreeMap<String, String>,
    pub body: Value,
}

#[derive(Debug)]
pub struct ReceiverState {
    answer: Answer,
    received: Vec<Received>,
}

pub type ReceiverStub = Stub<ReceiverState>;

impl ReceiverStub {
    pub async fn start(answer: Answer) -> std::io::Result<ReceiverStub> {
        let state = ReceiverState {
            answer,
            received: Vec::new(),
        };
        Stub::serve(
            state,
            &[
                (RECEIVER_ROUTE, post(receive)),
                (ALERTS_ROUTE, post(receive)),
            ],
        )
        .await
    }

    pub fn receiver_url(&self) -> String {
        self.url_of(RECEIVER_ROUTE)
    }

    /// Every body taken, in order.
    pub fn received(&self) -> Vec<Received> {
        self.state().received.clone()
    }

    /// As Alertmanager's webhook receiver: the first notification of the
    /// group whose `asset` label is `asset`, with `status` (`firing`,
    /// `resolved`).
    pub fn alertmanager_told(&self, status: &str, asset: &str) -> Option<Value> {
        (self.state().received.iter())
            .map(|r| &r.body)
            .find(|b| b["status"] == status && b["groupLabels"]["asset"] == asset)
            .cloned()
    }
}

async fn receive(
    State(state): State<Shared<ReceiverState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return super::server::reply(
            400,
            &[],
            br#"{"status":"invalid event","message":"not JSON"}"#.to_vec(),
        );
    };
    let headers = (headers.iter())
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    let mut state = super::server::lock(&state);
    let answer = state.answer;
    let dedup_key = body["dedup_key"].clone();
    state.received.push(Received { headers, body });
    match answer {
        Answer::PagerDuty => {
            let reply =
                json!({"status": "success", "message": "Event processed", "dedup_key": dedup_key});
            super::server::reply(
                202,
                &[("content-type", "application/json")],
                reply.to_string().into_bytes(),
            )
        }
        Answer::Accepted => super::server::reply(202, &[], Vec::new()),
        Answer::Ok => super::server::reply(200, &[], Vec::new()),
    }
}
