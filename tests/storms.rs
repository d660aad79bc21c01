//! No storms (emulator + redis-server + provider stubs, the controller in
//! this process): many AssetScans at once, or every run resumed after a
//! restart, reach the providers no faster than the replica's start bound
//! (`scanStarts.perSecond`, `scanStarts.burst`); runs that ended together
//! are due again at different times (`scanStarts.rescanSpread`), and
//! mirroring a run's ticket again writes nothing. A confirmed high risk's
//! notification does not wait behind the line of new scans.

mod controller_kit;

use assetscan_operator::domain::shard;
use assetscan_operator::kubernetes::controller::settings::ScanStartsSection;
use assetscan_operator::kubernetes::controller::{StatusMirror, rescan_after};
use assetscan_operator::kubernetes::crd::{AssetScan, SHARD_LABEL};
use assetscan_operator::telemetry::Metrics;
use assetscan_testkit::stubs::Fault;
use assetscan_testkit::stubs::peak::peak;
use controller_kit::*;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// 5 starts per second, 5 at once: no second sees more than 10.
const BOUND: ScanStartsSection = ScanStartsSection {
    per_second: 5,
    burst: 5,
    rescan_spread: 0.1,
    rescan_min_interval: Duration::from_secs(30),
    membership_ttl: Duration::from_secs(1),
    takeover_after: Duration::from_secs(300),
};

/// `count` AssetScans `<prefix>-NN`, their assets online in the inventory,
/// nothing to notify: each run makes exactly one provider request (the
/// inventory's online check).
fn storm(h: &Harness, prefix: &str, count: usize) -> Vec<AssetScan> {
    (0..count)
        .map(|n| h.online(scan(&format!("{prefix}-{n:02}")).notify(&[])))
        .collect()
}

/// Waits until every AssetScan shows a terminal phase; returns them.
async fn all_terminal(h: &Harness, count: usize) -> Vec<AssetScan> {
    until_some("every AssetScan ended", PATIENCE, async || {
        let objects = h.api().list(&ListParams::default()).await.ok()?.items;
        (objects.len() == count && objects.iter().all(is_terminal)).then_some(objects)
    })
    .await
}

/// Asserts that the provider stubs had `expected` requests since `since`
/// (one inventory request per run), and never more in one second than
/// `bound` lets through.
fn assert_requests_within_bound(
    h: &Harness,
    since: Instant,
    expected: usize,
    bound: &ScanStartsSection,
) {
    let times: Vec<Instant> = h
        .stubs
        .call_times()
        .into_iter()
        .filter(|t| *t >= since)
        .collect();
    assert_eq!(times.len(), expected, "one inventory request per run");
    let most = peak(&times, Duration::from_secs(1));
    let bound = bound.peak_per_second() as usize;
    assert!(
        most <= bound,
        "{most} provider requests in one second, bound {bound}"
    );
}

/// 30 AssetScans created at once, without the shard label, then a replica
/// with a bound of 5 starts per second (burst 5): all 30 finish, no second
/// of the provider stubs' request log holds more than 10 requests (one per
/// run), and no second sees more than 10 of the objects labelled (the
/// start of their first run, `reconcile/place.rs`). Without the bound, the
/// 30 are labelled within a second, and their runs reach the inventory
/// within a second or two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_round_of_many_assetscans_reaches_the_providers_at_the_bound() {
    let mut h = Harness::start().await;
    h.config.scan_starts = BOUND;
    for obj in storm(&h, "storm", 30) {
        h.create(&obj).await;
    }
    let labelled = LabelTimes::watch(h.api());
    let started = Instant::now();
    let ctl = h.controller("ctl-a").await;
    all_terminal(&h, 30).await;

    assert_requests_within_bound(&h, started, 30, &BOUND);
    let labels = labelled.times();
    assert_eq!(labels.len(), 30, "every object labelled");
    let most = peak(&labels, Duration::from_secs(1));
    // One more for the watch, whose deliveries may bunch by a few ms.
    let bound = BOUND.peak_per_second() as usize + 1;
    assert!(
        most <= bound,
        "{most} objects labelled in one second, bound {bound}"
    );
    assert!(ctl.counter("assetscan_label_starts_total") >= 30.0);
    assert!(ctl.counter("assetscan_label_starts_delayed_total") > 0.0);
    assert!(ctl.counter("assetscan_scan_starts_total") >= 30.0);
    ctl.stop().await;
}

/// When the test's watch first saw each AssetScan with its shard label.
struct LabelTimes {
    seen: Arc<Mutex<HashMap<String, Instant>>>,
    watch: tokio::task::JoinHandle<()>,
}

impl LabelTimes {
    fn watch(api: Api<AssetScan>) -> LabelTimes {
        let seen = Arc::new(Mutex::new(HashMap::new()));
        let record = seen.clone();
        let watch = tokio::spawn(async move {
            let mut objects =
                std::pin::pin!(watcher(api, watcher::Config::default()).touched_objects());
            while let Some(Ok(obj)) = objects.next().await {
                if obj.labels().contains_key(SHARD_LABEL) {
                    (record.lock().unwrap())
                        .entry(obj.name_any())
                        .or_insert_with(Instant::now);
                }
            }
        });
        LabelTimes { seen, watch }
    }

    fn times(&self) -> Vec<Instant> {
        self.seen.lock().unwrap().values().copied().collect()
    }
}

impl Drop for LabelTimes {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// 8 runs in flight (as many as a replica reconciles at once), held inside
/// the inventory's answer, when their replica dies; its replacement, with a
/// bound of 2 starts per second (burst 1), resumes all 8 (each a run to
/// continue, not a new one) no faster than the bound allows: no second
/// holds more than 3 of their requests. Without the bound, the 8 go within
/// a second of the old locks' expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_resumed_after_a_restart_reach_the_providers_at_the_bound() {
    let mut h = Harness::start().await;
    h.stubs.inventory.faults().hold();
    let first = h.controller("ctl-a").await;
    for obj in storm(&h, "resume", 8) {
        h.create(&obj).await;
    }
    until("8 runs wait for the inventory", PATIENCE, async || {
        h.stubs.inventory.asset_calls() == 8
    })
    .await;
    first.kill().await;
    h.stubs.inventory.faults().release();

    let bound = ScanStartsSection {
        per_second: 2,
        burst: 1,
        ..BOUND
    };
    h.config.scan_starts = bound.clone();
    let restarted = Instant::now();
    let replacement = h.controller("ctl-b").await;
    let done = all_terminal(&h, 8).await;
    let resumed: BTreeSet<String> = done
        .iter()
        .filter_map(|o| status(o).run.clone())
        .filter(|run| run.ends_with("-g1-s0"))
        .collect();
    assert_eq!(resumed.len(), 8, "the first scans, continued");

    assert_requests_within_bound(&h, restarted, 8, &bound);
    replacement.stop().await;
}

/// A high risk whose channel failed, retried while 20 new AssetScans wait
/// in line for a bound of 2 starts per second: once the channel answers, its
/// notification goes out while most of the line still waits. Without the
/// exception for alerts (`needs_a_start`, unit-tested in `apply.rs`) its
/// retry needs a start like any run, and gets one only when it finds one
/// free between the line's: often at once, sometimes at the end of the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_risk_waiting_for_its_channel_does_not_wait_behind_new_scans() {
    let mut h = Harness::start().await;
    h.config.scan_starts = ScanStartsSection {
        per_second: 2,
        burst: 1,
        ..BOUND
    };
    h.stubs.sink.faults().always(Fault::Status(503));
    let ctl = h.controller("ctl-a").await;
    h.create(&h.online(scan("risky").high_risk())).await;
    let deferred = || ctl.counter("assetscan_reconciles_total{result=\"notify_deferred\"}");
    until("the notification deferred", PATIENCE, async || {
        deferred() >= 1.0
    })
    .await;
    // Created labelled, as a pipeline that sets the label would: the line
    // forms at the start bound, not at the labelling before it.
    for mut obj in storm(&h, "line", 20) {
        let bucket = shard::bucket(&obj.spec.asset_id).to_string();
        obj.metadata.labels = Some([(SHARD_LABEL.to_owned(), bucket)].into());
        h.create(&obj).await;
    }
    until("a line of new scans", PATIENCE, async || {
        ctl.counter("assetscan_scan_starts_delayed_total") >= 10.0
    })
    .await;
    // A pass that began before the line formed has ended: the next one
    // comes after the line formed.
    let before = deferred();
    until("the notification deferred again", PATIENCE, async || {
        deferred() > before
    })
    .await;
    h.stubs.sink.faults().clear();
    until("the notification out", PATIENCE, async || {
        h.stubs.sink.effects() == 1
    })
    .await;
    let objects = h.api().list(&ListParams::default()).await.expect("list");
    let line_done = objects
        .items
        .iter()
        .filter(|o| o.name_any().starts_with("line-") && is_terminal(o))
        .count();
    assert!(
        line_done < 10,
        "{line_done} of 20 new scans ended before the high risk went out"
    );
    let done = all_terminal(&h, 21).await;
    assert!(done.iter().any(|o| status(o).high_risk == Some(true)));
    assert_eq!(h.stubs.sink.effects(), 1);
    ctl.stop().await;
}

/// AssetScans with the same rescan interval whose runs ended together are
/// due again at different times, each `rescanInterval` plus its own share
/// of the spread after its run ended; mirroring each run's ticket again
/// gives the status it has, and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_ended_together_are_due_again_apart() {
    let h = Harness::start().await;
    let spread = h.config.scan_starts.rescan_spread;
    let ctl = h.controller("ctl-a").await;
    for n in 0..12 {
        h.create(&h.online(scan(&format!("spread-{n:02}")).rescan_every("1h")))
            .await;
    }
    let done = all_terminal(&h, 12).await;
    ctl.stop().await;

    let hour = 3600;
    let mut due_after = BTreeSet::new();
    for obj in &done {
        let s = status(obj);
        let ended = s
            .last_scan_time
            .as_ref()
            .expect("lastScanTime")
            .0
            .as_second();
        let next = s
            .next_scan_time
            .as_ref()
            .expect("nextScanTime")
            .0
            .as_second();
        let after = rescan_after(obj, spread).expect("rescans").as_secs() as i64;
        assert!(
            next - ended == after || next - ended == after + 1,
            "{}: due {}s after it ended, its share says {after}s",
            obj.name_any(),
            next - ended
        );
        assert!((hour..hour + hour / 10 + 1).contains(&(next - ended)));
        due_after.insert(next - ended);
    }
    assert!(
        due_after.len() >= 6,
        "12 runs due again only {due_after:?} after they ended"
    );

    let recorder = Recorder::new(
        h.client.clone(),
        Reporter {
            controller: "assetscan-operator".into(),
            instance: Some("mirror-again".into()),
        },
    );
    let metrics = Metrics::new();
    for obj in &done {
        let name = obj.name_any();
        let ticket = h.ticket_of(obj).await;
        let writes = h.status_writes(&name).len();
        let mirror =
            StatusMirror::new(h.api(), obj, &recorder, &metrics, rescan_after(obj, spread));
        assert!(mirror.mirror(&ticket).await, "{name}: the status holds");
        assert_eq!(h.status_writes(&name).len(), writes, "{name}: no write");
        check_status_history(&h, &name, obj);
    }
}
