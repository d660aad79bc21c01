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
                    serde_json::to_vec(&json!({"id": v["id"], "modified": v["modified"]})).unwrap(),
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
