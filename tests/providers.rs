//! The providers against the stubs, fed with the real fixtures
//! (testkit/fixtures, see its README; `ASSETSCAN_FIXTURES` overrides).
//! Where a test needs a variant of a fixture, it derives it and says so.

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{
    Finding, RiskFacts, Severity, ThreatIntelFacts, VulnFacts,
};
use assetscan_operator::domain::{Origin, ScanRequest, Triage, TriageRequest};
use assetscan_operator::domain::{Package, Policy, Target, assess, needs_threat_intel};
use assetscan_operator::pipeline::{Effects, Notification, Resend};
use assetscan_operator::providers::intel::{
    EpssClient, EpssConfig, IntelError, KevCatalog, KevConfig, KevFeed, ThreatIntel,
    ThreatIntelConfig,
};
use assetscan_operator::providers::notify::{
    NotifyError, SlackConfig, SlackError, SlackNotifier, WeComConfig, WeComNotifier, WebhookConfig,
    WebhookNotifier,
};
use assetscan_operator::providers::online::{InventoryConfig, InventoryProbe};
use assetscan_operator::providers::vulns::{OsvClient, OsvConfig, VulnError};
use assetscan_operator::providers::{
    HttpError, HttpSettings, Providers, ProvidersConfig, SecretFrom,
};
use assetscan_testkit::stubs::fixtures::{Fixtures, OSV_RECORDS, json_files};
use assetscan_testkit::stubs::sink::signature_is_valid;
use assetscan_testkit::stubs::{
    EpssStub, Fault, InventoryStub, KevStub, OsvStub, ProviderStubs, SinkKeys, SlackStub,
    WeComStub, WebhookSink,
};
use assetscan_testkit::wait::until_some;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// A guard against hangs only: conditions are awaited, not timed.
const PATIENCE: Duration = Duration::from_secs(30);

fn fixture(path: &str) -> Vec<u8> {
    Fixtures::locate()
        .read(path)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn fixture_json(path: &str) -> Value {
    serde_json::from_slice(&fixture(path)).unwrap()
}

/// A secret source backed by a file in `dir`.
fn secret_file(dir: &Path, name: &str, value: &str) -> SecretFrom {
    let path = dir.join(name);
    std::fs::write(&path, value).unwrap();
    SecretFrom::File(path)
}

fn package(ecosystem: &str, name: &str, version: &str) -> Package {
    Package::coordinates(ecosystem, name, version).unwrap()
}

fn purl(purl: &str) -> Package {
    Package::purl(purl).unwrap()
}

/// Provider defaults, but this per-call timeout.
fn http_settings(timeout_ms: u64) -> HttpSettings {
    HttpSettings {
        timeout: Some(Duration::from_millis(timeout_ms)),
        ..HttpSettings::default()
    }
}

fn osv_config(stub: &OsvStub) -> OsvConfig {
    OsvConfig {
        base_url: stub.url(),
        http: http_settings(2_000),
        ..OsvConfig::default()
    }
}

fn finding<'a>(facts: &'a VulnFacts, id: &str) -> &'a Finding {
    facts
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("{id} missing"))
}

/// What OSV answers for `package`, with at most `max_findings` findings.
async fn bounded_query(stub: &OsvStub, max_findings: usize, package: Package) -> VulnFacts {
    let config = OsvConfig {
        max_findings,
        ..osv_config(stub)
    };
    let client = OsvClient::new(&config).unwrap();
    client.query(&[package], &Triage::default()).await.unwrap()
}

/// The 15 real records, all behind one package.
async fn osv_with_all_records() -> (OsvStub, Vec<String>) {
    let stub = OsvStub::start().await.unwrap();
    let records = Fixtures::locate().path(OSV_RECORDS);
    let count = stub.load_records_dir(&records).unwrap();
    assert_eq!(count, 15);
    let ids: Vec<String> = json_files(&records)
        .unwrap()
        .iter()
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    stub.set_package_vulns("Fixture", "everything", &refs);
    (stub, ids)
}

mod osv {
    use super::*;

    #[tokio::test]
    async fn scores_the_real_records_like_the_fixture_readme() {
        let (stub, _) = osv_with_all_records().await;
        let osv = OsvClient::new(&osv_config(&stub)).unwrap();
        let facts = osv
            .query(&[package("Fixture", "everything", "1")], &Triage::default())
            .await
            .unwrap();

        // Expected scores: the fixture README's table (computed there with Python's cvss).
        let expected: &[(&str, Option<f64>, Severity)] = &[
            ("GHSA-jfh8-c2jp-5v3q", Some(10.0), Severity::Critical),
            ("UBUNTU-CVE-2024-3094", Some(10.0), Severity::Critical),
            ("GHSA-9v2f-6vcg-3hgv", Some(9.8), Severity::Critical),
            ("GHSA-838r-hvwh-24h8", Some(9.1), Severity::Critical),
            ("CVE-2025-4565", Some(8.2), Severity::High), // CVSS v4 only
            ("UBUNTU-CVE-2024-6387", Some(8.1), Severity::High),
            ("UBUNTU-CVE-2023-4911", Some(7.8), Severity::High),
            ("CVE-2018-5407", Some(4.7), Severity::Medium),
            ("GHSA-34jh-p97f-mpxf", Some(4.4), Severity::Medium),
            ("UBUNTU-CVE-2025-38094", None, Severity::Medium), // `Ubuntu` label "medium" only
            ("GHSA-pxhw-596r-rwq5", Some(2.7), Severity::Low),
            ("DSA-3029-1", None, Severity::Unknown),
            ("GO-2024-2963", None, Severity::Unknown),
            ("PYSEC-2023-74", None, Severity::Unknown),
            ("USN-6859-1", None, Severity::Unknown),
        ];
        for (id, cvss, severity) in expected {
            let f = finding(&facts, id);
            assert_eq!((f.cvss, f.severity), (*cvss, *severity), "{id}");
            assert_eq!(f.package, "Fixture/everything@1");
        }
        // Most severe first (bucket, then score, then id): the table's order.
        let order: Vec<&str> = facts.findings.iter().map(|f| f.id.as_str()).collect();
        let by_rank: Vec<&str> = expected.iter().map(|(id, ..)| *id).collect();
        assert_eq!(order, by_rank);

        assert_eq!(facts.total, 15);
        assert_eq!(facts.max_cvss, Some(10.0));
        assert_eq!(facts.by_severity[&Severity::Critical], 4);
        assert_eq!(facts.by_severity[&Severity::High], 3);
        assert_eq!(facts.by_severity[&Severity::Medium], 3);
        assert_eq!(facts.by_severity[&Severity::Low], 1);
        assert_eq!(facts.by_severity[&Severity::Unknown], 4);
        assert_eq!(stub.querybatch_calls(), 1);
        assert_eq!(stub.vuln_calls(), 15);

        // The same records again: served from the cache (same `modified`).
        osv.query(&[package("Fixture", "everything", "1")], &Triage::default())
            .await
            .unwrap();
        assert_eq!(stub.vuln_calls(), 15);
    }

    #[tokio::test]
    async fn cves_come_from_ids_aliases_related_and_upstream() {
        let (stub, _) = osv_with_all_records().await;
        let facts = OsvClient::new(&osv_config(&stub))
            .unwrap()
            .query(&[package("Fixture", "everything", "1")], &Triage::default())
            .await
            .unwrap();
        let cves = |id| finding(&facts, id).cves.clone();
        assert_eq!(cves("UBUNTU-CVE-2024-3094"), ["CVE-2024-3094"]); // `related`
        assert_eq!(cves("UBUNTU-CVE-2023-4911"), ["CVE-2023-4911"]); // `related`, USN skipped
        assert_eq!(cves("UBUNTU-CVE-2025-38094"), ["CVE-2025-38094"]); // `upstream`
        assert_eq!(cves("USN-6859-1"), ["CVE-2024-6387"]); // upstream `UBUNTU-CVE-2024-6387`
        assert_eq!(cves("GHSA-jfh8-c2jp-5v3q"), ["CVE-2021-44228"]); // `aliases`
        assert_eq!(cves("PYSEC-2023-74"), ["CVE-2023-32681"]); // GHSA alias is not a CVE
        assert_eq!(cves("CVE-2018-5407"), ["CVE-2018-5407"]); // the id itself
        assert!(facts.cves.contains(&"CVE-2024-6387".to_owned()));
        assert_eq!(
            finding(&facts, "GO-2024-2963").summary,
            "Denial of service due to improper 100-continue handling in net/http"
        );
    }

    #[tokio::test]
    async fn replays_the_recorded_querybatch_cassettes() {
        for (name, distinct) in [
            ("osv-scanner-cassette-querybatch-debian10-pypi", 88),
            ("osv-scanner-cassette-querybatch-sbom-mixed", 35),
        ] {
            let recorded_request = fixture_json(&format!("osv/api/{name}.request.json"));
            let recorded_response = fixture_json(&format!("osv/api/{name}.response.json"));
            let stub = OsvStub::start().await.unwrap();
            stub.replay_querybatch(recorded_response.clone());
            // The cassettes hold only ids: derive a minimal record per id.
            for result in recorded_response["results"].as_array().unwrap() {
                for v in result["vulns"].as_array().into_iter().flatten() {
                    stub.insert_record(
                        serde_json::to_vec(&json!({"id": v["id"], "modified": v["modified"]}))
                            .unwrap(),
                    )
                    .unwrap();
                }
            }
            let software: Vec<Package> = recorded_request["queries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|q| serde_json::from_value(json!({"name": q["package"]["name"], "ecosystem": q["package"]["ecosystem"], "version": q["version"]})).unwrap())
                .collect();

            let facts = OsvClient::new(&osv_config(&stub))
                .unwrap()
                .query(&software, &Triage::default())
                .await
                .unwrap();

            // We send exactly what osv-scanner sent.
            assert_eq!(stub.querybatch_requests(), [recorded_request], "{name}");
            assert_eq!(facts.total, distinct, "{name}");
            assert_eq!(facts.by_severity[&Severity::Unknown], distinct);
            assert_eq!(stub.vuln_calls(), distinct as u64);
        }
    }

    /// Assets sharing packages (one base image): within `lookupWindow`
    /// each (ecosystem, name, version) is asked about once, and every asset
    /// still gets its findings; with `0s`, every run asks.
    #[tokio::test]
    async fn assets_share_the_lookups_of_the_same_package_within_the_window() {
        let (stub, ids) = osv_with_all_records().await;
        stub.set_package_vulns("PyPI", "shared", &[ids[0].as_str()]);
        let asset = |own: &str| {
            vec![
                package("PyPI", "shared", "1"),
                package("PyPI", "base", "1"),
                package("PyPI", own, "1"),
            ]
        };
        let asked = |stub: &OsvStub| -> usize {
            stub.querybatch_requests()
                .iter()
                .map(|r| r["queries"].as_array().unwrap().len())
                .sum()
        };
        let osv = OsvClient::new(&osv_config(&stub)).unwrap();
        for own in ["a", "b", "c"] {
            let facts = osv.query(&asset(own), &Triage::default()).await.unwrap();
            assert_eq!(facts.total, 1, "{own}: the shared package's finding");
            assert_eq!(finding(&facts, &ids[0]).package, "PyPI/shared@1");
        }
        assert_eq!(asked(&stub), 3 + 1 + 1, "shared and base asked once");

        let every_run = OsvConfig {
            lookup_window: Duration::ZERO,
            ..osv_config(&stub)
        };
        let osv = OsvClient::new(&every_run).unwrap();
        let before = asked(&stub);
        for own in ["a", "b"] {
            osv.query(&asset(own), &Triage::default()).await.unwrap();
        }
        assert_eq!(asked(&stub) - before, 6);
    }

    #[tokio::test]
    async fn pages_only_the_queries_that_carried_a_token() {
        let (stub, ids) = osv_with_all_records().await;
        let five: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
        stub.set_package_vulns("PyPI", "many", &five);
        stub.set_package_vulns("PyPI", "one", &[ids[5].as_str()]);
        stub.set_page_size(Some(2));
        let software = [
            package("PyPI", "many", "1"),
            package("PyPI", "none", "1"),
            package("PyPI", "one", "1"),
        ];

        let facts = OsvClient::new(&osv_config(&stub))
            .unwrap()
            .query(&software, &Triage::default())
            .await
            .unwrap();

        assert_eq!(facts.total, 6);
        let requests = stub.querybatch_requests();
        let shape: Vec<Vec<(String, Option<String>)>> = requests
            .iter()
            .map(|r| {
                r["queries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|q| {
                        (
                            q["package"]["name"].as_str().unwrap().to_owned(),
                            q["page_token"].as_str().map(str::to_owned),
                        )
                    })
                    .collect()
            })
            .collect();
        let q = |name: &str, token: Option<&str>| (name.to_owned(), token.map(str::to_owned));
        assert_eq!(
            shape,
            [
                vec![q("many", None), q("none", None), q("one", None)],
                vec![q("many", Some("2"))],
                vec![q("many", Some("4"))]
            ]
        );
    }

    #[tokio::test]
    async fn endless_paging_is_cut_off() {
        let (stub, ids) = osv_with_all_records().await;
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        stub.set_package_vulns("PyPI", "many", &refs);
        stub.set_page_size(Some(1));
        let config = OsvConfig {
            max_pages: 3,
            ..osv_config(&stub)
        };
        let err = OsvClient::new(&config)
            .unwrap()
            .query(&[package("PyPI", "many", "1")], &Triage::default())
            .await
            .unwrap_err();
        assert!(
            matches!(err, VulnError::TooManyPages { pages: 3, .. }),
            "{err}"
        );
        assert!(!err.is_retryable());
    }

    #[tokio::test]
    async fn jinja2_snapshot_with_cvss_v4() {
        // The sanitized live answer for jinja2 3.1.4: its records served one by one.
        let snapshot = fixture_json("osv/api/apitester-sanitized/query-jinja2-3.1.4.snapshot.json");
        let stub = OsvStub::start().await.unwrap();
        let mut ids = Vec::new();
        for record in snapshot["vulns"].as_array().unwrap() {
            stub.insert_record(serde_json::to_vec(record).unwrap())
                .unwrap();
            ids.push(record["id"].as_str().unwrap().to_owned());
        }
        stub.set_purl_vulns(
            "pkg:pypi/jinja2",
            &ids.iter().map(String::as_str).collect::<Vec<_>>(),
        );

        let facts = OsvClient::new(&osv_config(&stub))
            .unwrap()
            .query(&[purl("pkg:pypi/jinja2@3.1.4")], &Triage::default())
            .await
            .unwrap();

        assert_eq!(facts.total, 6);
        // CVSS_V4 only: CVSS:4.0/AV:L/AC:L/AT:P/PR:L/UI:P/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N = 5.4.
        for id in ["GHSA-cpwx-vrp4-4pq7", "PYSEC-2026-1471"] {
            assert_eq!(
                (finding(&facts, id).cvss, finding(&facts, id).severity),
                (Some(5.4), Severity::Medium),
                "{id}"
            );
        }
        // V3 and V4: the higher score wins (8.8 and 7.8 over the v4 5.4).
        for (id, score) in [
            ("GHSA-gmj6-6f8f-6699", 8.8),
            ("PYSEC-2026-1472", 8.8),
            ("GHSA-q2x7-8rv6-6q7h", 7.8),
            ("PYSEC-2026-1475", 7.8),
        ] {
            assert_eq!(
                (finding(&facts, id).cvss, finding(&facts, id).severity),
                (Some(score), Severity::High),
                "{id}"
            );
        }
        assert_eq!(finding(&facts, "PYSEC-2026-1471").cves, ["CVE-2025-27516"]);
        assert_eq!(
            stub.querybatch_requests()[0]["queries"],
            json!([{"package": {"purl": "pkg:pypi/jinja2@3.1.4"}}])
        );
    }

    #[tokio::test]
    async fn findings_are_bounded_but_counts_and_cves_are_not() {
        let (stub, _) = osv_with_all_records().await;
        let everything = package("Fixture", "everything", "1");
        let facts = bounded_query(&stub, 3, everything).await;
        assert_eq!(facts.findings.len(), 3);
        assert_eq!(facts.total, 15);
        assert!(
            facts.cves.contains(&"CVE-2024-3177".to_owned()),
            "{:?}",
            facts.cves
        ); // the Low one, cut from findings
    }

    /// What osv.dev answers 400 to (see the fixtures) cannot even be said:
    /// a versioned purl that also gives `version`, or a purl and a name.
    /// Software arrives as domain packages, and the wire shape (an
    /// AssetScan's `spec.software`, the `scan --software` file) refuses both.
    #[tokio::test]
    async fn invalid_software_is_refused_before_any_call() {
        for mixed in [
            json!([{"name": "a", "ecosystem": "PyPI", "version": "1"}, {"purl": "pkg:pypi/jinja2@3.1.4", "version": "3.1.4"}]),
            json!([{"purl": "pkg:pypi/jinja2@3.1.4", "name": "jinja2", "ecosystem": "PyPI"}]),
            json!([{"purl": "jinja2"}]),
        ] {
            let refused = serde_json::from_value::<Vec<Package>>(mixed.clone());
            assert!(refused.is_err(), "{mixed}");
        }
        assert!(Package::purl("jinja2").is_err());
    }

    #[tokio::test]
    async fn no_software_no_call() {
        let stub = OsvStub::start().await.unwrap();
        let facts = OsvClient::new(&osv_config(&stub))
            .unwrap()
            .query(&[], &Triage::default())
            .await
            .unwrap();
        assert_eq!(facts, VulnFacts::default());
        assert_eq!(stub.total_calls(), 0);
    }
}

/// The generic JSON endpoint, served by a throwaway axum route that
/// records what it was sent.
mod generic {
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
}

/// Faults on every provider call end in a typed error, never a panic.
mod faults {
    use super::*;

    async fn osv_error(config: OsvConfig) -> VulnError {
        OsvClient::new(&config)
            .unwrap()
            .query(&[package("Fixture", "everything", "1")], &Triage::default())
            .await
            .unwrap_err()
    }

    fn http(err: VulnError) -> HttpError {
        match err {
            VulnError::Http(e) => e,
            other => panic!("not an HTTP error: {other}"),
        }
    }

    #[tokio::test]
    async fn malformed_and_wrong_shape_bodies() {
        let (stub, _) = osv_with_all_records().await;
        for fault in [Fault::Malformed, Fault::WrongShape] {
            stub.faults().fail_next(1, fault.clone());
            let err = http(osv_error(osv_config(&stub)).await);
            assert!(
                matches!(err, HttpError::Malformed { .. }),
                "{fault:?}: {err}"
            );
            assert!(!err.is_retryable());
            let text = err.to_string();
            assert!(
                text.contains("osv") && text.contains("/v1/querybatch"),
                "{text}"
            );
        }
        // A batch answer that does not match the queries.
        stub.replay_querybatch(json!({"results": [{}, {}]}));
        let err = http(osv_error(osv_config(&stub)).await);
        assert!(err.to_string().contains("2 results for 1 queries"), "{err}");
    }

    #[tokio::test]
    async fn statuses_4xx_permanent_5xx_and_429_retryable() {
        let (stub, _) = osv_with_all_records().await;
        for (status, retryable) in [
            (400, false),
            (404, false),
            (429, true),
            (500, true),
            (503, true),
        ] {
            stub.faults().fail_next(1, Fault::Status(status));
            let err = http(osv_error(osv_config(&stub)).await);
            assert_eq!(err.status(), Some(status));
            assert_eq!(err.is_retryable(), retryable, "{err}");
            assert!(
                err.to_string()
                    .contains(&format!("injected status {status}")),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn unknown_record_is_a_404() {
        let stub = OsvStub::start().await.unwrap();
        stub.set_package_vulns("PyPI", "ghost", &["GHSA-0000-0000-0000"]);
        let err = OsvClient::new(&osv_config(&stub))
            .unwrap()
            .query(&[package("PyPI", "ghost", "1")], &Triage::default())
            .await
            .unwrap_err();
        let err = http(err);
        assert_eq!(err.status(), Some(404));
        assert!(
            err.to_string().contains("/v1/vulns/GHSA-0000-0000-0000")
                && err.to_string().contains("Vulnerability not found"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn slow_and_hanging_servers_time_out() {
        let (stub, _) = osv_with_all_records().await;
        let config = OsvConfig {
            http: http_settings(200),
            ..osv_config(&stub)
        };
        stub.faults().set_latency(Duration::from_millis(1_000));
        let started = Instant::now();
        let err = http(osv_error(config.clone()).await);
        assert!(
            matches!(
                err,
                HttpError::Timeout {
                    timeout_ms: 200,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.is_retryable());
        // Given up at the client's bound, not at the server's 1 s answer
        // (which, awaited, would have been a success).
        assert!(started.elapsed() >= Duration::from_millis(200));

        stub.faults().clear();
        stub.faults().always(Fault::Hang);
        let err = http(osv_error(config).await);
        assert!(matches!(err, HttpError::Timeout { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_10_mb_body_is_refused_at_the_cap() {
        let (stub, _) = osv_with_all_records().await;
        stub.faults()
            .fail_next(1, Fault::Oversized(10 * 1024 * 1024));
        let err = http(osv_error(osv_config(&stub)).await);
        assert!(
            matches!(err, HttpError::BodyTooLarge { limit, .. } if limit == 4 * 1024 * 1024),
            "{err}"
        );
        assert!(!err.is_retryable());
        assert!(
            err.to_string().contains("larger than the 4194304 byte cap"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn refused_connections_are_retryable() {
        let stub = OsvStub::start().await.unwrap();
        let config = osv_config(&stub);
        drop(stub);
        let err = OsvClient::new(&config)
            .unwrap()
            .query(&[package("PyPI", "a", "1")], &Triage::default())
            .await
            .unwrap_err();
        let err = http(err);
        assert!(
            matches!(err, HttpError::Connect { .. } | HttpError::Transport { .. }),
            "{err}"
        );
        assert!(err.is_retryable());
    }
}

mod online {
    use super::*;

    fn probe(stub: &InventoryStub, timeout: Duration) -> InventoryProbe {
        InventoryProbe::new(&InventoryConfig {
            base_url: format!("{}/", stub.url()),
            http: HttpSettings {
                timeout: Some(timeout),
                ..HttpSettings::default()
            },
        })
        .unwrap()
    }

    #[tokio::test]
    async fn inventory_answers_online_offline_and_unknown() {
        let stub = InventoryStub::start().await.unwrap();
        stub.set_online("web-1", true);
        stub.set_online("db:2", false);
        let probe = probe(&stub, Duration::from_secs(1));
        assert!(probe.check("web-1").await.unwrap());
        assert!(!probe.check("db:2").await.unwrap());
        let err = probe.check("nope").await.unwrap_err();
        assert!(!err.is_retryable(), "{err}");
        assert!(err.to_string().contains("/assets/nope"), "{err}");
        assert_eq!(stub.asset_calls(), 3);
        // An id that is not one plain segment is refused before any request.
        for id in ["db 2", "..", "a/b"] {
            assert!(!probe.check(id).await.unwrap_err().is_retryable(), "{id}");
        }
        assert_eq!(stub.asset_calls(), 3);

        stub.faults().always(Fault::WrongShape);
        assert!(!probe.check("web-1").await.unwrap_err().is_retryable());
        stub.faults().always(Fault::Hang);
        let err = probe.check("web-1").await.unwrap_err();
        assert!(
            err.is_retryable() && err.to_string().contains("timed out"),
            "{err}"
        );
    }
}

mod intel {
    use super::*;

    fn kev_config(stub: &KevStub) -> KevConfig {
        KevConfig {
            url: stub.feed_url(),
            http: http_settings(5_000),
            ..KevConfig::default()
        }
    }

    fn epss_config(stub: &EpssStub) -> EpssConfig {
        EpssConfig {
            base_url: stub.url(),
            http: http_settings(2_000),
            ..EpssConfig::default()
        }
    }

    #[test]
    fn kev_parses_the_whole_catalog() {
        let catalog =
            KevCatalog::parse(&fixture("kev/known_exploited_vulnerabilities.json")).unwrap();
        assert_eq!(catalog.version, "2025.08.25");
        assert_eq!(catalog.date_released, "2025-08-25T17:04:19.9796Z");
        assert_eq!(catalog.len(), 1404);
        let log4j = catalog.get("CVE-2021-44228").unwrap();
        assert_eq!(log4j.known_ransomware_campaign_use, "Known");
        assert_eq!(log4j.vendor_project, "Apache");
        for cve in [
            "CVE-2023-4911",
            "CVE-2023-44487",
            "CVE-2021-40438",
            "CVE-2019-16759",
        ] {
            assert!(catalog.contains(cve), "{cve}");
        }
        for cve in ["CVE-2024-3094", "CVE-2024-6387", "CVE-2024-3177"] {
            assert!(!catalog.contains(cve), "{cve}");
        }
        assert!(catalog.contains("cve-2021-44228"), "lookups ignore case");
    }

    #[tokio::test]
    async fn kev_feed_caches_refreshes_and_keeps_the_last_good_catalog() {
        let stub = KevStub::start().await.unwrap();
        let config = KevConfig {
            refresh_interval: Duration::from_secs(1),
            retry_failed_refresh: Duration::from_secs(60),
            ..kev_config(&stub)
        };
        let feed = KevFeed::new(&config).unwrap();
        assert_eq!(feed.catalog().await.unwrap().version, "2025.08.25");
        assert_eq!(feed.catalog().await.unwrap().len(), 1404);
        assert_eq!(stub.feed_calls(), 1, "served from memory");

        // A failed refresh keeps the last good catalog, and waits before
        // retrying. Lookups are served from memory until the refresh falls
        // due; the one that tries it (the feed's second call) still gets
        // the last good catalog, and the next one does not try again.
        stub.faults().always(Fault::Status(503));
        let refreshed = until_some("a lookup tried a refresh", PATIENCE, async || {
            let catalog = feed.catalog().await.unwrap();
            (stub.feed_calls() == 2).then_some(catalog)
        })
        .await;
        assert_eq!(refreshed.version, "2025.08.25");
        assert_eq!(feed.catalog().await.unwrap().version, "2025.08.25");
        assert_eq!(stub.feed_calls(), 2);

        // A derived variant (the real catalog, renamed, plus CVE-2024-3094) is
        // picked up by the next successful refresh.
        let mut variant = fixture_json("kev/known_exploited_vulnerabilities.json");
        variant["catalogVersion"] = json!("2025.08.26-test");
        variant["vulnerabilities"]
            .as_array_mut()
            .unwrap()
            .push(json!({"cveID": "CVE-2024-3094"}));
        stub.set_catalog(serde_json::to_vec(&variant).unwrap());
        stub.faults().clear();
        let fresh = KevFeed::new(&KevConfig {
            refresh_interval: Duration::from_secs(1),
            ..kev_config(&stub)
        })
        .unwrap();
        let catalog = fresh.catalog().await.unwrap();
        assert_eq!(catalog.version, "2025.08.26-test");
        assert!(catalog.contains("CVE-2024-3094"));
    }

    #[tokio::test]
    async fn no_catalog_at_all_is_retryable_whatever_the_cause() {
        let stub = KevStub::start().await.unwrap();
        let feed = KevFeed::new(&kev_config(&stub)).unwrap();
        for fault in [Fault::Status(404), Fault::Malformed, Fault::WrongShape] {
            stub.faults().fail_next(1, fault.clone());
            let err = feed.catalog().await.unwrap_err();
            assert!(matches!(err, IntelError::NoCatalog(_)), "{fault:?}: {err}");
            assert!(err.is_retryable(), "{err}");
        }
        // With nothing cached, every lookup tries again; this one succeeds.
        assert_eq!(feed.catalog().await.unwrap().len(), 1404);
        assert_eq!(stub.feed_calls(), 4);
    }

    #[tokio::test]
    async fn epss_numbers_come_as_strings() {
        let stub = EpssStub::start().await.unwrap();
        stub.load_response(&fixture("epss/first-api-docs-example-response.json"))
            .unwrap();
        let client = EpssClient::new(&epss_config(&stub)).unwrap();
        let cves = [
            "CVE-2021-40438",
            "CVE-2019-16759",
            "CVE-2024-3094",
            "not-a-cve",
        ]
        .map(String::from);
        let scores = client.scores(&cves).await.unwrap();
        assert_eq!(scores.len(), 2, "unknown CVEs are absent");
        assert_eq!(scores["CVE-2021-40438"].epss, 0.97224);
        assert_eq!(scores["CVE-2021-40438"].percentile, 1.0);
        assert_eq!(scores["CVE-2019-16759"].epss, 0.96817);
        assert_eq!(scores["CVE-2019-16759"].percentile, 0.99999);
        assert_eq!(scores["CVE-2019-16759"].date, "2022-02-28");
        assert_eq!(
            stub.cve_params(),
            ["CVE-2021-40438,CVE-2019-16759,CVE-2024-3094"]
        );
    }

    #[tokio::test]
    async fn epss_requests_stay_within_2000_characters() {
        let stub = EpssStub::start().await.unwrap();
        let cves: Vec<String> = (0..400)
            .map(|i| format!("CVE-2024-{:07}", 1_000_000 + i))
            .collect();
        stub.set_score(&cves[399], "0.5", "0.9", "2025-02-20");
        let config = EpssConfig {
            max_cves_per_request: 1_000,
            ..epss_config(&stub)
        };
        let scores = EpssClient::new(&config)
            .unwrap()
            .scores(&cves)
            .await
            .unwrap();
        assert_eq!(scores[&cves[399]].epss, 0.5);
        let params = stub.cve_params();
        assert!(params.len() >= 4, "{} requests", params.len());
        assert!(params.iter().all(|p| p.len() <= 2000));
        assert_eq!(
            params.iter().map(|p| p.split(',').count()).sum::<usize>(),
            400
        );
    }

    #[tokio::test]
    async fn epss_faults_are_typed() {
        let stub = EpssStub::start().await.unwrap();
        let client = EpssClient::new(&EpssConfig {
            http: http_settings(300),
            ..epss_config(&stub)
        })
        .unwrap();
        let cves = ["CVE-2021-40438".to_owned()];
        stub.faults().fail_next(1, Fault::WrongShape);
        assert!(matches!(
            client.scores(&cves).await.unwrap_err(),
            HttpError::Malformed { .. }
        ));
        stub.faults().fail_next(
            1,
            Fault::Reply {
                status: 200,
                headers: vec![],
                body: br#"{"data":[{"cve":"CVE-2021-40438","epss":"7","percentile":"1"}]}"#
                    .to_vec(),
            },
        );
        let err = client.scores(&cves).await.unwrap_err();
        assert!(err.to_string().contains("outside 0..1"), "{err}");
        stub.faults().fail_next(1, Fault::Hang);
        assert!(client.scores(&cves).await.unwrap_err().is_retryable());
    }

    #[tokio::test]
    async fn enrichment_then_verdict_on_real_records() {
        let (osv, _) = osv_with_all_records().await;
        osv.set_package_vulns(
            "Maven",
            "log4j-core",
            &["GHSA-jfh8-c2jp-5v3q", "GHSA-pxhw-596r-rwq5"],
        );
        let kev = KevStub::start().await.unwrap();
        let epss = EpssStub::start().await.unwrap();
        epss.set_score("CVE-2024-3177", "0.000430000", "0.100000000", "2025-02-20");
        let log4j = package("Maven", "log4j-core", "2.14.1");
        let vulns = bounded_query(&osv, 1, log4j).await;
        assert_eq!(vulns.findings.len(), 1);

        // Log4Shell sits in the bounded findings, CVE-2024-3177 only in `cves`.
        let mut low_only = vulns.clone();
        low_only.findings.retain(|f| f.id == "GHSA-pxhw-596r-rwq5");
        low_only.max_cvss = Some(2.7);
        low_only.cves = vec!["CVE-2021-44228".into(), "CVE-2024-3177".into()];

        let intel = ThreatIntel::from_config(&ThreatIntelConfig {
            kev: kev_config(&kev),
            epss: epss_config(&epss),
        })
        .unwrap();
        let facts = intel.enrich(&low_only).await.unwrap();
        assert_eq!(facts.known_exploited, ["CVE-2021-44228"]);
        assert_eq!(facts.catalog_version.as_deref(), Some("2025.08.25"));
        assert_eq!(facts.epss.get("CVE-2024-3177"), Some(&0.00043));

        let risk = assess(&Policy::default(), &low_only, Some(&facts));
        assert!(risk.high_risk);
        assert_eq!(
            risk.reasons,
            ["CVE-2021-44228 is listed as known exploited (KEV 2025.08.25)"]
        );
        assert!(!assess(&Policy::default(), &low_only, None).high_risk);
    }
}

mod notify {
    use super::*;

    fn notification(findings: Vec<Finding>) -> Notification {
        Notification {
            ticket_id: "web-1/run-7".into(),
            asset: "web-1".into(),
            run: "run-7".into(),
            fencing_token: 42,
            risk: RiskFacts {
                high_risk: true,
                reasons: vec!["UBUNTU-CVE-2024-3094 (CVE-2024-3094) CVSS 10.0 >= 7.0".into()],
                confirmed_at: None,
            },
            vulnerabilities: VulnFacts {
                total: findings.len() as u32,
                max_cvss: findings.iter().filter_map(|f| f.cvss).reduce(f64::max),
                findings,
                ..VulnFacts::default()
            }
            .into(),
            threat_intel: None,
            origin: Some(Origin {
                namespace: "team-a".into(),
                name: "web-1-scan".into(),
                uid: "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11".into(),
            }),
            resend: None,
        }
    }

    /// What every channel says of who asked.
    const ORIGIN_LINE: &str =
        "requested by team-a/web-1-scan, uid 0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11";

    fn xz() -> Finding {
        Finding {
            id: "UBUNTU-CVE-2024-3094".into(),
            cves: vec!["CVE-2024-3094".into()],
            package: "Ubuntu:22.04:LTS/xz-utils@5.2.5".into(),
            cvss: Some(10.0),
            severity: Severity::Critical,
            summary: "xz-utils backdoor".into(),
        }
    }

    /// Standard Webhooks secrets: `whsec_` + base64 of 24 or more bytes.
    const RIGHT_SECRET: &str = "whsec_dGhlLXJpZ2h0LXNlY3JldC0yNGJ5dGVz";
    const WRONG_SECRET: &str = "whsec_dGhlLXdyb25nLXNlY3JldC0yNGJ5dGVz";

    fn webhook_config(dir: &Path, url: &str, secret: &str, legacy: bool) -> WebhookConfig {
        WebhookConfig {
            url_from: secret_file(dir, "url", url),
            secret_from: secret_file(dir, "hmac", secret),
            additional_secrets_from: Vec::new(),
            legacy_signature: legacy,
            legacy_secret_from: None,
            http: http_settings(1_000),
        }
    }

    fn webhook(dir: &Path, url: &str, secret: &str) -> WebhookNotifier {
        WebhookNotifier::new(&webhook_config(dir, url, secret, false)).unwrap()
    }

    #[tokio::test]
    async fn webhook_is_signed_and_deduplicated_by_the_receiver() {
        let dir = tempfile::tempdir().unwrap();
        let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
        let notifier = webhook(dir.path(), &sink.hook_url(), RIGHT_SECRET);
        let n = notification(vec![xz()]);

        let receipt = notifier.send(&n).await.unwrap();
        assert!(receipt.starts_with("HTTP 200"), "{receipt}");
        notifier.send(&n).await.unwrap(); // a takeover re-sends with the same key

        assert_eq!(sink.rejected(), 0, "signatures verified");
        let deliveries = sink.deliveries();
        assert_eq!(deliveries.len(), 2);
        assert_eq!(sink.effects(), 1, "one effect at an idempotent receiver");
        let d = &deliveries[0];
        assert_eq!(d.header("Idempotency-Key"), Some("web-1/run-7"));
        assert_eq!(d.header("X-AssetScan-Ticket"), Some("web-1/run-7"));
        assert_eq!(d.header("X-AssetScan-Fencing-Token"), Some("42"));
        // The re-send is the same message: the same webhook-id.
        for d in &deliveries {
            assert_eq!(d.header("webhook-id"), Some("web-1/run-7"));
            let timestamp: u64 = d.header("webhook-timestamp").unwrap().parse().unwrap();
            assert!(timestamp > 1_700_000_000, "{timestamp}");
            assert_eq!(d.header("X-AssetScan-Signature"), None, "legacy is opt-in");
        }
        assert_eq!(d.json()["ticket_id"], "web-1/run-7");
        assert_eq!(
            d.json()["origin"],
            serde_json::json!({"namespace": "team-a", "name": "web-1-scan",
                "uid": "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11"}),
            "who asked, under the signature the sink verified"
        );
        assert_eq!(
            d.json()["vulnerabilities"]["findings"][0]["severity"],
            "CRITICAL"
        );
        assert!(!deliveries[1].new_effect);
    }

    /// The webhook's signature as a receiver checks it with the Standard
    /// Webhooks library: the receiver of docs/security.md (`examples/webhook-receiver`),
    /// a real Python process, over real HTTP. It accepts the operator's
    /// delivery, dedups a re-send by its `webhook-id`, and refuses a captured
    /// delivery replayed past its tolerance and one whose id, timestamp or
    /// body was changed.
    mod standard_webhooks {
        use super::*;
        use assetscan_testkit::stubs::Delivery;
        use assetscan_testkit::webhook_receiver::WebhookReceiver;

        /// `whsec_` + base64 of 32 random bytes, as the specification asks.
        const SECRET: &str = "whsec_q0rCt0dOwnjFkUaKbSZ/1QGh3EzGNA8gQsoN2U2bDDE=";

        /// Sends `delivery` again, with `change` applied to its headers and body:
        /// what an attacker who captured it can do. The receiver's status and
        /// answer.
        async fn replay(
            url: &str,
            delivery: &Delivery,
            change: impl FnOnce(&mut Vec<(String, String)>, &mut Vec<u8>),
        ) -> (u16, String) {
            let mut headers: Vec<(String, String)> =
                ["webhook-id", "webhook-timestamp", "webhook-signature"]
                    .iter()
                    .map(|name| (name.to_string(), delivery.header(name).unwrap().to_owned()))
                    .collect();
            let mut body = delivery.body.clone();
            change(&mut headers, &mut body);
            let request = headers.into_iter().fold(
                reqwest::Client::new().post(url).body(body),
                |request, (name, value)| request.header(name, value),
            );
            let answer = request.send().await.unwrap();
            (answer.status().as_u16(), answer.text().await.unwrap())
        }

        /// A change to a captured delivery's headers and body.
        type Change = dyn FnOnce(&mut Vec<(String, String)>, &mut Vec<u8>);

        fn set(headers: &mut [(String, String)], name: &str, value: String) {
            for (n, v) in headers.iter_mut() {
                if n == name {
                    *v = value.clone();
                }
            }
        }

        #[tokio::test]
        async fn a_standard_webhooks_library_accepts_deliveries_and_refuses_replays_and_tampering()
        {
            let dir = tempfile::tempdir().unwrap();
            let mut receiver = WebhookReceiver::start(SECRET, None).await.unwrap();
            // The same receiver, its clock six minutes ahead: the library's
            // tolerance is five.
            let mut later = WebhookReceiver::start(SECRET, Some("+6m")).await.unwrap();

            // The operator's delivery is accepted.
            let receipt = webhook(dir.path(), &receiver.url(), SECRET)
                .send(&notification(vec![xz()]))
                .await
                .unwrap();
            assert_eq!(receipt, "HTTP 200");
            assert_eq!(receiver.next_line().await.unwrap(), "accepted web-1/run-7");
            let acted = receiver.next_line().await.unwrap();
            assert!(acted.starts_with("high risk on web-1"), "{acted}");

            // A re-send of the same notification (captured here by the sink) keeps
            // its webhook-id: the receiver acknowledges it and does not act again.
            let sink = WebhookSink::start(SECRET).await.unwrap();
            webhook(dir.path(), &sink.hook_url(), SECRET)
                .send(&notification(vec![xz()]))
                .await
                .unwrap();
            let captured = sink.deliveries().remove(0);
            assert_eq!(captured.header("webhook-id"), Some("web-1/run-7"));
            let (status, answer) = replay(&receiver.url(), &captured, |_, _| ()).await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(receiver.next_line().await.unwrap(), "duplicate web-1/run-7");

            // Past the tolerance, the captured delivery is refused.
            let (status, answer) = replay(&later.url(), &captured, |_, _| ()).await;
            assert_eq!(
                (status, answer.contains("too old")),
                (401, true),
                "{answer}"
            );
            assert_eq!(
                later.next_line().await.unwrap(),
                "refused: Message timestamp too old"
            );

            // A changed id, timestamp or body no longer matches the signature.
            let timestamp: u64 = captured
                .header("webhook-timestamp")
                .unwrap()
                .parse()
                .unwrap();
            let tampered: [(&str, Box<Change>); 3] = [
                (
                    "id",
                    Box::new(|h, _| set(h, "webhook-id", "web-1/run-8".into())),
                ),
                (
                    "timestamp",
                    Box::new(move |h, _| set(h, "webhook-timestamp", (timestamp + 60).to_string())),
                ),
                (
                    "body",
                    Box::new(|_, b| {
                        *b = String::from_utf8_lossy(b)
                            .replace("web-1", "web-2")
                            .into_bytes()
                    }),
                ),
            ];
            for (what, change) in tampered {
                let (status, answer) = replay(&receiver.url(), &captured, change).await;
                assert_eq!(status, 401, "tampered {what}: {answer}");
                assert_eq!(
                    receiver.next_line().await.unwrap(),
                    "refused: No matching signature found",
                    "tampered {what}"
                );
            }
        }

        /// The secret a rotation moves to.
        const NEXT_SECRET: &str = "whsec_0f23ckyjk8jDSS4E7xGApW4PzXFNm5WMzS3NvvwbsEM=";

        /// A rotation: the channel signs with the current and the next
        /// secret, and the library accepts the delivery with either one.
        /// An upgrade from 0.1.0: the receiver holding both secrets accepts
        /// a delivery signed only as 0.1.0 signs and one signed only as
        /// Standard Webhooks; one holding only the new secret refuses the
        /// first, and one holding only 0.1.0's refuses a tampered body.
        #[tokio::test]
        async fn the_receiver_accepts_a_rotation_and_both_schemes_during_an_upgrade() {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let rotating = |url: &str| WebhookConfig {
                additional_secrets_from: vec![secret_file(d, "next", NEXT_SECRET)],
                ..webhook_config(d, url, SECRET, false)
            };
            for held in [SECRET, NEXT_SECRET] {
                let mut receiver = WebhookReceiver::start(held, None).await.unwrap();
                let receipt = WebhookNotifier::new(&rotating(&receiver.url()))
                    .unwrap()
                    .send(&notification(vec![xz()]))
                    .await
                    .unwrap();
                assert_eq!(receipt, "HTTP 200");
                assert_eq!(receiver.next_line().await.unwrap(), "accepted web-1/run-7");
            }

            let old_way = |url: &str| webhook_config(d, url, "the-0.1.0-secret", true);
            let both = SinkKeys {
                standard: Some(SECRET),
                legacy: Some("the-0.1.0-secret"),
            };
            let mut receiver = WebhookReceiver::start_with(both, None).await.unwrap();
            WebhookNotifier::new(&old_way(&receiver.url()))
                .unwrap()
                .send(&notification(vec![xz()]))
                .await
                .unwrap();
            assert_eq!(receiver.next_line().await.unwrap(), "accepted web-1/run-7");
            receiver.next_line().await.unwrap(); // what it acted on
            webhook(d, &receiver.url(), SECRET)
                .send(&notification(vec![xz()]))
                .await
                .unwrap();
            assert_eq!(receiver.next_line().await.unwrap(), "duplicate web-1/run-7");

            let mut new_only = WebhookReceiver::start(SECRET, None).await.unwrap();
            let err = WebhookNotifier::new(&old_way(&new_only.url()))
                .unwrap()
                .send(&notification(vec![xz()]))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, NotifyError::Http(e) if e.status() == Some(401)),
                "{err}"
            );
            assert_eq!(
                new_only.next_line().await.unwrap(),
                "refused: Missing required headers"
            );

            // 0.1.0's signature covers the body: a changed body is refused.
            let sink = WebhookSink::start_with(SinkKeys {
                standard: None,
                legacy: Some("the-0.1.0-secret"),
            })
            .await
            .unwrap();
            WebhookNotifier::new(&old_way(&sink.hook_url()))
                .unwrap()
                .send(&notification(vec![xz()]))
                .await
                .unwrap();
            let captured = sink.deliveries().remove(0);
            let old_only = SinkKeys {
                standard: None,
                legacy: Some("the-0.1.0-secret"),
            };
            let mut receiver = WebhookReceiver::start_with(old_only, None).await.unwrap();
            let body = String::from_utf8_lossy(&captured.body).replace("web-1", "web-2");
            let answer = reqwest::Client::new()
                .post(receiver.url())
                .header(
                    "X-AssetScan-Signature",
                    captured.header("X-AssetScan-Signature").unwrap(),
                )
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status().as_u16(), 401);
            assert_eq!(
                receiver.next_line().await.unwrap(),
                "refused: No matching 0.1.0 signature"
            );
        }
    }

    #[tokio::test]
    async fn webhook_with_the_wrong_secret_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
        let err = webhook(dir.path(), &sink.hook_url(), WRONG_SECRET)
            .send(&notification(vec![]))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, NotifyError::Http(e) if e.status() == Some(401)),
            "{err}"
        );
        assert!(!err.is_retryable());
        assert_eq!((sink.rejected(), sink.effects()), (1, 0));
    }

    #[tokio::test]
    async fn legacy_signature_is_sent_only_when_set() {
        let dir = tempfile::tempdir().unwrap();
        let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
        let config = webhook_config(dir.path(), &sink.hook_url(), RIGHT_SECRET, true);
        WebhookNotifier::new(&config)
            .unwrap()
            .send(&notification(vec![xz()]))
            .await
            .unwrap();
        let d = &sink.deliveries()[0];
        assert!(signature_is_valid(
            RIGHT_SECRET.as_bytes(),
            &d.body,
            d.header("X-AssetScan-Signature")
        ));
        assert_eq!(
            d.header("X-AssetScan-Timestamp"),
            d.header("webhook-timestamp")
        );
    }

    /// 0.1.0's secret, as a 0.1.0 configuration holds it: any text.
    const SECRET_OF_0_1_0: &str = "s3cr3t-of-the-0.1.0-receiver";

    /// What a receiver of each kind answers one delivery of `config`'s:
    /// one verifying 0.1.0's signature with 0.1.0's secret, one verifying
    /// Standard Webhooks with RIGHT_SECRET.
    async fn accepted_by(config: impl Fn(&str) -> WebhookConfig) -> (bool, bool) {
        let mut accepted = Vec::new();
        for keys in [
            SinkKeys {
                standard: None,
                legacy: Some(SECRET_OF_0_1_0),
            },
            SinkKeys {
                standard: Some(RIGHT_SECRET),
                legacy: None,
            },
        ] {
            let sink = WebhookSink::start_with(keys).await.unwrap();
            let sent = WebhookNotifier::new(&config(&sink.hook_url()))
                .unwrap()
                .send(&notification(vec![xz()]))
                .await;
            assert_eq!(sent.is_ok(), sink.effects() == 1, "{sent:?}");
            accepted.push(sent.is_ok());
        }
        (accepted[0], accepted[1])
    }

    /// The upgrade from 0.1.0: its configuration with `legacySignature: true`
    /// signs as 0.1.0 did, so the receiver of 0.1.0 accepts this release's
    /// deliveries during the roll; `legacySecretFrom` beside a `whsec_`
    /// secret sends both, so either receiver accepts them, and the receiver
    /// may switch at any moment; without legacy, only the new receiver does.
    #[tokio::test]
    async fn each_receiver_accepts_the_scheme_it_verifies_during_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old_way = |url: &str| webhook_config(d, url, SECRET_OF_0_1_0, true);
        assert_eq!(accepted_by(old_way).await, (true, false));
        let both = |url: &str| WebhookConfig {
            legacy_secret_from: Some(secret_file(d, "old", SECRET_OF_0_1_0)),
            ..webhook_config(d, url, RIGHT_SECRET, true)
        };
        assert_eq!(accepted_by(both).await, (true, true));
        let new_way = |url: &str| webhook_config(d, url, RIGHT_SECRET, false);
        assert_eq!(accepted_by(new_way).await, (false, true));
    }

    #[test]
    fn a_secret_outside_the_specification_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = WebhookNotifier::new(&webhook_config(
            dir.path(),
            "http://127.0.0.1:9/hook",
            "plain-text-secret-of-old",
            false,
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("whsec_"), "{err}");
        assert!(!err.contains("plain-text-secret-of-old"), "{err}");
    }

    #[tokio::test]
    async fn secrets_never_show_in_errors_or_debug() {
        let dir = tempfile::tempdir().unwrap();
        // The secret: whsec_ + base64 of "hmac-SECRET-1-of-24-bytes".
        let hook_secret = "whsec_aG1hYy1TRUNSRVQtMS1vZi0yNC1ieXRlcw==";
        let sink = WebhookSink::start(hook_secret).await.unwrap();
        let url = format!("{}?token=URL-SECRET-2", sink.hook_url());
        let notifier = webhook(dir.path(), &url, hook_secret);
        sink.faults().fail_next(1, Fault::Status(503));
        let unavailable = notifier.send(&notification(vec![])).await.unwrap_err();
        assert!(unavailable.is_retryable());
        sink.faults().always(Fault::Hang);
        let timeout = notifier.send(&notification(vec![])).await.unwrap_err();
        drop(sink);
        let refused = notifier.send(&notification(vec![])).await.unwrap_err();

        let wecom_stub = WeComStub::start("KEY-SECRET-3").await.unwrap();
        let wecom = WeComNotifier::new(&WeComConfig {
            key_from: secret_file(dir.path(), "wecom", "KEY-SECRET-3"),
            base_url: wecom_stub.url(),
            http: http_settings(1_000),
        })
        .unwrap();
        wecom_stub.faults().fail_next(1, Fault::Status(502));
        let wecom_err = wecom.send(&notification(vec![])).await.unwrap_err();

        let texts = [
            format!("{unavailable} {unavailable:?}"),
            format!("{timeout} {timeout:?}"),
            format!("{refused} {refused:?}"),
            format!("{wecom_err} {wecom_err:?}"),
            format!("{notifier:?} {wecom:?}"),
        ];
        for text in texts {
            for secret in ["aG1hYy1TRUNSRVQ", "SECRET-2", "SECRET-3", "/hook"] {
                assert!(!text.contains(secret), "{secret} leaked: {text}");
            }
            assert!(text.contains("127.0.0.1"), "the host is shown: {text}");
        }
    }

    fn wecom(dir: &Path, stub: &WeComStub, key: &str) -> WeComNotifier {
        WeComNotifier::new(&WeComConfig {
            key_from: secret_file(dir, "wecom-key", key),
            base_url: stub.url(),
            http: http_settings(1_000),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn wecom_branches_on_errcode() {
        let dir = tempfile::tempdir().unwrap();
        let stub = WeComStub::start("the-key").await.unwrap();
        let robot = wecom(dir.path(), &stub, "the-key");
        let n = notification(vec![xz()]);

        assert_eq!(robot.send(&n).await.unwrap(), "errcode 0");
        let content = &stub.messages()[0];
        assert!(
            content.contains("web-1/run-7") && content.contains("UBUNTU-CVE-2024-3094"),
            "{content}"
        );
        assert!(content.contains(ORIGIN_LINE), "{content}");

        for (errcode, retryable) in [
            (45009, true),
            (-1, true),
            (93004, false),
            (93008, false),
            (44004, false),
        ] {
            stub.errcode_next(1, errcode);
            let err = robot.send(&n).await.unwrap_err();
            assert!(
                matches!(err, NotifyError::WeCom { errcode: e, .. } if e == errcode),
                "{err}"
            );
            assert_eq!(err.is_retryable(), retryable, "{errcode}");
        }
        // A wrong key: the robot's real "invalid webhook url" answer, HTTP 200.
        let err = wecom(dir.path(), &stub, "other-key")
            .send(&n)
            .await
            .unwrap_err();
        assert!(
            matches!(err, NotifyError::WeCom { errcode: 93000, .. }),
            "{err}"
        );
        assert!(!err.is_retryable());
        assert!(!err.to_string().contains("other-key"));

        stub.faults().fail_next(1, Fault::Status(502));
        assert!(robot.send(&n).await.unwrap_err().is_retryable());
        stub.faults().fail_next(1, Fault::Malformed);
        assert!(!robot.send(&n).await.unwrap_err().is_retryable());
    }

    #[tokio::test]
    async fn wecom_content_is_cut_to_4096_bytes_on_a_char_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let stub = WeComStub::start("k").await.unwrap();
        let many: Vec<Finding> = (0..80)
            .map(|i| Finding {
                id: format!("UBUNTU-CVE-2024-{i:04}"),
                summary: "严重漏洞：远程代码执行（后门）".repeat(12),
                ..xz()
            })
            .collect();
        wecom(dir.path(), &stub, "k")
            .send(&notification(many))
            .await
            .unwrap();
        let content = &stub.messages()[0];
        assert!(
            content.len() <= 4096 && content.len() > 4000,
            "{} bytes",
            content.len()
        );
        assert!(content.ends_with('…'));
        assert!(
            content.contains("web-1/run-7"),
            "the ticket id survives truncation"
        );
    }

    /// Markup a tenant (package strings) or a provider (OSV ids, summaries,
    /// the reasons) could slip into a chat message: links, mentions,
    /// formatting, entities, a new line that starts a heading or a quote.
    const HOSTILE: &str = "<!channel> <@U024BE7LH> <@all> <https://evil.example/a|click> [click](https://evil.example/b) **bold** `code` &lt;@all&gt; <font color=\"info\">x</font>\n# heading\n> quote http://evil.example/c";

    fn hostile_notification() -> Notification {
        let mut n = notification(vec![Finding {
            id: format!("OSV-1 {HOSTILE}"),
            cves: vec![format!("CVE-2024-1 {HOSTILE}")],
            package: format!("PyPI/{HOSTILE}@1.0"),
            cvss: Some(9.8),
            severity: Severity::Critical,
            summary: HOSTILE.into(),
        }]);
        n.risk.reasons = vec![format!("OSV-1 {HOSTILE} CVSS 9.8 >= 7.0")];
        n.threat_intel = Some(ThreatIntelFacts {
            known_exploited: vec![format!("CVE-2024-1 {HOSTILE}")],
            ..ThreatIntelFacts::default()
        });
        n
    }

    /// No link or mention from the hostile strings survives into what a
    /// chat client renders, nor the channel's own `markup`.
    fn assert_inert(channel: &str, rendered: &str, markup: &[&str]) {
        for live in ["<!", "<@", "<http", "p://", "s://"].iter().chain(markup) {
            assert!(
                !rendered.contains(live),
                "{channel}: {live:?} is live in {rendered}"
            );
        }
        assert!(
            rendered.contains("evil.example"),
            "{channel}: the text is kept: {rendered}"
        );
    }

    #[tokio::test]
    async fn hostile_strings_stay_text_in_every_channel() {
        let dir = tempfile::tempdir().unwrap();
        let n = hostile_notification();

        let wecom_stub = WeComStub::start("KEY").await.unwrap();
        wecom(dir.path(), &wecom_stub, "KEY")
            .send(&n)
            .await
            .unwrap();
        let content = wecom_stub.messages().remove(0);
        // Only the template's markup is left: its heading, font tag, quote
        // and bold titles.
        let template = content
            .replacen("## <font color=\"warning\">", "", 1)
            .replacen("</font>\n> ", "\n", 1)
            .replacen("\n> requested by", "\nrequested by", 1)
            .replacen("\n> known exploited:", "\nknown exploited:", 1)
            .replace("**Why**", "")
            .replace("**Top findings**", "");
        let wecom_markup = [
            "](",
            "**bold",
            "`code",
            "&lt;",
            "<font color=\"info",
            "\n#",
            "\n>",
        ];
        assert_inert("wecom", &template, &wecom_markup);
        assert!(
            !template.contains('<') && !template.contains('['),
            "{template}"
        );

        let slack_stub = SlackStub::start().await.unwrap();
        slack(dir.path(), &slack_stub).send(&n).await.unwrap();
        let message = slack_stub.messages().remove(0);
        let mut texts = vec![message["text"].as_str().unwrap().to_owned()];
        for block in message["blocks"].as_array().unwrap() {
            texts.push(
                block["text"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
            for element in block["elements"].as_array().into_iter().flatten() {
                texts.push(element["text"].as_str().unwrap().to_owned());
            }
        }
        let rendered = texts.join("\n");
        // Slack's own bold titles are the template's.
        let rendered = rendered
            .replace("*Why*", "")
            .replace("*Top findings*", "")
            .replace("*Known exploited:*", "");
        assert_inert("slack", &rendered, &["\n>", "\n&gt; quote"]);
        assert!(!rendered.contains('<'), "{rendered}");

        // The webhook's body is data, not markup: the strings arrive as
        // written, for the receiver to escape where it renders them.
        let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
        webhook(dir.path(), &sink.hook_url(), RIGHT_SECRET)
            .send(&n)
            .await
            .unwrap();
        let body = sink.deliveries()[0].json();
        assert_eq!(body["vulnerabilities"]["findings"][0]["summary"], HOSTILE);
        assert_eq!(
            body["vulnerabilities"]["findings"][0]["package"],
            format!("PyPI/{HOSTILE}@1.0")
        );
    }

    /// A send that may repeat an earlier one says so on both chat
    /// channels, with the first attempt's time when the ticket has it.
    #[tokio::test]
    async fn chat_channels_mark_a_resend_with_the_first_attempt() {
        let dir = tempfile::tempdir().unwrap();
        let (slack_stub, wecom_stub) = (
            SlackStub::start().await.unwrap(),
            WeComStub::start("k").await.unwrap(),
        );
        let (hook, robot) = (
            slack(dir.path(), &slack_stub),
            wecom(dir.path(), &wecom_stub, "k"),
        );
        let first = notification(vec![xz()]);
        let resent = Notification {
            resend: Some(Resend {
                first_attempt_at: Some(1_765_000_000_000),
            }),
            ..first.clone()
        };
        let from_older = Notification {
            resend: Some(Resend {
                first_attempt_at: None,
            }),
            ..first.clone()
        };
        for n in [&first, &resent, &from_older] {
            hook.send(n).await.unwrap();
            robot.send(n).await.unwrap();
        }
        let slack = slack_stub.messages();
        let texts: Vec<&str> = slack.iter().map(|m| m["text"].as_str().unwrap()).collect();
        let wecom = wecom_stub.messages();
        let mark = "re-sent: may repeat the message first attempted at 2025-12-06T05:46:40Z";
        let unknown = "re-sent: may repeat an earlier message";
        for (channel, sent) in [
            ("slack", texts),
            ("wecom", wecom.iter().map(String::as_str).collect()),
        ] {
            assert!(!sent[0].contains("re-sent"), "{channel}: {}", sent[0]);
            assert!(sent[1].contains(mark), "{channel}: {}", sent[1]);
            assert!(sent[2].contains(unknown), "{channel}: {}", sent[2]);
        }
        // In Slack's blocks too, beside the ticket id.
        let context = slack[1]["blocks"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .to_string();
        assert!(
            context.contains(mark) && context.contains("web-1/run-7"),
            "{context}"
        );
    }

    fn slack(dir: &Path, stub: &SlackStub) -> SlackNotifier {
        SlackNotifier::new(&SlackConfig {
            url_from: secret_file(dir, "slack-url", &stub.webhook_url()),
            http: http_settings(1_000),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn slack_ok_rate_limits_and_plain_text_errors() {
        let dir = tempfile::tempdir().unwrap();
        let stub = SlackStub::start().await.unwrap();
        let hook = slack(dir.path(), &stub);
        let n = notification(vec![xz()]);

        assert_eq!(hook.send(&n).await.unwrap(), "ok");
        let message = &stub.messages()[0];
        assert!(message["text"].as_str().unwrap().contains("web-1/run-7"));
        assert!(message["text"].as_str().unwrap().contains(ORIGIN_LINE));
        let context = message["blocks"].as_array().unwrap().last().unwrap();
        assert_eq!(context["elements"][1]["text"], ORIGIN_LINE, "{message}");
        assert_eq!(message["blocks"][0]["type"], "header");

        stub.rate_limit_next(1, 7);
        let err = hook.send(&n).await.unwrap_err();
        assert!(err.is_retryable());
        assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));

        for (status, code, expected, retryable) in [
            (400, "invalid_payload", SlackError::InvalidPayload, false),
            (404, "channel_not_found", SlackError::ChannelNotFound, false),
            (
                410,
                "channel_is_archived",
                SlackError::ChannelIsArchived,
                false,
            ),
            (403, "invalid_token", SlackError::InvalidToken, false),
            (500, "rollup_error", SlackError::RollupError, true),
        ] {
            stub.reject_next(1, status, code);
            let err = hook.send(&n).await.unwrap_err();
            assert!(
                matches!(&err, NotifyError::Slack { status: s, code: c, .. } if *s == status && *c == expected),
                "{err}"
            );
            assert_eq!(err.is_retryable(), retryable, "{code}");
            assert!(!err.to_string().contains("XXXX"), "{err}");
        }
        // 200 with anything but `ok` is not a delivery.
        stub.faults().fail_next(1, Fault::WrongShape);
        assert!(matches!(
            hook.send(&n).await.unwrap_err(),
            NotifyError::Slack { status: 200, .. }
        ));
        assert_eq!(stub.messages().len(), 1);
    }
}

/// All providers from the config the test kit writes for its stubs, driven
/// through the pipeline's `Effects` step by step, with the policy's pure
/// decisions in between.
#[tokio::test]
async fn the_whole_chain_through_effects() {
    let stubs = ProviderStubs::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config: ProvidersConfig =
        assetscan_operator::yaml::from_str(&stubs.write_config(dir.path()).unwrap()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let debug = format!("{providers:?}");
    for secret in [
        ProviderStubs::WEBHOOK_SECRET,
        ProviderStubs::WECOM_KEY,
        "XXXX",
        "/hook",
    ] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }

    stubs.inventory.set_online("inv-17", true);
    stubs
        .osv
        .set_package_vulns("Ubuntu:22.04:LTS", "openssh", &["UBUNTU-CVE-2024-6387"]);
    stubs
        .osv
        .set_package_vulns("Maven", "log4j-core", &["GHSA-34jh-p97f-mpxf"]);
    let mut req = ScanRequest {
        asset: AssetId::new("web-1").unwrap(),
        run: "r1".into(),
        target: Target::Inventory {
            id: "inv-17".into(),
        },
        software: vec![package("Ubuntu:22.04:LTS", "openssh", "1:8.9p1-3ubuntu0.6")],
        sbom: None,
        policy: Policy::default(),
        channels: vec!["webhook".into(), "wecom".into(), "slack".into()],
        token_floor: 0,
        holder: "test".into(),
        owner: None,
        supersedes: None,
        expect_open: false,
        origin: None,
        triage: TriageRequest::default(),
    };

    assert!(providers.check_online(&req).await.unwrap());
    let vulns = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap();
    assert_eq!(vulns.max_cvss, Some(8.1));
    assert!(
        !needs_threat_intel(&req.policy, &vulns),
        "8.1 >= 7.0 decides"
    );
    let risk = assess(&req.policy, &vulns, None);
    assert!(risk.high_risk);

    let notification = Notification {
        ticket_id: "web-1/r1".into(),
        asset: "web-1".into(),
        run: "r1".into(),
        fencing_token: 1,
        risk,
        vulnerabilities: vulns.into(),
        threat_intel: None,
        origin: None,
        resend: None,
    };
    let receipts = providers.notify(&req.channels, &notification).await;
    assert!(receipts.values().all(Result::is_ok), "{receipts:?}");
    assert_eq!(
        receipts.keys().collect::<Vec<_>>(),
        ["slack", "webhook", "wecom"]
    );
    assert_eq!(stubs.sink.effects(), 1);
    assert_eq!(stubs.wecom.messages().len(), 1);
    assert_eq!(stubs.slack.messages().len(), 1);

    // A Medium finding alone needs threat intel; the KEV stub knows the CVE is not listed.
    req.software = vec![package("Maven", "log4j-core", "1")];
    let medium = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap();
    assert!(needs_threat_intel(&req.policy, &medium));
    let intel = providers.threat_intel(&req, &medium).await.unwrap();
    assert_eq!(intel.catalog_version.as_deref(), Some("2025.08.25"));
    assert!(!assess(&req.policy, &medium, Some(&intel)).high_risk);

    // Step errors keep their retryability, per channel.
    stubs.slack.rate_limit_next(1, 9);
    let results = providers
        .notify(&["slack".into(), "nope".into()], &notification)
        .await;
    let err = results["nope"].clone().unwrap_err();
    assert!(
        !err.retryable,
        "an unknown channel is permanent: {}",
        err.message
    );
    assert_eq!(err.message, "not configured");
    let err = results["slack"].clone().unwrap_err();
    assert!(err.retryable, "429 is retryable");
    stubs.slack.rate_limit_next(1, 9);
    let err = providers
        .notify(&["slack".into()], &notification)
        .await
        .remove("slack")
        .unwrap()
        .unwrap_err();
    assert!(err.retryable);
    assert_eq!(err.retry_after, Some(Duration::from_secs(9)));
    // A provider's words never reach the step's error (which the ticket and
    // the tenant-visible status keep): its class and code only.
    let words = "<@all> SECRET-PROVIDER-WORDS https://evil.example";
    stubs.osv.faults().fail_next(
        1,
        Fault::Reply {
            status: 500,
            headers: vec![],
            body: words.as_bytes().to_vec(),
        },
    );
    // Packages no run asked about yet: a package asked about within the
    // lookup window is answered without a request.
    req.software = vec![package("Maven", "log4j-core", "2")];
    let status = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap_err();
    stubs.osv.faults().fail_next(1, Fault::Malformed);
    req.software = vec![package("Maven", "log4j-core", "3")];
    let malformed = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap_err();
    stubs.wecom.errcode_next(1, 93000);
    stubs.slack.reject_next(1, 400, words);
    let mut sent = providers
        .notify(&["wecom".into(), "slack".into()], &notification)
        .await;
    let wecom = sent.remove("wecom").unwrap().unwrap_err();
    let slack = sent.remove("slack").unwrap().unwrap_err();
    for (error, expected) in [
        (&status, "answered HTTP 500"),
        (&malformed, "unexpected response from"),
        (&wecom, "wecom: the robot answered errcode 93000"),
        (
            &slack,
            "slack: the webhook answered HTTP 400 (unknown code)",
        ),
    ] {
        assert!(error.message.contains(expected), "{}", error.message);
        for quoted in [
            "SECRET-PROVIDER-WORDS",
            "Bad Gateway",
            "hint",
            "evil.example",
        ] {
            assert!(
                !error.message.contains(quoted),
                "{quoted}: {}",
                error.message
            );
        }
    }

    let offline = providers
        .check_online(&ScanRequest {
            target: Target::Inventory {
                id: "unknown".into(),
            },
            ..req
        })
        .await;
    assert!(!offline.unwrap_err().retryable, "404 from the inventory");
}
