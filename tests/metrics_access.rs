//! The metrics port as the chart deploys it, on the emulator with real
//! TokenReview and SubjectAccessReview answers and the operator as a real
//! process: `/metrics` over TLS answers 401 without a token, 403 to a
//! ServiceAccount without the chart's metrics-reader role, 200 to one bound
//! to it; the probes answer without a token; the answers are cached, so
//! repeated scrapes send the API server no review.
//!
//!   cargo test --all-features --test metrics_access -- --nocapture
//!
//! prints the reviews the emulator counted for the first scrape and for
//! the repeated ones.

mod controller_kit;
mod metrics_kit;

use assetscan_testkit::emulator::Verb;
use controller_kit::*;
use k8s_openapi::api::core::v1::Namespace;
use metrics_kit::*;
use std::ffi::OsString;

const SCRAPES: usize = 20;

fn reviews(h: &Harness) -> (u64, u64) {
    let counts = h.emu.requests();
    (
        counts.count("tokenreviews", Verb::Create),
        counts.count("subjectaccessreviews", Verb::Create),
    )
}

async fn monitoring_namespace(h: &Harness) {
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "monitoring"}})).unwrap();
    kube::Api::<Namespace>::all(h.client.clone())
        .create(&Default::default(), &ns)
        .await
        .expect("namespace");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_only_the_charts_reader_role() {
    let h = Harness::start().await;
    monitoring_namespace(&h).await;
    create_cluster_scoped(&h.client, &reader_role("asc", "monitoring")).await;
    let (reader, outsider) = tokens(&h.client, "monitoring").await;
    let (cert, key, ca) = tls_files(h.dir.path());
    let port = free_port();
    let flags: [OsString; 4] = [
        "--metrics-tls-cert-file".into(),
        cert.into(),
        "--metrics-tls-key-file".into(),
        key.into(),
    ];
    let op = h.operator("secured", &h.config_path, |c| {
        c.metrics_port(port).secured_metrics().args(flags)
    });
    let https = https_client(([127, 0, 0, 1], port).into(), Some(&ca));
    op.wait_for("/healthz answers over https", PATIENCE, async || {
        let answer = https_get(&https, port, "/healthz", None).await.ok()?;
        (answer.0 == 200).then_some(())
    })
    .await;
    // The kubelet's probes carry no token.
    op.wait_for(
        "/readyz answers 200 without a token",
        PATIENCE,
        async || {
            let answer = https_get(&https, port, "/readyz", None).await.ok()?;
            (answer.0 == 200).then_some(())
        },
    )
    .await;

    check_answers(&https, port, &reader, &outsider).await;

    // The reader's decision is cached: more scrapes, no more reviews.
    let before = reviews(&h);
    for _ in 0..SCRAPES {
        assert_eq!(
            https_get(&https, port, "/metrics", Some(&reader))
                .await
                .unwrap()
                .0,
            200
        );
    }
    let after = reviews(&h);
    println!(
        "reviews (TokenReview, SubjectAccessReview) before {SCRAPES} more scrapes: {before:?}, after: {after:?}"
    );
    assert_eq!(before, after, "cached scrapes sent reviews");
    assert!(
        before.0 >= 3 && before.1 >= 2,
        "the first answers were reviewed: {before:?}"
    );

    // Plain HTTP is not served on the secured port.
    let plain = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await;
    assert!(plain.is_err_and(|e| !e.is_status()), "plain HTTP answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_certificate_is_made_without_a_secret() {
    let h = Harness::start().await;
    let port = free_port();
    let op = h.operator("self-signed", &h.config_path, |c| {
        c.metrics_port(port).secured_metrics()
    });
    let https = https_client(([127, 0, 0, 1], port).into(), None);
    op.wait_for("/healthz answers over https", PATIENCE, async || {
        let answer = https_get(&https, port, "/healthz", None).await.ok()?;
        (answer.0 == 200).then_some(())
    })
    .await;
    assert_eq!(
        https_get(&https, port, "/metrics", None).await.unwrap().0,
        401
    );
    // Not signed by anyone the client trusts.
    let strict = https_client(
        ([127, 0, 0, 1], port).into(),
        Some(&tls_files(h.dir.path()).2),
    );
    assert!(https_get(&strict, port, "/healthz", None).await.is_err());
}
