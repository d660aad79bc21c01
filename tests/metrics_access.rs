//! The metrics port as the chart deploys it, on the emulator with real
//! TokenReview and SubjectAccessReview answers and the operator as a real
//! process: `/metrics` over TLS answers 401 without a token, 403 to a
//! ServiceAccount without the chart's metrics-reader role, 200 to one bound
//! to it; the probes answer without a token; the answers are cached, so
//! repeated scrapes send the API server no review; and an address that
//! sends a new token on every request costs at most its budget of
//! reviews, the rest answered 429, while a cached token still passes.
//!
//!   cargo test --all-features --test metrics_access -- --nocapture
//!
//! prints the reviews the emulator counted for the first scrape and for
//! the repeated ones, and the TokenReviews 30 new garbage tokens from one
//! address cost.

mod controller_kit;
mod metrics_kit;

use assetscan_operator::http_access::ReviewBudget;
use assetscan_testkit::emulator::Verb;
use controller_kit::*;
use k8s_openapi::api::core::v1::Namespace;
use metrics_kit::*;
use std::ffi::OsString;
use std::time::Instant;

const SCRAPES: usize = 20;
/// New garbage tokens sent from one address at once.
const GARBAGE: usize = 30;

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

/// A harness whose `monitoring` namespace is bound to the chart's reader
/// role, and the tokens of that namespace's reader and of an outsider.
async fn with_a_reader() -> (Harness, String, String) {
    let h = Harness::start().await;
    monitoring_namespace(&h).await;
    create_cluster_scoped(&h.client, &reader_role("asc", "monitoring")).await;
    let (reader, outsider) = tokens(&h.client, "monitoring").await;
    (h, reader, outsider)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_only_the_charts_reader_role() {
    let (h, reader, outsider) = with_a_reader().await;
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

/// Status and `Retry-After` of `GET /metrics` with `token`.
async fn metrics_status(client: &reqwest::Client, port: u16, token: &str) -> (u16, Option<u64>) {
    let answer = client
        .get(format!("https://localhost:{port}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .expect("answered");
    let retry_after = answer
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    (answer.status().as_u16(), retry_after)
}

/// The value of the series `series` in a scrape's `text`, 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_garbage_tokens_cost_one_address_at_most_its_burst_of_reviews() {
    let (h, reader, _) = with_a_reader().await;
    let port = free_port();
    let op = h.operator("budget", &h.config_path, |c| {
        c.metrics_port(port).secured_metrics()
    });
    let https = https_client(([127, 0, 0, 1], port).into(), None);
    // The reader's decision is reviewed once, then cached.
    op.wait_for("/metrics answers the reader", PATIENCE, async || {
        let answer = https_get(&https, port, "/metrics", Some(&reader))
            .await
            .ok()?;
        (answer.0 == 200).then_some(())
    })
    .await;

    // An outsider's flood: a new token on every request, all at once.
    let garbage: Vec<String> = (0..GARBAGE).map(|i| format!("garbage-{i}")).collect();
    let before = reviews(&h).0;
    let started = Instant::now();
    let answers =
        futures::future::join_all(garbage.iter().map(|t| metrics_status(&https, port, t))).await;
    let elapsed = started.elapsed();
    let reviewed = reviews(&h).0 - before;
    let unauthenticated = answers.iter().filter(|(s, _)| *s == 401).count();
    let limited: Vec<_> = answers.iter().filter(|(s, _)| *s == 429).collect();
    println!(
        "{GARBAGE} garbage tokens from one address in {elapsed:?}: {reviewed} TokenReviews, \
         {unauthenticated} answered 401, {} answered 429",
        limited.len()
    );
    // The budget's rule: its burst, and one more per refill interval.
    let budget = ReviewBudget::default();
    let refills = elapsed.as_millis() / budget.refill.as_millis();
    let allowed = u64::from(budget.burst) + refills as u64;
    assert!(
        reviewed <= allowed,
        "{reviewed} TokenReviews for {GARBAGE} garbage tokens in {elapsed:?}, at most {allowed}"
    );
    assert_eq!(unauthenticated as u64, reviewed, "each review answered 401");
    assert_eq!(limited.len() + unauthenticated, GARBAGE, "{answers:?}");
    assert!(
        limited
            .iter()
            .all(|(_, after)| after.is_some_and(|s| s >= 1)),
        "each 429 says when to retry: {limited:?}"
    );

    // A cached token is never limited: the reader gets 200, between two
    // garbage tokens refused, without a review. (When the bucket refilled
    // in between on a slow machine, the address is drained again.)
    let mut fresh = GARBAGE;
    let mut new_garbage = async || {
        fresh += 1;
        metrics_status(&https, port, &format!("garbage-{fresh}"))
            .await
            .0
    };
    let mut shown = false;
    for _ in 0..5 {
        let mut tries = 0;
        while new_garbage().await != 429 {
            tries += 1;
            assert!(tries <= budget.burst, "the address is never limited");
        }
        let before = reviews(&h);
        assert_eq!(metrics_status(&https, port, &reader).await.0, 200);
        assert_eq!(reviews(&h), before, "the reader's scrape was reviewed");
        if new_garbage().await == 429 {
            shown = true;
            break;
        }
    }
    assert!(
        shown,
        "the reader never scraped while the address was limited"
    );

    // Counted: the reviews by outcome, and the refusals.
    let (_, text) = https_get(&https, port, "/metrics", Some(&reader))
        .await
        .expect("scrape");
    let refused = sample(&text, "assetscan_access_reviews_total{outcome=\"limited\"}");
    assert!(refused >= limited.len() as f64 + 1.0, "{text}");
    let unknown = sample(
        &text,
        "assetscan_access_reviews_total{outcome=\"unauthenticated\"}",
    );
    assert!(unknown >= reviewed as f64, "{text}");
    assert!(
        sample(&text, "assetscan_access_reviews_total{outcome=\"allowed\"}") >= 1.0,
        "{text}"
    );
}
