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
