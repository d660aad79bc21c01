//! The controller through infrastructure failures (emulator + real
//! redis-server + provider stubs): Redis down mid-run, Redis back without
//! its data, injected 409/500/429 answers on status writes, and a ticket
//! lost from Redis mid-run.

mod controller_kit;

use assetscan_operator::domain::ticket::{NotificationState, Status};
use assetscan_operator::kubernetes::controller::{self, ConditionType, Error};
use assetscan_operator::store::StoreError;
use assetscan_testkit::emulator::Fault;
use controller_kit::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redis dies (SIGKILL) while a run waits on a vulnerability query,
/// and stays down for three reconcile attempts: the object shows
/// `Stalled=True` / `Ready=False` with reason `RedisUnavailable`, the
/// attempts go on, `/readyz` answers 503; when Redis is back (with its
/// append-only file) the run continues from its last confirmed fact and
/// finishes, notifying once, at the first attempt after Redis returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_mid_run_stalls_retries_with_backoff_and_finishes() {
    let mut h = Harness::start_with(Options { appendonly: true }).await;
    let held = Held::VulnerabilityQuery;
    let (ctl, online) = h.high_risk_held("ctl-a", "outage-01", held).await;
    // The probes, in process, over this controller's store and metrics.
    let port = free_port();
    let probe = tokio::spawn(assetscan_operator::probes::serve(
        ([127, 0, 0, 1], port).into(),
        assetscan_operator::probes::Exposure::Plain,
        ctl.metrics.clone(),
        Arc::new(std::sync::OnceLock::from(ctl.store.clone())),
        ctl.shutdown.clone(),
    ));
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let before = status(&online).clone();
    let readyz = until_ok("/readyz answers", PATIENCE, async || {
        http_get(&url("/readyz"), &[]).await
    })
    .await;
    assert_eq!(readyz.0, 200, "{}", readyz.1);

    // The harness's append-only Redis syncs every write: ASSET_ONLINE is on
    // disk once acknowledged.
    h.redis.kill();
    // The query answers now, into a run whose Redis is gone.
    h.stubs.osv.faults().release();
    let failures =
        || ctl.counter("assetscan_reconcile_failures_total{reason=\"RedisUnavailable\"}");
    let stalled = h
        .wait("outage-01", "stalled", PATIENCE, |o| {
            has_condition(o, ConditionType::Stalled, "True", "RedisUnavailable")
        })
        .await;
    let (ready, reason, message) = condition(&stalled, ConditionType::Ready).unwrap();
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("False", "RedisUnavailable")
    );
    assert!(message.contains("redis"), "a clear message: {message}");
    let s = stalled.status.as_ref().unwrap();
    assert_eq!(
        (s.phase, s.fencing_token, s.revision),
        (before.phase, before.fencing_token, before.revision),
        "the stall keeps the last confirmed state"
    );
    let (code, body) = http_get(&url("/readyz"), &[]).await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert_eq!(http_get(&url("/healthz"), &[]).await.unwrap().0, 200);

    // Retried while down (how far apart: see
    // `failed_reconciles_back_off_exponentially_with_a_cap`).
    until("three failed attempts", PATIENCE, async || {
        failures() >= 3.0
    })
    .await;
    h.redis.restart().expect("redis restarts");
    let up = Instant::now();
    let at_restart = failures();

    let done = h.wait_terminal("outage-01", PATIENCE).await;
    let recovered_in = up.elapsed();
    let s = done.status.as_ref().unwrap();
    assert_eq!(s.phase, Some(Status::Finished));
    assert_eq!(
        condition(&done, ConditionType::Ready).map(|c| (c.0, c.1)),
        Some(("True".into(), "ScanComplete".into()))
    );
    assert_eq!(
        condition(&done, ConditionType::Stalled).map(|c| c.0),
        Some("False".into())
    );
    assert!(
        s.fencing_token > before.fencing_token,
        "taken over after the outage"
    );
    assert_eq!(
        s.notification.as_ref().map(|n| n.state),
        Some(NotificationState::Sent)
    );
    assert_eq!(h.stubs.sink.effects(), 1);
    assert_eq!(
        h.stubs.inventory.asset_calls(),
        1,
        "the run went on from ASSET_ONLINE: the online check was not repeated"
    );
    h.mirrored_ticket(&done).await;
    check_status_history(&h, "outage-01", &done);
    assert_eq!(
        failures(),
        at_restart,
        "the first attempt after Redis returned went through (no stale connection)"
    );
    assert_eq!(http_get(&url("/readyz"), &[]).await.unwrap().0, 200);
    eprintln!(
        "redis outage: {at_restart} attempts, finished {recovered_in:?} after Redis returned"
    );
    ctl.stop().await;
    probe.await.unwrap().unwrap();
}

/// The retry schedule of a failing object, from the controller's
/// `error_policy` itself: exponential from 1 s, with up to half taken off by
/// jitter, capped at 15 s while Redis is unavailable (it comes back, and an
/// attempt costs one refused round trip) and at 120 s otherwise. Each
/// object has its own count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_reconciles_back_off_exponentially_with_a_cap() {
    let h = Harness::start().await;
    let ctx = h.context("ctl-a").await;
    let unavailable = Error::Store(
        StoreError::Redis {
            op: "ping",
            source: redis::RedisError::from(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            )),
        }
        .into(),
    );
    let not_found = Error::Store(
        StoreError::TicketNotFound {
            key: "asc:{backoff-02}:ticket:r1".into(),
        }
        .into(),
    );
    for (name, err, cap) in [
        ("backoff-01", &unavailable, 15),
        ("backoff-02", &not_found, 120),
    ] {
        let obj = Arc::new(scan(name).build());
        for n in 1..=9u32 {
            let base = Duration::from_secs((1u64 << (n - 1)).min(cap));
            let action = controller::error_policy(obj.clone(), err, ctx.clone());
            let delay = requeue_after(&action).unwrap_or_else(|| panic!("no requeue: {action:?}"));
            assert!(
                delay >= base / 2 && delay <= base,
                "{name}, failure {n}: retry in {delay:?}, expected {:?}..={base:?}",
                base / 2
            );
        }
    }
}

/// Redis comes back empty (restart without persistence) while a run is
/// in flight: the ticket and the fence counter are gone, but `acquire`
/// takes the status token as floor, so the new token is above every token
/// the cluster has seen; the run starts over and finishes, and the
/// notification keeps its idempotency key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_back_empty_keeps_tokens_increasing() {
    let mut h = Harness::start().await;
    let held = Held::VulnerabilityQuery;
    let (ctl, online) = h.high_risk_held("ctl-a", "amnesia-01", held).await;
    let before = status(&online).clone();

    h.redis.restart().expect("redis restarts, empty");
    h.stubs.osv.faults().release();
    let done = h.wait_terminal("amnesia-01", PATIENCE).await;
    let s = done.status.as_ref().unwrap();
    assert_eq!(s.phase, Some(Status::Finished));
    assert!(
        s.fencing_token > before.fencing_token,
        "{:?} after {:?}: tokens never go backwards",
        s.fencing_token,
        before.fencing_token
    );
    assert_eq!(s.ticket_id, before.ticket_id, "same run, same key");
    h.mirrored_ticket(&done).await;
    assert_eq!(
        h.stubs.inventory.asset_calls(),
        2,
        "the confirmed facts were lost with Redis: the run started over"
    );
    assert_eq!(h.stubs.sink.effects(), 1);
    check_status_history(&h, "amnesia-01", &done);
    check_transitions_mirrored_from(&h, &done, s.fencing_token.unwrap()).await;
    assert_eq!(ctl.counter("assetscan_stale_writes_rejected_total"), 0.0);
    ctl.stop().await;
}

/// Status writes answered with 409, 500 and 429 (four and more in a
/// row, at the first write and mid-run). A claim that cannot be recorded
/// stops its run before any provider call and the next reconcile claims
/// again under a new token (one per failed claim); the writes after the
/// recorded claim are retried: every ticket transition from that claim on
/// reaches the status in order, and the last status is the ticket's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_write_conflicts_and_errors_are_retried_without_losing_transitions() {
    let h = Harness::start().await;
    // The run waits in the (held) vulnerability query while the second
    // round of faults is set up.
    h.stubs.osv.faults().hold();
    let faults = h.emu.faults();
    faults.inject("PATCH", "/status", 2, Fault::Conflict);
    faults.inject("PATCH", "/status", 2, Fault::InternalError);
    let flaky = scan("flaky-api-01").high_risk();
    let (ctl, _) = h.run_until("ctl-a", flaky, Status::AssetOnline).await;
    // The next writes (VULN_CHECK_DONE onwards) meet more trouble.
    faults.inject("PATCH", "/status", 3, Fault::InternalError);
    faults.inject("PATCH", "/status", 1, Fault::Conflict);
    faults.inject(
        "PATCH",
        "/status",
        1,
        Fault::TooManyRequests {
            retry_after_seconds: 1,
        },
    );
    h.stubs.osv.faults().release();
    let done = h.wait_terminal("flaky-api-01", PATIENCE).await;
    assert_eq!(faults.pending(), 0, "every injected fault was met");
    let s = done.status.as_ref().unwrap();
    assert_eq!(s.phase, Some(Status::Finished));
    assert_eq!(s.high_risk, Some(true));
    assert_eq!(
        s.notification.as_ref().map(|n| n.state),
        Some(NotificationState::Sent)
    );
    h.mirrored_ticket(&done).await;
    check_status_history(&h, "flaky-api-01", &done);
    // Four faults met four claims: each stopped, the fifth was recorded.
    assert_eq!(s.fencing_token, Some(5));
    check_transitions_mirrored_from(&h, &done, 5).await;
    let phases: Vec<String> = h
        .status_writes("flaky-api-01")
        .iter()
        .filter_map(|s| s["phase"].as_str().map(str::to_owned))
        .collect();
    let mut distinct = phases.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        [
            "INIT",
            "ASSET_ONLINE",
            "VULN_CHECK_DONE",
            "HIGH_RISK_FOUND",
            "NOTIFYING",
            "NOTIFIED",
            "FINISHED"
        ]
    );
    ctl.stop().await;
}

/// The run's ticket disappears from Redis mid-run (evicted under memory
/// pressure, or deleted by hand) while the lock is held: the next write
/// fails, the object shows `Stalled=True` / `Ready=False` (reason
/// `TicketNotFound`) on top of the last status this run wrote — not of the
/// older one it read when it began, which the fence would refuse — and the
/// retry starts the run over with a larger token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_lost_mid_run_stalls_on_the_latest_status_and_recovers() {
    let h = Harness::start().await;
    let held = Held::VulnerabilityQuery;
    let (ctl, online) = h.high_risk_held("ctl-a", "evicted-01", held).await;
    let before = status(&online).clone();
    let key = h.ticket_key(&online);
    let deleted: i64 = h.redis.query(redis::cmd("DEL").arg(&key)).unwrap();
    assert_eq!(deleted, 1);

    // The stall is short-lived (its own status write triggers the retry at
    // once): read it from the write history.
    h.stubs.osv.faults().release();
    let done = h.wait_terminal("evicted-01", PATIENCE).await;
    let stalls: Vec<serde_json::Value> = h
        .status_writes("evicted-01")
        .into_iter()
        .filter(|s| {
            s["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "Stalled" && c["status"] == "True")
        })
        .collect();
    assert_eq!(stalls.len(), 1, "{stalls:#?}");
    let stall = &stalls[0];
    let reason_of = |type_: &str| {
        stall["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .map(|c| (c["status"].clone(), c["reason"].clone()))
            .unwrap()
    };
    assert_eq!(
        reason_of("Stalled"),
        (json!("True"), json!("TicketNotFound"))
    );
    assert_eq!(
        reason_of("Ready"),
        (json!("False"), json!("TicketNotFound"))
    );
    assert_eq!(
        (
            stall["phase"].as_str(),
            stall["fencingToken"].as_i64(),
            stall["revision"].as_i64()
        ),
        (Some("ASSET_ONLINE"), before.fencing_token, before.revision),
        "the stall is written on top of the latest status"
    );
    assert_eq!(ctl.counter("assetscan_stale_writes_rejected_total"), 0.0);

    let s = done.status.as_ref().unwrap();
    assert_eq!(s.phase, Some(Status::Finished));
    assert!(s.fencing_token > before.fencing_token);
    assert_eq!(
        condition(&done, ConditionType::Stalled).map(|c| c.0),
        Some("False".into())
    );
    check_status_history(&h, "evicted-01", &done);
    ctl.stop().await;
}

/// The API server refuses every Event (a missing RBAC grant, a quota, an
/// events outage): the run does not depend on its Events, so the scan still
/// finishes and notifies, and the failures are counted where an operator
/// looks (`assetscan_events_unpublished_total`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_the_api_server_refuses_are_counted_and_the_scan_goes_on() {
    let h = Harness::start().await;
    let faults = h.emu.faults();
    faults.inject("POST", "/events", 1_000, Fault::InternalError);
    let (ctl, done) = h
        .run_to_end("ctl-a", scan("no-events-01").high_risk())
        .await;
    let s = done.status.as_ref().unwrap();
    assert_eq!(
        (s.phase, s.notification.as_ref().map(|n| n.state)),
        (Some(Status::Finished), Some(NotificationState::Sent))
    );
    // The end's Event follows the end's status write.
    let refused = || {
        faults
            .fired()
            .iter()
            .filter(|f| f.path.contains("/events"))
            .count()
    };
    // A refusal is counted once the operator has read the answer, a moment
    // after the API server sent it: wait for the count to catch up, which it
    // never does if refusals go uncounted.
    let counted = || ctl.counter("assetscan_events_unpublished_total");
    until("every refused Event is counted", PATIENCE, async || {
        let fired = refused();
        fired > 0 && counted() == fired as f64
    })
    .await;
    ctl.stop().await;
}
