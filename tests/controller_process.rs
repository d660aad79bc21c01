//! `assetscan-operator run` as a real process, configured as in a cluster
//! (`KUBECONFIG`, `--config`, `--redis-url`, `--metrics-addr`), against the
//! emulator, a real redis-server and the provider stubs: `/healthz`,
//! `/readyz` (503 while Redis is down) and `/metrics` (reconciles, lock
//! contention, stale writes, watchdog, notifications), and a clean SIGTERM.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_testkit::stubs::sink::HOOK_ROUTE;
use controller_kit::*;
use redis::AsyncCommands;
use serde_json::json;

/// `assetscan-operator run` as a process against the harness, configured as
/// in a cluster, its metrics and probes on a port of its own.
fn spawn_operator(h: &Harness, instance: &str) -> OperatorProcess {
    let port = free_port();
    h.operator(instance, &h.config_path, |c| c.metrics_port(port))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_process_serves_probes_and_metrics() {
    let mut h = Harness::start().await;
    let op = spawn_operator(&h, "proc-a");
    assert_eq!(op.wait_answer("/healthz", 200, PATIENCE).await, "ok");
    op.wait_answer("/readyz", 200, PATIENCE).await;
    let done = runs_renew_their_locks_and_meet_anothers(&h, &op).await;
    the_run_released_its_lock(&h, &done).await;
    let text = a_stale_write_is_refused_and_counted(&h, &op, &done).await;
    the_metrics_say_what_happened(&op, &text);
    redis_down_is_not_ready_until_it_is_back(&mut h, &op).await;
    // SIGTERM: a clean shutdown.
    let mut op = op;
    op.terminate();
    let exit = op.wait_exit(PATIENCE).await;
    assert!(exit.success(), "{exit:?}\n{}", op.log());
}

/// The operator's metrics, as scraped.
async fn scraped(op: &OperatorProcess) -> String {
    let (code, text) = op.get("/metrics").await.expect("/metrics answers");
    assert_eq!(code, 200, "{text}");
    text
}

/// Two high-risk runs, vulnerability answers held until the watchdog
/// renewed their locks; the second asset locked by another holder until
/// its lock expires: both end, each notified once.
async fn runs_renew_their_locks_and_meet_anothers(h: &Harness, op: &OperatorProcess) -> AssetScan {
    let locked = scan("proc-locked");
    let lock = h.keys(locked.asset_id()).lock();
    let mut raw = connect(&h.redis).await;
    let _: () = raw
        .set_options(
            &lock,
            "someone-else:default/other",
            redis::SetOptions::default().with_expiration(redis::SetExpiry::PX(60_000)),
        )
        .await
        .unwrap();
    // Vulnerability answers are held: the runs keep their locks until the
    // watchdog renewed them.
    h.stubs.osv.faults().hold();
    for scan in [scan("proc-01").high_risk(), locked.high_risk()] {
        h.create(&h.online(scan)).await;
    }
    until("a renewal and a locked asset", PATIENCE, async || {
        let text = scraped(op).await;
        metric(&text, "assetscan_watchdog_renewals") >= 1.0
            && metric(&text, "assetscan_lock_contention_total") >= 1.0
    })
    .await;
    h.stubs.osv.faults().release();
    // The other holder's lock expires (forced); a watch event makes the
    // operator look again now rather than at the lock's remaining ttl.
    expire_lock(&h.redis, &lock);
    h.poke("proc-locked").await;
    let done = h.wait_terminal("proc-01", PATIENCE).await;
    h.wait_terminal("proc-locked", PATIENCE).await;
    assert_eq!(status(&done).phase, Some(Status::Finished));
    assert_eq!(h.stubs.sink.effects(), 2);
    done
}

/// Released by the run, not left to expire: the audit stream records the
/// release by the run's holder (it follows the FINISHED status).
async fn the_run_released_its_lock(h: &Harness, done: &AssetScan) {
    let mut raw = connect(&h.redis).await;
    let store = h.store().await;
    let proc_01 = asset_id(done.spec.asset_id.as_str());
    until("the run released its lock", PATIENCE, async || {
        let audit = store.audit(&proc_01, 1000).await.unwrap();
        let holder = audit
            .iter()
            .rfind(|e| e.op() == "acquire" && e.accepted())
            .and_then(|e| e.get("holder").map(str::to_owned));
        audit.last().is_some_and(|e| {
            e.op() == "release" && e.accepted() && e.get("holder").map(str::to_owned) == holder
        })
    })
    .await;
    let holder: Option<String> = raw.get(store.keys(&proc_01).lock()).await.unwrap();
    assert_eq!(holder, None, "released");
}

/// A newer executor's claim is in the status: the operator's older
/// ticket is not written over it, and the refusal is counted.
async fn a_stale_write_is_refused_and_counted(
    h: &Harness,
    op: &OperatorProcess,
    done: &AssetScan,
) -> String {
    let token = status(done).fencing_token.unwrap();
    h.merge_status(
        "proc-01",
        json!({"fencingToken": token + 5, "revision": 1, "phase": "INIT"}),
    )
    .await;
    op.wait_for("a stale write counted", PATIENCE, async || {
        let text = scraped(op).await;
        (metric(&text, "assetscan_stale_writes_rejected_total") >= 1.0).then_some(text)
    })
    .await
}

/// What the metrics say of it all, and what the start said of Redis.
fn the_metrics_say_what_happened(op: &OperatorProcess, text: &str) {
    for (sample, at_least) in [
        ("assetscan_reconciles_total{result=\"finished\"}", 2.0),
        ("assetscan_reconciles_total{result=\"locked\"}", 1.0),
        ("assetscan_lock_contention_total", 1.0),
        ("assetscan_stale_writes_rejected_total", 1.0),
        ("assetscan_watchdog_renewals", 1.0),
        (
            "assetscan_notifications_sent_total{channel=\"secops-webhook\"}",
            2.0,
        ),
        (
            "assetscan_step_duration_seconds_count{step=\"vuln_query\"}",
            2.0,
        ),
    ] {
        assert!(
            metric(text, sample) >= at_least,
            "{sample} >= {at_least}:\n{text}"
        );
    }
    assert_eq!(metric(text, "assetscan_locks_held"), 0.0);
    assert_eq!(metric(text, "assetscan_watchdog_losses"), 0.0);
    // The test's Redis has no password and no TLS: said at start, and shown.
    for missing in ["authentication", "tls"] {
        let sample = format!("assetscan_redis_insecure{{missing=\"{missing}\"}}");
        assert_eq!(metric(text, &sample), 1.0, "{sample}:\n{text}");
    }
    assert_eq!(
        op.log()
            .matches("Redis is reached without authentication or without TLS")
            .count(),
        1,
        "{}",
        op.log()
    );
    assert!(
        text.contains("# TYPE assetscan_reconciles counter"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"), "OpenMetrics text");
}

/// Redis down: not ready (but alive) once the replica's next command
/// (its own PING when idle for 2 s) has failed; back: ready again.
async fn redis_down_is_not_ready_until_it_is_back(h: &mut Harness, op: &OperatorProcess) {
    h.redis.stop();
    let body = op.wait_answer("/readyz", 503, PATIENCE).await;
    assert!(body.contains("redis"), "{body}");
    assert_eq!(op.get("/healthz").await.unwrap().0, 200);
    // The outage lasts until the operator's Redis connection has backed off
    // to its longest wait between attempts (each idle-check PING is an attempt once
    // the last one's wait is over, and each failed attempt is logged with
    // the next wait): the worst moment for Redis to return. The probes
    // answer 503 all along (the attempts are the idle check's PINGs).
    let longest_wait = "Some(5s)";
    op.wait_for(
        "the reconnects backed off to their cap",
        PATIENCE,
        async || {
            let (code, body) = op.get("/readyz").await.unwrap();
            assert_eq!(code, 503, "ready without Redis: {body}");
            op.log()
                .lines()
                .any(|l| l.contains("cannot connect to redis") && l.contains(longest_wait))
                .then_some(())
        },
    )
    .await;
    h.redis.restart().unwrap();
    // Ready again once the connection's backoff between failed attempts
    // (at most 5 s) lets the next probe reconnect.
    op.wait_answer("/readyz", 200, PATIENCE).await;
}

/// SIGTERM while a delivery is in flight: the replica does not walk away
/// from it. It finishes the POST, records the receipt and the run's end,
/// and exits; the next replica finds the run finished and sends nothing.
/// (Walking away, the replica left the receipt unwritten and the next owner
/// sent the alert again: two messages in a chat channel.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_and_records_the_delivery_in_flight() {
    let h = Harness::start().await;
    let first = spawn_operator(&h, "proc-stop-a");
    first.wait_answer("/readyz", 200, PATIENCE).await;
    // The receiver takes the POST and holds its answer.
    h.stubs.sink.faults().hold();
    h.create(&h.online(scan("proc-stop").high_risk())).await;
    until("the delivery reached the receiver", PATIENCE, async || {
        h.stubs.sink.calls(HOOK_ROUTE) >= 1
    })
    .await;
    first.terminate();
    first
        .wait_for("the replica was told to stop", PATIENCE, async || {
            first.log().contains("shutdown requested").then_some(())
        })
        .await;
    h.stubs.sink.faults().release();
    let mut first = first;
    let exit = first.wait_exit(PATIENCE).await;
    assert!(exit.success(), "{exit:?}\n{}", first.log());

    let second = spawn_operator(&h, "proc-stop-b");
    let done = h.wait_terminal("proc-stop", PATIENCE).await;
    assert_eq!(status(&done).phase, Some(Status::Finished));
    assert_eq!(
        h.stubs.sink.calls(HOOK_ROUTE),
        1,
        "sent once: the stopping replica recorded its delivery\n{}\n{}",
        first.log(),
        second.log()
    );
    assert_eq!(h.stubs.sink.effects(), 1);
}

/// 0.1.0's own example configuration through this release's binary,
/// watching every namespace as 0.1.0's chart did, Redis down (the start
/// gets as far as waiting for it once the configuration is accepted).
/// Unchanged, it stops at once, naming the webhook channel and the way out;
/// with the changes docs/upgrading.md lists (`legacySignature: true` on the
/// webhook channel, whose secret stays 0.1.0's; `channelAccess` for each
/// channel), it starts, and no channel is left closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_0_1_0_example_configuration_starts_with_the_documented_changes() {
    let mut h = Harness::start().await;
    h.redis.stop();
    let secret = h.dir.path().join("webhook-secret-0.1.0");
    std::fs::write(&secret, "a-0.1.0-hmac-secret").unwrap();
    let original = std::fs::read_to_string(
        assetscan_testkit::tools::repo().join("testkit/fixtures/upgrade/config-0.1.0.yaml"),
    )
    .unwrap()
    .replace(
        "/etc/assetscan/webhook-secret",
        &secret.display().to_string(),
    );
    let secret_line = format!("secretFrom: {{file: {}}}", secret.display());
    assert!(
        original.contains(&secret_line),
        "the fixture's webhook secret"
    );
    let changed = format!(
        "{}channelAccess:\n  secops-webhook: {{namespaces: [default]}}\n  \
         secops-wecom: {{namespaces: [default]}}\n  secops-slack: {{namespaces: [default]}}\n",
        original.replace(
            &secret_line,
            &format!("{secret_line}\n      legacySignature: true"),
        )
    );
    let start = |name: &str, text: &str| {
        let path = h.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, text).unwrap();
        h.operator(name, &path, |c| {
            c.metrics_port(free_port())
                .all_namespaces()
                .env("SECOPS_WEBHOOK_URL", "http://127.0.0.1:9/hook")
                .env("WECOM_ROBOT_KEY", "robot-key")
                .env(
                    "SLACK_WEBHOOK_URL",
                    "https://hooks.slack.com/services/T0/B0/x",
                )
                .env("INVENTORY_TOKEN", "inventory-token")
        })
    };

    let mut unchanged = start("config-0.1.0", &original);
    let exit = unchanged.wait_exit(PATIENCE).await;
    assert!(!exit.success());
    let log = unchanged.log();
    assert!(
        log.contains("notifications.secops-webhook") && log.contains("legacySignature: true"),
        "{log}"
    );
    assert!(!log.contains("a-0.1.0-hmac-secret"), "{log}");

    let mut upgraded = start("config-0.1.0-upgraded", &changed);
    upgraded
        .wait_for("the start waits for Redis", PATIENCE, async || {
            upgraded
                .log()
                .contains("redis unreachable at start")
                .then_some(())
        })
        .await;
    let log = upgraded.log();
    assert!(!log.contains("open to no namespace"), "{log}");
    assert!(
        log.contains("\"secops-webhook\"") && log.contains("signs only as 0.1.0 did"),
        "the legacy-only channel is said at start: {log}"
    );
    upgraded.terminate();
    assert!(upgraded.wait_exit(PATIENCE).await.success());
}

/// A configuration error is said at start, naming the channel, before any
/// connection is made: with Redis down the process does not wait for it
/// first, it exits with the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_channel_secret_is_named_at_once_even_with_redis_down() {
    let mut h = Harness::start().await;
    h.redis.stop();
    // The webhook channel's secret, as a 0.1.0 configuration held it: not
    // a Standard Webhooks secret.
    std::fs::write(h.dir.path().join("webhook-secret"), "a-0.1.0-hmac-secret").unwrap();
    let mut op = spawn_operator(&h, "proc-bad-secret");
    let status = op.wait_exit(PATIENCE).await;
    assert!(!status.success());
    let log = op.log();
    assert!(
        log.contains("notifications.secops-webhook: webhook") && log.contains("whsec_"),
        "{log}"
    );
    assert!(!log.contains("redis unreachable at start"), "{log}");
    assert!(
        !log.contains("a-0.1.0-hmac-secret"),
        "the secret is never logged: {log}"
    );
}

/// A replica started while Redis is unreachable waits for it, as it does
/// when Redis goes away later, instead of exiting; once Redis answers it
/// becomes ready and scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_process_started_before_redis_waits_for_it() {
    let mut h = Harness::start().await;
    h.redis.stop();
    let mut op = spawn_operator(&h, "proc-early");
    op.wait_for(
        "the operator said it waits for redis",
        PATIENCE,
        async || {
            op.log()
                .contains("redis unreachable at start")
                .then_some(())
        },
    )
    .await;
    assert!(
        op.exited().is_none(),
        "the operator exited while Redis was down:\n{}",
        op.log()
    );
    h.redis.restart().unwrap();
    op.wait_answer("/readyz", 200, PATIENCE).await;
    h.create(&h.online(scan("proc-early"))).await;
    let done = h.wait_terminal("proc-early", PATIENCE).await;
    assert_eq!(status(&done).phase, Some(Status::Finished));
}
