use super::*;
use assetscan_operator::providers::vulns::{GenericVulnClient, GenericVulnConfig};
use axum::extract::State;
use axum::http::HeaderMap;
use std::sync::{Arc, Mutex};

type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

async fn endpoint(answer: Value) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let route = axum::routing::post(
        |State((seen, answer)): State<(Seen, Value)>,
         headers: HeaderMap,
         axum::Json(body): axum::Json<Value>| async move {
            let auth = headers
                .get("authorization")
                .map(|v| v.to_str().unwrap().to_owned());
            seen.lock().unwrap().push((auth, body));
            axum::Json(answer)
        },
    );
    let router = axum::Router::new()
        .route("/scan", route)
        .with_state((Arc::clone(&seen), answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/scan", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, seen)
}

fn client(dir: &Path, url: String) -> GenericVulnClient {
    GenericVulnClient::new(&GenericVulnConfig {
        url,
        http: HttpSettings {
            max_body_bytes: Some(64 * 1024),
            bearer_token_from: Some(secret_file(dir, "token", "tok-123")),
            ..http_settings(1_000)
        },
        max_findings: 50,
    })
    .unwrap()
}

#[tokio::test]
async fn posts_the_software_and_reads_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = endpoint(json!({"vulnerabilities": [
        {"id": "GHSA-jfh8-c2jp-5v3q", "cves": ["CVE-2021-44228"], "cvss": 10.0, "summary": "Log4Shell", "package": "log4j-core"},
        {"id": "GHSA-jfh8-c2jp-5v3q", "cvss": 10.0},
        {"id": "X-2", "cvss": null},
        {"id": "X-3", "cvss": 4.44, "extra": true}
    ]}))
    .await;
    let software = [
        package("Maven", "log4j-core", "2.14.1"),
        purl("pkg:pypi/jinja2@3.1.4"),
    ];
    let facts = client(dir.path(), url)
        .query("web-1", &software, &Triage::default())
        .await
        .unwrap();

    assert_eq!(facts.total, 3, "duplicate ids count once");
    assert_eq!(
        finding(&facts, "GHSA-jfh8-c2jp-5v3q").severity,
        Severity::Critical
    );
    assert_eq!(finding(&facts, "GHSA-jfh8-c2jp-5v3q").package, "log4j-core");
    assert_eq!(
        (finding(&facts, "X-2").cvss, finding(&facts, "X-2").severity),
        (None, Severity::Unknown)
    );
    assert_eq!(finding(&facts, "X-3").cvss, Some(4.4));
    assert_eq!(facts.cves, ["CVE-2021-44228"]);
    let (auth, body) = seen.lock().unwrap()[0].clone();
    assert_eq!(auth.as_deref(), Some("Bearer tok-123"));
    assert_eq!(
        body,
        json!({"assetId": "web-1", "software": [
            {"name": "log4j-core", "ecosystem": "Maven", "version": "2.14.1"},
            {"purl": "pkg:pypi/jinja2@3.1.4"}
        ]})
    );
}

#[tokio::test]
async fn out_of_range_scores_and_missing_ids_are_malformed() {
    let dir = tempfile::tempdir().unwrap();
    for answer in [
        json!({"vulnerabilities": [{"id": "X", "cvss": 11}]}),
        json!({"vulnerabilities": [{"id": ""}]}),
        json!({"vulns": []}),
    ] {
        let (url, _) = endpoint(answer.clone()).await;
        let err = client(dir.path(), url)
            .query("a", &[], &Triage::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, VulnError::Http(HttpError::Malformed { .. })),
            "{answer}: {err}"
        );
        assert!(!err.is_retryable());
        assert!(!err.to_string().contains("tok-123"));
    }
}
