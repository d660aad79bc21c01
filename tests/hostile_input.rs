//! Hostile and broken input meets a clear error and loses nothing: AssetScans
//! the API server must refuse (with the message a user sees), asset ids that
//! would break the key layout, a software list at its bound, a ticket
//! corrupted mid-run, the scripts flushed from Redis mid-run, a vulnerability
//! service whose reply never ends, and a webhook receiver that hangs.
//!
//! Covered elsewhere, and not repeated here: slow, hanging, oversized,
//! malformed and wrong-shape provider replies and endless paging
//! (`tests/providers/`: `slow_and_hanging_servers_time_out`,
//! `a_10_mb_body_is_refused_at_the_cap`, `malformed_and_wrong_shape_bodies`,
//! `endless_paging_is_cut_off`); each provider fault's effect on a run
//! (`tests/pipeline/`: `permanent_errors_fail_the_run_at_once`,
//! `retryable_errors_are_retried_with_backoff_then_fail_the_run`); a corrupt
//! ticket at the store (`tests/store/`:
//! `a_corrupted_ticket_is_reported_and_left_as_found`); the CRD's rules one
//! by one (`tests/crd.rs`).
//!
//!   cargo test --all-features --test hostile_input

mod controller_kit;

use assetscan_operator::domain::ticket::{NotificationState, Status, Ticket};
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::crd::{AssetScan, INVENTORY_REF_PATTERN, SBOM_REF_PATTERN};
use controller_kit::*;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A package the stubs map to a critical finding (CVSS 10).
const XZ: &str = "Debian:10/xz-utils@5.2.4-1+deb10u1";
/// Exit codes of `scan` (see `src/cli/scan.rs`).
const EXIT_ERROR: i32 = 1;
const EXIT_HIGH_RISK: i32 = 3;
const EXIT_FAILED: i32 = 4;
const EXIT_NOTIFY_PENDING: i32 = 7;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------
// The API server's refusals.

/// A valid AssetScan as JSON, with `spec` fields replaced by `spec`.
fn manifest(name: &str, spec: Value) -> DynamicObject {
    let host = "web-01.example.com";
    let mut object = scan(name).asset(host).host(host, &[443]).json();
    for (key, value) in spec.as_object().unwrap() {
        object["spec"][key] = value.clone();
    }
    serde_json::from_value(object).unwrap()
}

/// `n` distinct packages.
fn packages(n: usize) -> Value {
    (0..n)
        .map(|i| json!({"name": format!("pkg-{i}"), "ecosystem": "PyPI", "version": "1.0"}))
        .collect()
}

/// What `kubectl apply` would print: the API server's 422 message.
async fn refusal(api: &Api<DynamicObject>, object: &DynamicObject) -> String {
    match api.create(&PostParams::default(), object).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            status.message
        }
        other => panic!("accepted, or not refused as invalid: {other:?}"),
    }
}

/// Malformed AssetScans are refused by the CRD's schema before the operator
/// sees them, each with a message that names the field and the rule, and
/// that quotes a 10 kB value no more than the API server does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_assetscans_are_refused_with_the_message_a_user_sees() {
    let h = Harness::start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        NAMESPACE,
        &ApiResource::erase::<AssetScan>(&()),
    );
    let pattern = "'^[A-Za-z0-9][A-Za-z0-9._:/-]*$'";
    let huge = "a".repeat(10 * 1024);
    let cases = [
        (
            "braces",
            json!({"assetId": "web-{01}"}),
            format!(
                "spec.assetId: Invalid value: \"web-{{01}}\": spec.assetId in body should match {pattern}"
            ),
        ),
        (
            "spaces",
            json!({"assetId": "web 01"}),
            format!(
                "spec.assetId: Invalid value: \"web 01\": spec.assetId in body should match {pattern}"
            ),
        ),
        (
            "ten-kb",
            json!({"assetId": huge}),
            "spec.assetId: Too long: may not be longer than 128".to_owned(),
        ),
        (
            "too-much-software",
            json!({"software": packages(501)}),
            "spec.software: Too many: 501: must have at most 500 items".to_owned(),
        ),
        (
            "half-a-package",
            json!({"software": [{"name": "openssl", "version": "3.0.11-1"}]}),
            "spec.software[0]: Invalid value: \"object\": set exactly one of: purl, or name with ecosystem and version".to_owned(),
        ),
        (
            "dot-dot-inventory",
            json!({"target": {"inventoryRef": ".."}}),
            format!(
                "spec.target.inventoryRef: Invalid value: \"..\": spec.target.inventoryRef in body should match '{INVENTORY_REF_PATTERN}'"
            ),
        ),
        (
            "sbom-escapes",
            json!({"sbom": {"source": "artifacts", "ref": "web/../../admin"}}),
            format!(
                "spec.sbom.ref: Invalid value: \"web/../../admin\": spec.sbom.ref in body should match '{SBOM_REF_PATTERN}'"
            ),
        ),
        (
            "sbom-encoded",
            json!({"sbom": {"source": "artifacts", "ref": "%2e%2e/admin"}}),
            format!(
                "spec.sbom.ref: Invalid value: \"%2e%2e/admin\": spec.sbom.ref in body should match '{SBOM_REF_PATTERN}'"
            ),
        ),
        (
            "sbom-and-software",
            json!({"software": packages(1), "sbom": {"source": "artifacts", "ref": "web.cdx.json"}}),
            "spec: Invalid value: \"object\": set at most one of: software (listed), or sbom (by reference)".to_owned(),
        ),
        (
            "two-targets",
            json!({"target": {"host": "web-01", "ports": [443], "inventoryRef": "web-01"}}),
            "spec.target: Invalid value: \"object\": set exactly one of: host (with ports), or inventoryRef".to_owned(),
        ),
    ];
    for (name, spec, expected) in cases {
        let message = refusal(&api, &manifest(name, spec)).await;
        assert_eq!(
            message,
            format!("AssetScan.assetscan.io \"{name}\" is invalid: {expected}"),
            "{name}"
        );
    }
    // At the bound: accepted.
    let at_bound = manifest("software-at-the-bound", json!({"software": packages(500)}));
    api.create(&PostParams::default(), &at_bound).await.unwrap();
    assert!(h.api().get_opt("ten-kb").await.unwrap().is_none());
}

// ---------------------------------------------------------------------------
// The command line: `scan` with a config of short step timeouts.

/// A config file for `scan`: the harness's stubs, short step timeouts, and
/// the vulnerability service at `vulnerabilities` when given.
fn scan_config(h: &Harness, vulnerabilities: Option<&str>) -> PathBuf {
    let mut providers = h
        .stubs
        .write_providers_section(h.dir.path(), "secops-")
        .unwrap();
    if let Some(url) = vulnerabilities {
        providers = providers.replace(&h.stubs.osv.url(), url);
    }
    let steps = steps_yaml([("2s", 2), ("800ms", 2), ("2s", 2), ("800ms", 2)], "200ms");
    let text = format!(
        "redis: {{timeout: 2s}}\n\
         lock: {{ttl: 1500ms}}\n\
         tickets: {{retention: 1h, auditCap: 10000}}\n\
         {steps}{providers}"
    );
    let path = h.dir.path().join(format!(
        "scan-{}.yaml",
        vulnerabilities.map_or("stubs", |_| "custom")
    ));
    std::fs::write(&path, text).unwrap();
    path
}

/// `assetscan-operator scan --asset <asset> --inventory <asset> <extra>`
/// against the harness's Redis.
async fn scan_cli(h: &Harness, config: &Path, asset: &str, extra: &[&str]) -> Output {
    let url = h.redis.url();
    let scan = ["scan", "--redis-url", &url, "--asset", asset];
    cli(config, &scan)
        .args(["--inventory", asset, "--run", "r1"])
        .args(extra)
        .output()
        .await
        .unwrap()
}

/// [`scan_cli`] ending with exit code `code`: the ticket it printed.
async fn scan_ending(h: &Harness, config: &Path, asset: &str, extra: &[&str], code: i32) -> Ticket {
    let out = scan_cli(h, config, asset, extra).await;
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    printed_ticket(&out)
}

fn printed_ticket(out: &Output) -> Ticket {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// Ids that would break the key layout (a hash tag, a space, 10 kB) are
/// refused before anything reaches Redis or a provider, and the error
/// quotes a bounded prefix of the input, never all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asset_ids_that_break_the_key_layout_are_refused_with_a_bounded_quote() {
    let h = Harness::start().await;
    let config = scan_config(&h, None);
    let huge = format!("{}{{", "x".repeat(10 * 1024));
    for (asset, reason) in [
        ("web-{01}", "contains '{' or '}'"),
        ("web 01", "contains whitespace or control characters"),
        (huge.as_str(), "is longer than 128 bytes"),
    ] {
        let out = scan_cli(&h, &config, asset, &["--package", XZ]).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(EXIT_ERROR), "{stderr}");
        let error = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(
            error.starts_with("error: invalid asset id \"") && error.ends_with(reason),
            "{error}"
        );
        assert!(error.len() < 300, "{} bytes: {error}", error.len());
        assert!(stderr.len() < 1000, "{} bytes of stderr", stderr.len());
    }
    assert_eq!(
        h.redis.command_calls("evalsha").unwrap(),
        0,
        "nothing reached Redis"
    );
    let counters = h.stubs.counters();
    assert_eq!(
        (counters.inventory, counters.querybatch),
        (0, 0),
        "no provider was called"
    );
    let keys: Vec<String> = h.redis.query(redis::cmd("KEYS").arg("*")).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// A software list at its bound (the CRD's 500 packages, accepted by the API
/// server above) is scanned: one vulnerability query covers the whole list
/// and the run ends clean. (Through `scan`: the in-process API emulator
/// spends seconds of CPU validating each write of such an object, which
/// would starve the controller under test; a real API server does not run
/// in the operator's process.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_software_list_at_the_bound_is_scanned() {
    let h = Harness::start().await;
    let config = scan_config(&h, None);
    let software = h.dir.path().join("software.json");
    std::fs::write(&software, packages(500).to_string()).unwrap();
    let asset = "bound-01.dc1.example.com";
    h.stubs.inventory.set_online(asset, true);
    let listed = ["--software", software.to_str().unwrap()];
    let ticket = scan_ending(&h, &config, asset, &listed, 0).await;
    assert_eq!(ticket.status, Status::Finished);
    assert!(ticket.last_error.is_none(), "{:?}", ticket.last_error);
    assert_eq!(h.stubs.counters().querybatch, 1, "one batch of 500");
}

/// High-risk scan `name` under controller `ctl-a`, at `ASSET_ONLINE` with
/// its vulnerability query slow (1.5 s): the test breaks something under
/// the run while it waits there.
async fn online_with_a_slow_query(h: &Harness, name: &str) -> (Running, AssetScan) {
    h.stubs
        .osv
        .faults()
        .set_latency(Duration::from_millis(1500));
    let slow = scan(name).high_risk();
    h.run_until("ctl-a", slow, Status::AssetOnline).await
}

/// The run's ticket is overwritten with 10 kB of garbage while the run
/// waits on a provider: the object shows `Stalled=True` with reason
/// `TicketCorrupt` and a bounded message, on top of the last good status;
/// the garbage is left as found for a human to look at (never overwritten);
/// once it is removed, the run starts over under a larger token and ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_corrupted_mid_run_stalls_with_the_reason_and_is_left_as_found() {
    let h = Harness::start().await;
    let (ctl, online) = online_with_a_slow_query(&h, "corrupt-01").await;
    let before = status(&online).clone();
    let key = h.ticket_key(&online);
    let garbage = format!("{{\"status\": \"{}", "\u{fffd}".repeat(3 * 1024));
    h.redis.command(&["SET", &key, &garbage]).unwrap();

    let stalled = h
        .wait("corrupt-01", "stalled", PATIENCE, |o| {
            has_condition(o, ConditionType::Stalled, "True", "TicketCorrupt")
        })
        .await;
    let s = stalled.status.as_ref().unwrap();
    let stall = ConditionType::Stalled.find(&s.conditions).unwrap();
    assert!(stall.message.contains(&key), "{}", stall.message);
    assert!(stall.message.len() < 1024, "{} bytes", stall.message.len());
    assert_eq!(
        (s.phase, s.fencing_token, s.revision),
        (before.phase, before.fencing_token, before.revision),
        "the last good status is kept"
    );
    let stored: String = h.redis.query(redis::cmd("GET").arg(&key)).unwrap();
    assert_eq!(stored, garbage, "left as found");

    // A human removes it: the run starts over, above every earlier token.
    h.redis.command(&["DEL", &key]).unwrap();
    h.stubs.osv.faults().set_latency(Duration::ZERO);
    let done = h.wait_terminal("corrupt-01", PATIENCE).await;
    assert_finished_and_notified_after(&done, &before);
    check_status_history(&h, "corrupt-01", &done);
    ctl.stop().await;
}

/// `SCRIPT FLUSH` while a run waits on a provider (a Redis restarted from
/// its append-only file, or an operator flushing the script cache): the
/// next script call meets NOSCRIPT, loads the script and goes on; the run
/// ends without a single failed reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_flushed_mid_run_are_loaded_again_and_the_run_goes_on() {
    let h = Harness::start().await;
    let (ctl, _) = online_with_a_slow_query(&h, "noscript-01").await;
    let loads = h.redis.command_calls("script|load").unwrap();
    assert!(loads > 0, "the scripts were loaded once already");
    h.redis.command(&["SCRIPT", "FLUSH"]).unwrap();
    let done = h.wait_terminal("noscript-01", PATIENCE).await;
    assert_eq!(phase(&done), Some(Status::Finished));
    assert!(
        h.redis.command_calls("script|load").unwrap() > loads,
        "loaded again after the flush"
    );
    let failures: f64 = ["RedisUnavailable", "RedisPermissionDenied", "Protocol"]
        .iter()
        .map(|r| {
            ctl.counter(&format!(
                "assetscan_reconcile_failures_total{{reason=\"{r}\"}}"
            ))
        })
        .sum();
    assert_eq!(failures, 0.0);
    check_every_transition_mirrored(&h, &done).await;
    ctl.stop().await;
}

/// A server that answers 200 with a JSON body that never ends: a byte every
/// 50 ms, forever.
async fn endless_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                            transfer-encoding: chunked\r\n\r\n1\r\n[\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                while socket.write_all(b"1\r\n \r\n").await.is_ok() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
        }
    });
    (url, task)
}

/// The vulnerability service answers with a body that never ends: each
/// attempt is cut at the step's timeout, the run fails with that reason in
/// `lastError`, and the online check it confirmed is kept (and not repeated
/// by the next run of the same ticket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_vulnerability_reply_is_cut_at_the_timeout_and_loses_nothing() {
    let h = Harness::start().await;
    let (url, server) = endless_server().await;
    let config = scan_config(&h, Some(&url));
    let asset = "endless-01.dc1.example.com";
    h.stubs.inventory.set_online(asset, true);
    let started = std::time::Instant::now();
    let ticket = scan_ending(&h, &config, asset, &["--package", XZ], EXIT_FAILED).await;
    assert!(started.elapsed() < Duration::from_secs(20), "bounded");
    assert_eq!(ticket.status, Status::Failed);
    let error = ticket.last_error.as_ref().unwrap();
    assert_eq!(
        error.step,
        assetscan_operator::domain::ticket::Step::VulnQuery
    );
    assert_eq!(error.attempt, 2);
    assert!(error.message.contains("timed out after 800ms"), "{error:?}");
    assert!(ticket.facts.online.is_some(), "the confirmed fact is kept");
    assert_eq!(h.stubs.counters().inventory, 1);
    server.abort();
}

/// The webhook receiver accepts connections and never answers: each
/// attempt is cut at the notify timeout, the run is deferred at
/// `NOTIFYING` with the reason (a confirmed high risk is not failed), the
/// lock is released; when the receiver answers again, the same run is
/// notified exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_defers_the_notification_and_loses_nothing() {
    let h = Harness::start().await;
    let config = scan_config(&h, None);
    let asset = "hanging-hook-01.dc1.example.com";
    h.stubs.inventory.set_online(asset, true);
    h.stubs
        .sink
        .faults()
        .always(assetscan_testkit::stubs::Fault::Hang);
    let notify = ["--package", XZ, "--notify", "secops-webhook"];
    let ticket = scan_ending(&h, &config, asset, &notify, EXIT_NOTIFY_PENDING).await;
    assert_eq!(ticket.status, Status::Notifying);
    let error = ticket.last_error.as_ref().unwrap();
    assert_eq!(error.step, assetscan_operator::domain::ticket::Step::Notify);
    assert!(error.message.contains("timed out after 800ms"), "{error:?}");
    assert_eq!(h.stubs.sink.effects(), 0);
    let lock: Option<String> = h
        .redis
        .query(redis::cmd("GET").arg(format!("asc:{{{asset}}}:lock")))
        .unwrap();
    assert_eq!(lock, None, "the lock is released while deferred");

    h.stubs.sink.faults().clear();
    let done = scan_ending(&h, &config, asset, &notify, EXIT_HIGH_RISK).await;
    assert_eq!(done.status, Status::Finished);
    assert_eq!(done.id, ticket.id, "the same run");
    assert_eq!(
        done.facts.notification.as_ref().map(|n| n.state),
        Some(NotificationState::Sent)
    );
    assert_eq!(h.stubs.sink.effects(), 1);
}
