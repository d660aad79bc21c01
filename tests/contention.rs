//! Replicas that watch the same objects (not sharded) and race for each
//! run: the per-asset lock lets one of them run it, and the others spend
//! nothing on it: no start of their start bound, no second end (report,
//! status write, Event). The real controllers against the API emulator, a
//! real redis-server and the provider stubs.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_testkit::emulator::{CodeClass, Verb};
use assetscan_testkit::stubs::Fault;
use controller_kit::*;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::time::Duration;

const SCANS: usize = 8;

/// The `HighRiskFound` Events, by object name.
async fn high_risk_events(h: &Harness) -> BTreeMap<String, Vec<Event>> {
    let api: Api<Event> = Api::namespaced(h.client.clone(), NAMESPACE);
    let list = api.list(&ListParams::default()).await.expect("list events");
    let mut by_object: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for event in list.items {
        if event.reason.as_deref() != Some("HighRiskFound") {
            continue;
        }
        let name = (event.regarding.as_ref())
            .and_then(|r| r.name.clone())
            .unwrap_or_default();
        by_object.entry(name).or_default().push(event);
    }
    by_object
}

/// Runs started by `replica`: starts taken less starts given back.
fn runs_started(replica: &Running) -> f64 {
    replica.counter("assetscan_scan_starts_total")
        - replica.counter("assetscan_scan_starts_returned_total")
}

/// Two replicas without a membership (`membershipTtl: 0s`, as before the
/// shares, or two versions side by side), every object's run held in progress (the inventory holds
/// its answers) while both reconcile it: one runs it, the other finds the
/// lock held (on every status write of the run, progress being written at
/// each step) or, at the end, the run ended. Each run takes one start of
/// one replica's bound, and its end is written once: one report created
/// (none refused as existing), no status patch refused, one
/// `HighRiskFound` Event per high risk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_start_each_run_once_and_write_its_end_once() {
    let mut h = Harness::start().await;
    // No membership: both replicas reconcile every object.
    h.config.scan_starts.membership_ttl = Duration::ZERO;
    h.stubs.inventory.faults().hold();
    let [a, b] = h.replicas(["contention-a", "contention-b"]).await;
    let names: Vec<String> = (0..SCANS).map(|i| format!("risky-{i}")).collect();
    for name in &names {
        h.create(&h.online(scan(name).high_risk())).await;
    }
    let contention = "assetscan_lock_contention_total";
    until(
        "each run found locked by the other replica",
        PATIENCE,
        async || a.counter(contention) + b.counter(contention) >= SCANS as f64,
    )
    .await;
    h.stubs.inventory.faults().release();
    for name in &names {
        let done = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(status(&done).phase, Some(Status::Finished), "{name}");
        assert_eq!(status(&done).high_risk, Some(true), "{name}");
    }
    // Each replica has looked at the objects again since they finished.
    let up_to_date = "assetscan_reconciles_total{result=\"up_to_date\"}";
    until(
        "both replicas found every run ended",
        PATIENCE,
        async || a.counter(up_to_date) >= SCANS as f64 && b.counter(up_to_date) >= SCANS as f64,
    )
    .await;

    let requests = h.emu.requests();
    let reports = "assetscanreports";
    assert_eq!(
        requests.count_class(reports, Verb::Create, CodeClass::Success),
        SCANS as u64
    );
    assert_eq!(
        requests.count_class(reports, Verb::Create, CodeClass::ClientError),
        0,
        "a report written twice"
    );
    assert_eq!(
        requests.count_class("assetscans/status", Verb::Patch, CodeClass::ClientError),
        0,
        "status patches refused"
    );
    let events = high_risk_events(&h).await;
    assert_eq!(events.len(), SCANS, "{events:#?}");
    for (name, list) in &events {
        assert_eq!(list.len(), 1, "{name}: {list:#?}");
        assert!(list[0].series.is_none(), "{name}: {list:#?}");
    }
    let started = runs_started(&a) + runs_started(&b);
    assert_eq!(started, SCANS as f64, "one start per run");
    assert_eq!(h.delivered_keys().len(), SCANS);
    assert_eq!(h.stubs.sink.effects(), SCANS);
}

/// A notify pass that failed (every attempt refused by the webhook) writes
/// the run's `NOTIFYING` status with the channel's error; that write's own
/// reconcile, and any other, waits: the next pass comes no sooner than
/// `notify.maxBackoff` after the failed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_notify_pass_is_retried_after_its_backoff_whatever_reconciles_it() {
    let mut h = Harness::start().await;
    let backoff = Duration::from_secs(3);
    h.config.steps.notify.max_backoff = backoff;
    let attempts = h.config.steps.notify.max_attempts as usize;
    h.stubs.sink.faults().always(Fault::Status(503));
    let ctl = h.controller("notify-backoff").await;
    h.create(&h.online(scan("alerting").high_risk())).await;
    until("two failed notify passes", PATIENCE, async || {
        h.stubs.sink.call_times().len() > attempts
    })
    .await;
    let calls = h.stubs.sink.call_times();
    let (last_of_first, first_of_next) = (calls[attempts - 1], calls[attempts]);
    let waited = first_of_next - last_of_first;
    assert!(
        waited >= backoff,
        "the next pass {waited:?} after the failed one, sooner than {backoff:?}"
    );
    let held = "assetscan_reconciles_total{result=\"notify_backoff\"}";
    assert!(
        ctl.counter(held) >= 1.0,
        "the status write's reconcile came in between and waited"
    );
    let stored = h.api().get("alerting").await.expect("get");
    assert_eq!(phase(&stored), Some(Status::Notifying));
    h.stubs.sink.faults().clear();
    let done = h.wait_terminal("alerting", PATIENCE).await;
    assert_eq!(status(&done).phase, Some(Status::Finished));
    assert_eq!(h.stubs.sink.effects(), 1);
}

const OVERDUE: &str = "assetscan_overdue_oldest_age_seconds{shard=\"0\"}";

/// Replica A, alone, holds eight high risks' runs `NOTIFYING` (the webhook
/// holds the calls, then refuses them). Replica B joins: the runs that
/// prefer B now (about half; all eight preferring A has a chance of 1 in
/// 256) are A's, and B finds their locks held by A, which is live. They
/// are running, not overdue, on either replica, through the held calls and
/// the failed passes after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_notifying_on_a_live_replica_is_not_overdue_on_the_other() {
    let mut h = Harness::start().await;
    // A heartbeat held up by a loaded machine does not make A look gone.
    h.config.scan_starts.membership_ttl = Duration::from_secs(5);
    h.stubs.sink.faults().hold();
    let a = h.controller("overdue-a").await;
    let names: Vec<String> = (0..8).map(|i| format!("alerting-{i}")).collect();
    for name in &names {
        h.create(&h.online(scan(name).high_risk())).await;
    }
    for name in &names {
        h.wait_phase(name, Status::Notifying).await;
    }
    let b = h.controller("overdue-b").await;
    let contention = "assetscan_lock_contention_total";
    until("a run of A's found locked by B", PATIENCE, async || {
        b.counter(contention) >= 1.0
    })
    .await;
    assert_eq!((a.counter(OVERDUE), b.counter(OVERDUE)), (0.0, 0.0));
    h.stubs.sink.faults().always(Fault::Status(503));
    h.stubs.sink.faults().release();
    let deferred = "assetscan_reconciles_total{result=\"notify_deferred\"}";
    until("two failed notify passes", PATIENCE, async || {
        a.counter(deferred) + b.counter(deferred) >= 2.0
    })
    .await;
    assert_eq!((a.counter(OVERDUE), b.counter(OVERDUE)), (0.0, 0.0));
}
