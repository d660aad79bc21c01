//! The metrics port's access scenario, shared by `tests/metrics_access.rs`
//! (the emulator) and the e2e suite (a real cluster): the chart's metrics
//! RBAC applied, two ServiceAccounts (one bound to the chart's
//! metrics-reader ClusterRole, one not) with tokens from the TokenRequest
//! API, and the answers of `/metrics` to no token, a token without the
//! permission, and the reader's token.

// Each suite uses its own part of the kit.
#![allow(dead_code)]

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The ServiceAccount the chart's metrics-reader ClusterRole is bound to.
pub const READER: &str = "metrics-reader";
/// A ServiceAccount without it.
pub const OUTSIDER: &str = "metrics-outsider";

/// `helm template` of the chart's metrics-reader ClusterRole for
/// `release`, with its ClusterRoleBinding to [`READER`] in `namespace`.
pub fn reader_role(release: &str, namespace: &str) -> Vec<Value> {
    let chart = assetscan_testkit::tools::repo().join("charts/assetscan-operator");
    let (name, ns) = (
        format!("metrics.reader.serviceAccounts[0].name={READER}"),
        format!("metrics.reader.serviceAccounts[0].namespace={namespace}"),
    );
    let flags = [
        "--set",
        "redis.allowUnauthenticated=true",
        "--set",
        &name,
        "--set",
        &ns,
        "--show-only",
        "templates/metrics-rbac.yaml",
    ];
    let docs = assetscan_testkit::tools::template(release, &chart, namespace, &flags)
        .unwrap_or_else(|e| panic!("helm template: {e}"));
    let reader: Vec<Value> = docs
        .into_iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-metrics-reader"))
        })
        .collect();
    assert_eq!(
        reader.len(),
        2,
        "the reader ClusterRole and its binding: {reader:?}"
    );
    reader
}

/// The cluster-wide API of a rendered document's kind.
pub fn cluster_api(client: &kube::Client, doc: &Value) -> Api<DynamicObject> {
    let api_version = doc["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = doc["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// Creates the cluster-scoped `docs`.
pub async fn create_cluster_scoped(client: &kube::Client, docs: &[Value]) {
    for doc in docs {
        let object: DynamicObject = serde_json::from_value(doc.clone()).expect("object");
        cluster_api(client, doc)
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", doc["metadata"]["name"]));
    }
}

/// Creates [`READER`] and [`OUTSIDER`] in `namespace`; returns their
/// tokens, from the TokenRequest API.
pub async fn tokens(client: &kube::Client, namespace: &str) -> (String, String) {
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace);
    let mut tokens = Vec::new();
    for name in [READER, OUTSIDER] {
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("account");
        accounts
            .create(&PostParams::default(), &account)
            .await
            .unwrap_or_else(|e| panic!("create serviceaccount {name}: {e}"));
        let request: TokenRequest =
            serde_json::from_value(json!({"spec": {"expirationSeconds": 600}})).expect("request");
        let issued = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| panic!("token for {name}: {e}"));
        tokens.push(issued.status.and_then(|s| s.token).expect("a token"));
    }
    (tokens[0].clone(), tokens[1].clone())
}

/// An HTTPS client for the operator's port at `addr`, reached as
/// `localhost`, trusting `ca_pem` (or any certificate without it).
pub fn https_client(addr: SocketAddr, ca_pem: Option<&[u8]>) -> reqwest::Client {
    assetscan_operator::providers::install_crypto_provider();
    let builder = reqwest::Client::builder()
        .resolve("localhost", addr)
        .timeout(Duration::from_secs(10));
    let builder = match ca_pem {
        Some(pem) => builder
            .add_root_certificate(reqwest::Certificate::from_pem(pem).expect("the CA parses")),
        None => builder.danger_accept_invalid_certs(true),
    };
    builder.build().expect("https client")
}

/// Status and body of `GET https://localhost:<port><path>` with `token`.
pub async fn https_get(
    client: &reqwest::Client,
    port: u16,
    path: &str,
    token: Option<&str>,
) -> reqwest::Result<(u16, String)> {
    let mut request = client.get(format!("https://localhost:{port}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request.send().await?;
    let status = answer.status().as_u16();
    Ok((status, answer.text().await?))
}

/// The three answers of the done-when, in order: no token 401, the
/// outsider 403, the reader 200 with the operator's metrics. A new
/// ClusterRoleBinding takes a moment to reach a real API server's
/// authorizer, and denials are cached for seconds: the reader's 200 is
/// waited for.
pub async fn check_answers(client: &reqwest::Client, port: u16, reader: &str, outsider: &str) {
    let answer = async |token| {
        https_get(client, port, "/metrics", token)
            .await
            .expect("answered")
    };
    assert_eq!(answer(None).await.0, 401, "no token");
    assert_eq!(answer(Some("not-a-token")).await.0, 401, "an unknown token");
    assert_eq!(
        answer(Some(outsider)).await.0,
        403,
        "a token without the role"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = answer(Some(reader)).await;
        if status == 200 {
            assert!(
                body.contains("assetscan_"),
                "the operator's metrics:\n{body}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reader still gets {status}: {body}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A TLS Secret's files for `localhost`, written to `dir`: (cert, key, CA
/// PEM). Self-signed: the certificate is its own CA.
pub fn tls_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, made.cert.pem()).expect("write tls.crt");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write tls.key");
    (cert, key, made.cert.pem().into_bytes())
}
