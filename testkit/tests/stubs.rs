//! The provider stubs on the wire, through a bare HTTP/1.1 client, so that
//! what they promise does not depend on the operator's providers.

use assetscan_testkit::stubs::fixtures::{EPSS_EXAMPLE, KEV_CATALOG, OSV_RECORDS};
use assetscan_testkit::stubs::{
    EpssStub, Fault, Fixtures, InventoryStub, OsvStub, ProviderStubs, SlackStub, WeComStub,
    WebhookSink,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a fresh connection (`Connection: close`), read to the end.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("no header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    call(addr, "GET", path, &[], b"").await
}

/// The Standard Webhooks signature of message `id` at timestamp 1 with the
/// key `key` (the sink's secret is `whsec_` + base64 of it).
fn sign(key: &str, id: &str, body: &[u8]) -> String {
    assetscan_testkit::stubs::sink::standard_signature(key.as_bytes(), id, "1", body)
}

/// `whsec_` + base64 of `key`.
fn whsec(key: &str) -> String {
    use base64::Engine;
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// The data set ships with the repository: a fresh clone needs nothing
/// beside it.
#[test]
fn fixtures_are_found_in_the_repository() {
    let fixtures = Fixtures::locate();
    if std::env::var_os(assetscan_testkit::stubs::fixtures::FIXTURES_ENV).is_none() {
        assert_eq!(
            fixtures.dir(),
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
        );
    }
    for file in ["README.md", KEV_CATALOG, EPSS_EXAMPLE] {
        assert!(
            fixtures.path(file).is_file(),
            "{file} missing in {}",
            fixtures.dir().display()
        );
    }
}

/// A data set that is missing (a wrong `ASSETSCAN_FIXTURES`, a moved
/// folder) is reported with the path that was looked for, not a bare
/// "No such file or directory".
#[tokio::test]
async fn a_missing_fixture_is_reported_with_its_path() {
    let empty = tempfile::tempdir().unwrap();
    let fixtures = Fixtures::at(empty.path());
    let err = fixtures.read(KEV_CATALOG).unwrap_err().to_string();
    assert!(
        err.contains(&fixtures.path(KEV_CATALOG).display().to_string()),
        "{err}"
    );

    let err = ProviderStubs::start_from(&fixtures).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(
        err.to_string()
            .contains(&fixtures.path(OSV_RECORDS).display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn faults_queue_then_stick_then_clear() {
    let stub = InventoryStub::start().await.unwrap();
    stub.set_online("web-1", true);
    stub.faults().fail_next(1, Fault::Status(503));
    stub.faults().always(Fault::WrongShape);

    assert_eq!(get(stub.addr(), "/assets/web-1").await.status, 503);
    let wrong = get(stub.addr(), "/assets/web-1").await;
    assert_eq!(wrong.status, 200);
    assert!(wrong.json().get("online").is_none());
    stub.faults().fail_next(1, Fault::Malformed);
    assert!(
        serde_json::from_slice::<Value>(&get(stub.addr(), "/assets/web-1").await.body).is_err()
    );

    stub.faults().clear();
    assert_eq!(
        get(stub.addr(), "/assets/web-1").await.json()["online"],
        true
    );
    assert_eq!(get(stub.addr(), "/assets/other").await.status, 404);
    assert_eq!(stub.asset_calls(), 5);
    assert_eq!(get(stub.addr(), "/unrouted").await.status, 404);
    assert_eq!(stub.total_calls(), 5, "only stub routes are counted");
}

/// The inventory stub answers `GET /assets/a` normally (200): `why`.
async fn assert_answers_asset_a(stub: &InventoryStub, why: &str) {
    assert_eq!(get(stub.addr(), "/assets/a").await.status, 200, "{why}");
}

#[tokio::test]
async fn latency_and_hang() {
    let stub = InventoryStub::start().await.unwrap();
    stub.set_online("a", false);
    stub.faults().set_latency(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(get(stub.addr(), "/assets/a").await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(300));

    stub.faults().clear();
    stub.faults().fail_next(1, Fault::Hang);
    let hung =
        tokio::time::timeout(Duration::from_millis(300), get(stub.addr(), "/assets/a")).await;
    assert!(hung.is_err(), "a hanging stub never answers");
    assert_answers_asset_a(&stub, "the next call is normal").await;
}

#[tokio::test]
async fn a_held_call_is_answered_only_after_the_release() {
    let stub = InventoryStub::start().await.unwrap();
    stub.set_online("a", true);
    stub.faults().hold();
    let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let call = tokio::spawn({
        let (addr, released) = (stub.addr(), released.clone());
        async move {
            let answer = get(addr, "/assets/a").await;
            (
                answer.status,
                released.load(std::sync::atomic::Ordering::SeqCst),
            )
        }
    });
    assetscan_testkit::wait::until("the call arrived", Duration::from_secs(30), async || {
        stub.asset_calls() == 1
    })
    .await;
    let route = assetscan_testkit::stubs::inventory::ASSET_ROUTE;
    assert_eq!(stub.answers(route), 0, "held, not answered");
    released.store(true, std::sync::atomic::Ordering::SeqCst);
    stub.faults().release();
    assert_eq!(
        call.await.unwrap(),
        (200, true),
        "answered after the release"
    );
    assert_eq!(stub.answers(route), 1);
    assert_answers_asset_a(&stub, "the gate stays open").await;
}

#[tokio::test]
async fn oversized_bodies_are_streamed_without_a_length() {
    let stub = InventoryStub::start().await.unwrap();
    stub.faults()
        .fail_next(1, Fault::Oversized(10 * 1024 * 1024));
    let answer = get(stub.addr(), "/assets/a").await;
    assert_eq!(answer.status, 200);
    assert!(!answer.headers.contains_key("content-length"));
    assert_eq!(
        answer.headers.get("transfer-encoding").map(String::as_str),
        Some("chunked")
    );
    assert!(
        answer.body.len() >= 10 * 1024 * 1024,
        "{} bytes",
        answer.body.len()
    );
}

#[tokio::test]
async fn sink_checks_signatures_and_counts_distinct_keys() {
    const KEY: &str = "k3y-of-twenty-four-bytes";
    let sink = WebhookSink::start(&whsec(KEY)).await.unwrap();
    let post =
        |body: &'static [u8], id: &'static str, signature: String, key: Option<&'static str>| {
            let addr = sink.addr();
            async move {
                let mut headers = vec![
                    ("webhook-id", id),
                    ("webhook-timestamp", "1"),
                    ("webhook-signature", signature.as_str()),
                ];
                if let Some(key) = key {
                    headers.push(("Idempotency-Key", key));
                }
                call(addr, "POST", "/hook", &headers, body).await
            }
        };
    // The same delivery twice: accepted both times, a duplicate the second.
    for duplicate in [false, true] {
        let reply = post(
            b"{\"n\":1}",
            "a/1",
            sign(KEY, "a/1", b"{\"n\":1}"),
            Some("a/1"),
        )
        .await;
        assert_eq!(
            (reply.status, reply.json()["duplicate"].clone()),
            (200, json!(duplicate))
        );
    }
    assert_eq!(
        post(
            b"{\"n\":2}",
            "a/2",
            sign(KEY, "a/2", b"{\"n\":2}"),
            Some("a/2")
        )
        .await
        .status,
        200
    );
    // Refused: the same body, signed wrongly, under another id, or sent
    // without a key.
    for (id, signature, key, status, why) in [
        (
            "a/3",
            sign(KEY, "a/3", b"{\"n\":2}"),
            Some("a/3"),
            401,
            "signature of other bytes",
        ),
        (
            "a/3",
            sign("other", "a/3", b"{\"n\":3}"),
            Some("a/3"),
            401,
            "other secret",
        ),
        (
            "a/4",
            sign(KEY, "a/3", b"{\"n\":3}"),
            Some("a/3"),
            401,
            "other id",
        ),
        ("a/3", sign(KEY, "a/3", b"{\"n\":3}"), None, 400, "no key"),
    ] {
        let refused = post(b"{\"n\":3}", id, signature, key).await;
        assert_eq!(refused.status, status, "{why}");
    }

    assert_eq!(sink.deliveries().len(), 3);
    assert_eq!(sink.effects(), 2);
    assert_eq!(sink.rejected(), 4);
    assert_eq!(sink.deliveries()[0].header("Idempotency-Key"), Some("a/1"));
    assert_eq!(sink.deliveries()[2].json(), json!({"n": 2}));
}

#[tokio::test]
async fn osv_stub_pages_serves_records_and_404s() {
    let stub = OsvStub::start().await.unwrap();
    assert_eq!(
        stub.load_records_dir(&Fixtures::locate().path(OSV_RECORDS))
            .unwrap(),
        15
    );
    stub.set_package_vulns(
        "PyPI",
        "p",
        &["GHSA-34jh-p97f-mpxf", "PYSEC-2023-74", "GO-2024-2963"],
    );
    stub.set_page_size(Some(2));
    let batch = |body: Value| {
        let addr = stub.addr();
        async move {
            call(
                addr,
                "POST",
                "/v1/querybatch",
                &[],
                &serde_json::to_vec(&body).unwrap(),
            )
            .await
        }
    };

    let first = batch(json!({"queries": [{"package": {"name": "p", "ecosystem": "PyPI"}, "version": "1"}, {"package": {"purl": "pkg:npm/none@1"}}]})).await.json();
    assert_eq!(
        first["results"][0]["vulns"][0],
        json!({"id": "GHSA-34jh-p97f-mpxf", "modified": "2024-06-17T21:37:20Z"})
    );
    assert_eq!(first["results"][0]["next_page_token"], "2");
    assert_eq!(first["results"][1], json!({}));
    let second = batch(
        json!({"queries": [{"package": {"name": "p", "ecosystem": "PyPI"}, "page_token": "2"}]}),
    )
    .await
    .json();
    assert_eq!(second["results"][0]["vulns"].as_array().unwrap().len(), 1);
    assert!(second["results"][0].get("next_page_token").is_none());

    let record = get(stub.addr(), "/v1/vulns/GO-2024-2963").await;
    assert_eq!(
        record.body,
        Fixtures::locate()
            .read(&format!("{OSV_RECORDS}/GO-2024-2963.json"))
            .unwrap(),
        "served verbatim"
    );
    let missing = get(stub.addr(), "/v1/vulns/NOPE-1").await;
    assert_eq!(
        (missing.status, missing.json()["code"].clone()),
        (404, json!(5))
    );
    assert_eq!((stub.querybatch_calls(), stub.vuln_calls()), (2, 2));
}

#[tokio::test]
async fn epss_stub_answers_in_first_format() {
    let stub = EpssStub::start().await.unwrap();
    let rows = stub
        .load_response(&Fixtures::locate().read(EPSS_EXAMPLE).unwrap())
        .unwrap();
    assert_eq!(rows, 2);
    let answer = get(stub.addr(), "/epss?cve=CVE-2021-40438%2CCVE-2000-0001")
        .await
        .json();
    assert_eq!(answer["status"], "OK");
    assert_eq!(answer["total"], 1);
    assert_eq!(
        answer["data"],
        json!([{"cve": "CVE-2021-40438", "epss": "0.972240000", "percentile": "1.000000000", "date": "2022-02-28"}])
    );
    assert_eq!(stub.cve_params(), ["CVE-2021-40438,CVE-2000-0001"]);
}

#[tokio::test]
async fn wecom_stub_answers_200_with_errcodes() {
    let stub = WeComStub::start("key-1").await.unwrap();
    let send = |key: &'static str, content: String| {
        let addr = stub.addr();
        async move {
            let body = serde_json::to_vec(
                &json!({"msgtype": "markdown", "markdown": {"content": content}}),
            )
            .unwrap();
            call(
                addr,
                "POST",
                &format!("/cgi-bin/webhook/send?key={key}"),
                &[],
                &body,
            )
            .await
        }
    };
    let errcode = |a: Answer| {
        assert_eq!(a.status, 200);
        a.json()["errcode"].as_i64().unwrap()
    };
    assert_eq!(errcode(send("key-1", "hello".into()).await), 0);
    assert_eq!(errcode(send("key-2", "hello".into()).await), 93000);
    assert_eq!(errcode(send("key-1", String::new()).await), 44004);
    assert_eq!(errcode(send("key-1", "漏".repeat(1366)).await), 40058); // 4098 bytes
    stub.errcode_next(1, 45009);
    let limited = send("key-1", "hello".into()).await;
    assert!(limited.text().contains("api freq out of limit"));
    assert_eq!(errcode(limited), 45009);
    assert_eq!(stub.messages(), ["hello"]);
    assert_eq!(stub.send_calls(), 5);
}

#[tokio::test]
async fn slack_stub_answers_like_slack() {
    let stub = SlackStub::start().await.unwrap();
    let path = "/services/T0000/B0000/XXXX";
    assert_eq!(stub.webhook_url(), format!("{}{path}", stub.url()));
    let post = |body: &'static [u8]| call(stub.addr(), "POST", path, &[], body);
    let ok = post(b"{\"text\":\"hi\"}").await;
    assert_eq!((ok.status, ok.text()), (200, "ok".to_owned()));
    let invalid = post(b"text=hi").await;
    assert_eq!(
        (invalid.status, invalid.text()),
        (400, "invalid_payload".to_owned())
    );
    let no_text = post(b"{}").await;
    assert_eq!(
        (no_text.status, no_text.text()),
        (400, "no_text".to_owned())
    );
    stub.rate_limit_next(1, 3);
    let limited = post(b"{\"text\":\"hi\"}").await;
    assert_eq!(
        (limited.status, limited.headers.get("retry-after").cloned()),
        (429, Some("3".to_owned()))
    );
    stub.reject_next(1, 410, "channel_is_archived");
    let archived = post(b"{\"text\":\"hi\"}").await;
    assert_eq!(
        (archived.status, archived.text()),
        (410, "channel_is_archived".to_owned())
    );
    assert_eq!(stub.messages(), [json!({"text": "hi"})]);
}

#[tokio::test]
async fn provider_stubs_start_with_the_real_fixtures() {
    let stubs = ProviderStubs::start().await.unwrap();
    assert_eq!(
        get(stubs.osv.addr(), "/v1/vulns/UBUNTU-CVE-2024-3094")
            .await
            .status,
        200
    );
    let kev = get(stubs.kev.addr(), "/known_exploited_vulnerabilities.json")
        .await
        .json();
    assert_eq!(kev["count"], 1404);
    assert_eq!(
        get(stubs.epss.addr(), "/epss?cve=CVE-2019-16759")
            .await
            .json()["data"][0]["epss"],
        "0.968170000"
    );

    let dir = tempfile::tempdir().unwrap();
    let yaml = stubs.write_config(dir.path()).unwrap();
    assert!(yaml.contains(&stubs.osv.url()));
    let secret = std::fs::read_to_string(dir.path().join("wecom-key")).unwrap();
    assert_eq!(secret, ProviderStubs::WECOM_KEY);
    assert!(
        !yaml.contains(ProviderStubs::WECOM_KEY),
        "secrets live in files, not in the config"
    );
}
