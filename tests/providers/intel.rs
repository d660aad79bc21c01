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
    let catalog = KevCatalog::parse(&fixture("kev/known_exploited_vulnerabilities.json")).unwrap();
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
            body: br#"{"data":[{"cve":"CVE-2021-40438","epss":"7","percentile":"1"}]}"#.to_vec(),
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
