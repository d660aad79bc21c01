//! WeCom group-robot stub: `POST /cgi-bin/webhook/send?key=<KEY>`.
//!
//! Like the real robot it always answers HTTP 200 and reports errors in
//! `errcode`: 93000 for a wrong key, 44004 for empty content, and (the
//! stub's choice of code) 40058 for markdown content over 4096 bytes. Errors
//! a test wants (45009, -1, 93004…) are queued with `errcode_next`. The
//! `errmsg` texts follow real bodies, hint and IP included.

use super::server::{Fault, lock};
use super::stub::{Shared, Stub};
use axum::Json;
use axum::extract::{Query, State};
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::HashMap;

pub const SEND_ROUTE: &str = "/cgi-bin/webhook/send";

/// The robot's key, and the contents it accepted.
#[derive(Debug)]
pub struct WeComState {
    key: String,
    messages: Vec<String>,
}

pub type WeComStub = Stub<WeComState>;

/// The robot's answer for `errcode`, as HTTP 200 JSON.
pub fn errcode_body(errcode: i64) -> Value {
    let what = match errcode {
        0 => return json!({"errcode": 0, "errmsg": "ok"}),
        93000 => "invalid webhook url",
        45009 => "api freq out of limit",
        44004 => "empty content",
        -1 => "system busy",
        _ => "error",
    };
    json!({
        "errcode": errcode,
        "errmsg": format!("{what}, hint: [1708397705432012366598976], from ip: 127.0.0.1, more info at https://open.work.weixin.qq.com/devtool/query?e={errcode}"),
    })
}

impl WeComStub {
    pub async fn start(key: &str) -> std::io::Result<WeComStub> {
        let state = WeComState {
            key: key.to_owned(),
            messages: Vec::new(),
        };
        Stub::serve(state, &[(SEND_ROUTE, post(send))]).await
    }

    /// The next `n` calls answer HTTP 200 with this `errcode`.
    pub fn errcode_next(&self, n: usize, errcode: i64) {
        let body = errcode_body(errcode).to_string().into_bytes();
        self.faults().fail_next(
            n,
            Fault::Reply {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body,
            },
        );
    }

    /// Markdown or text contents accepted, in order.
    pub fn messages(&self) -> Vec<String> {
        self.state().messages.clone()
    }

    pub fn send_calls(&self) -> u64 {
        self.calls(SEND_ROUTE)
    }
}

async fn send(
    State(state): State<Shared<WeComState>>,
    Query(query): Query<HashMap<String, String>>,
    body: axum::body::Bytes,
) -> Json<Value> {
    let mut state = lock(&state);
    if query.get("key") != Some(&state.key) {
        return Json(errcode_body(93000));
    }
    let message: Value = serde_json::from_slice(&body).unwrap_or_default();
    let content = match message["msgtype"].as_str() {
        Some(kind @ ("markdown" | "text")) => message[kind]["content"].as_str().unwrap_or_default(),
        _ => "",
    };
    if content.is_empty() {
        return Json(errcode_body(44004));
    }
    if content.len() > 4096 {
        return Json(errcode_body(40058));
    }
    state.messages.push(content.to_owned());
    Json(errcode_body(0))
}
