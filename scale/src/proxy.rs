//! A counting HTTP proxy in front of the API emulator: the operator talks to
//! it, so every request the operator makes is counted by verb and resource,
//! exactly as an API server's audit log would show them.

use anyhow::{Context as _, Result};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Request counts keyed by `"<verb> <resource>[/<subresource>]"`, and the
/// bytes of the bodies sent to the API server and received from it
/// (watches included).
#[derive(Clone, Default)]
pub struct Counts(Arc<Mutex<BTreeMap<String, u64>>>, Arc<[AtomicU64; 2]>);

impl Counts {
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Body bytes sent to the API server, and received from it.
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.1[0].load(Ordering::Relaxed),
            self.1[1].load(Ordering::Relaxed),
        )
    }

    fn add(&self, key: String) {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default() += 1;
    }
}

/// Whether a counted key is a write (what reaches etcd).
pub fn is_write(key: &str) -> bool {
    ["create ", "update ", "patch ", "delete "]
        .iter()
        .any(|verb| key.starts_with(verb))
}

/// `"<verb> <resource>[/<subresource>]"` of a request, as the API server's
/// request info names it.
pub fn classify(method: &str, path: &str, query: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // Skip `/api/v1` or `/apis/<group>/<version>`, then `namespaces/<ns>`.
    let mut rest: &[&str] = match parts.first() {
        Some(&"api") => parts.get(2..).unwrap_or_default(),
        Some(&"apis") => parts.get(3..).unwrap_or_default(),
        _ => &parts,
    };
    if rest.len() > 2 && rest[0] == "namespaces" {
        rest = &rest[2..];
    }
    let resource = rest.first().copied().unwrap_or("-");
    let named = rest.len() > 1;
    let resource = match rest.get(2) {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, named, watch) {
        (_, _, true) => "watch",
        ("GET", true, _) => "get",
        ("GET", false, _) => "list",
        ("POST", ..) => "create",
        ("PUT", ..) => "update",
        ("PATCH", ..) => "patch",
        ("DELETE", ..) => "delete",
        _ => "other",
    };
    format!("{verb} {resource}")
}

#[derive(Clone)]
struct Upstream {
    base: String,
    http: reqwest::Client,
    counts: Counts,
}

/// Serves the proxy on a free loopback port; returns its URL.
pub async fn start(upstream: &str, counts: Counts) -> Result<String> {
    let state = Upstream {
        base: upstream.trim_end_matches('/').to_owned(),
        http: reqwest::Client::builder()
            .build()
            .context("proxy http client")?,
        counts,
    };
    let app = axum::Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("proxy bind")?;
    let addr = listener.local_addr().context("proxy address")?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}"))
}

/// Hop-by-hop headers: never forwarded.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "transfer-encoding" | "keep-alive" | "upgrade" | "host" | "content-length"
    )
}

async fn forward(State(up): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let key = classify(parts.method.as_str(), &path, &query);
    up.counts.add(key.clone());
    let url = match parts.uri.path_and_query() {
        Some(pq) => format!("{}{pq}", up.base),
        None => format!("{}{path}", up.base),
    };
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return status(StatusCode::PAYLOAD_TOO_LARGE);
    };
    up.counts.1[0].fetch_add(bytes.len() as u64, Ordering::Relaxed);
    let mut outgoing = up.http.request(parts.method, url).body(bytes);
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let Ok(answer) = outgoing.send().await else {
        return status(StatusCode::BAD_GATEWAY);
    };
    // Conflicts and refused preconditions: the cost of replicas that race.
    if matches!(answer.status().as_u16(), 409 | 422) {
        up.counts
            .add(format!("refused {} {key}", answer.status().as_u16()));
    }
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if !hop_by_hop(name) {
            response = response.header(name, value);
        }
    }
    let counts = up.counts.clone();
    let received = answer.bytes_stream().inspect(move |chunk| {
        if let Ok(chunk) = chunk {
            counts.1[1].fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
    });
    response
        .body(Body::from_stream(received))
        .unwrap_or_else(|_| status(StatusCode::BAD_GATEWAY))
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = code;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_as_the_api_server_names_requests() {
        let base = "/apis/assetscan.io/v1alpha1/namespaces/default/assetscans";
        assert_eq!(
            classify("GET", base, "watch=true&resourceVersion=1"),
            "watch assetscans"
        );
        assert_eq!(classify("GET", base, "limit=500"), "list assetscans");
        assert_eq!(classify("GET", &format!("{base}/a"), ""), "get assetscans");
        assert_eq!(
            classify("PATCH", &format!("{base}/a/status"), ""),
            "patch assetscans/status"
        );
        assert_eq!(
            classify(
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                ""
            ),
            "create events"
        );
        assert_eq!(classify("GET", "/api/v1/namespaces", ""), "list namespaces");
        assert!(is_write("patch assetscans") && !is_write("get assetscans"));
    }
}
