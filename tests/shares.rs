//! Each replica prefers its share: replicas that are not sharded, with a
//! live membership (heartbeats in Redis), run each object on one of them,
//! and a replica that is gone has its share picked up by the others. The
//! real controllers and operator processes against the API emulator, a
//! real redis-server and the provider stubs.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_testkit::emulator::{CodeClass, Verb};
use controller_kit::*;
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

const MEMBERS: &str = "assetscan_members";

/// Two replicas that see each other: each object is run by one of them,
/// and the other sends nothing about it: no lock found held, no finalizer
/// or label patch refused, one start per run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_run_each_object_once_without_contention() {
    let mut h = Harness::start().await;
    // Heartbeats every 1.7 s, a member gone after 5 s without one: a
    // heartbeat held up by a loaded machine does not split the membership.
    h.config.scan_starts.membership_ttl = Duration::from_secs(5);
    let [a, b] = h.replicas(["share-a", "share-b"]).await;
    until("both replicas see each other", PATIENCE, async || {
        a.counter(MEMBERS) == 2.0 && b.counter(MEMBERS) == 2.0
    })
    .await;
    let names: Vec<String> = (0..24).map(|i| format!("share-{i}")).collect();
    for name in &names {
        h.create(&h.online(scan(name))).await;
    }
    for name in &names {
        let done = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(status(&done).phase, Some(Status::Finished), "{name}");
    }
    let contention = "assetscan_lock_contention_total";
    assert_eq!((a.counter(contention), b.counter(contention)), (0.0, 0.0));
    let races = "assetscan_finalizer_races_total";
    assert_eq!((a.counter(races), b.counter(races)), (0.0, 0.0));
    let requests = h.emu.requests();
    assert_eq!(
        requests.count_class("assetscans", Verb::Patch, CodeClass::ClientError),
        0,
        "label or finalizer patches refused"
    );
    assert_eq!(
        requests.count_class("assetscans/status", Verb::Patch, CodeClass::ClientError),
        0,
        "status patches refused"
    );
    let started = |r: &Running| {
        r.counter("assetscan_scan_starts_total") - r.counter("assetscan_scan_starts_returned_total")
    };
    assert_eq!(started(&a) + started(&b), names.len() as f64);
    assert!(started(&a) > 0.0 && started(&b) > 0.0, "each ran its share");
}

/// Three operator processes, a high risk each of 30 AssetScans, every run
/// held at its online check; one process is killed (SIGKILL) with its
/// share of the runs in flight. Its heartbeat lapses (`membershipTtl`, 1 s
/// here), the other two pick its share up, and every run finishes within
/// the membership's ttl + 10 s of the kill, each high risk notified once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replicas_share_is_picked_up_and_every_run_finishes_once() {
    let h = Harness::start().await;
    h.stubs.inventory.faults().hold();
    let ops: Vec<OperatorProcess> = ["share-p0", "share-p1", "share-p2"]
        .into_iter()
        .map(|instance| {
            let port = free_port();
            h.operator(instance, &h.config_path, |c| c.metrics_port(port))
        })
        .collect();
    for op in &ops {
        op.wait_for("three members", PATIENCE, async || {
            let (_, text) = op.get("/metrics").await.ok()?;
            (metric(&text, MEMBERS) == 3.0).then_some(())
        })
        .await;
    }
    let names: Vec<String> = (0..30).map(|i| format!("fail-{i}")).collect();
    for name in &names {
        h.create(&h.online(scan(name).high_risk())).await;
    }
    let held = |text: &str| metric(text, "assetscan_locks_held");
    for op in &ops {
        op.wait_for("its share in flight", PATIENCE, async || {
            let (_, text) = op.get("/metrics").await.ok()?;
            (held(&text) >= 1.0).then_some(())
        })
        .await;
    }
    let victim = &ops[2];
    victim.signal(Signal::SIGKILL);
    let killed = Instant::now();
    h.stubs.inventory.faults().release();
    for name in &names {
        let done = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(status(&done).phase, Some(Status::Finished), "{name}");
        assert_eq!(status(&done).high_risk, Some(true), "{name}");
    }
    let took = killed.elapsed();
    let bound = h.config.scan_starts.membership_ttl + Duration::from_secs(10);
    println!("every run finished {took:?} after the kill (bound {bound:?})");
    assert!(took <= bound, "{took:?} > {bound:?}");
    assert_eq!(h.stubs.sink.effects(), names.len(), "one notification each");
    assert_eq!(
        h.stubs.sink.deliveries().len(),
        names.len(),
        "none sent twice"
    );
}
