//! The fenced mirror: a status going backwards refused, a claim over a changed object not recorded, a takeover mid-notification, an outdated copy, a finalizer race.

use super::*;

/// `done` as an executor read it when its run began: with the status of
/// the claim.
fn as_at_the_claim(h: &Harness, done: &AssetScan) -> AssetScan {
    let claim = h.status_writes(&done.name_any())[0].clone();
    let mut view = done.clone();
    view.status = Some(serde_json::from_value(claim).unwrap());
    assert_eq!(phase(&view), Some(Status::Init));
    view
}

/// The AssetScan `name` (asset `<name>.dc1.example.com`, high risk) after
/// one replica ran it to its end and stopped.
async fn finished_by_one_replica(name: &str) -> (Harness, AssetScan) {
    let h = Harness::start().await;
    let (a, done) = h.run_to_end("replica-a", scan(name).high_risk()).await;
    a.stop().await;
    (h, done)
}

/// PATCH requests on `/status` seen by the emulator since `mark` (counted
/// with a zero-delay fault rule that matches every one of them).
fn count_status_patches(h: &Harness) -> impl Fn() -> usize + '_ {
    h.emu
        .faults()
        .delay("PATCH", "/status", 1_000_000, Duration::ZERO);
    let before = h.emu.faults().fired().len();
    move || {
        h.emu
            .faults()
            .fired()
            .iter()
            .skip(before)
            .filter(|f| f.method == "PATCH" && f.path.contains("/status"))
            .count()
    }
}

/// A status write that lowers (fencingToken, revision) is refused by the
/// CRD's own rule (422, as the API server would), the StatusMirror counts it
/// as a stale write, reports it once, and does not send it again; a
/// controller that finds a newer status stored sends nothing at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_going_backwards_is_refused_by_the_crd_and_not_retried() {
    let (h, done) = finished_by_one_replica("fence-01").await;
    let stored = status(&done);
    let (token, revision) = (stored.fencing_token.unwrap(), stored.revision.unwrap());
    assert!(revision >= 3);

    // The API server's verdict on raw writes.
    let api = h.api();
    for (t, r) in [(token, revision - 1), (token - 1, revision + 10)] {
        let lower = json!({"fencingToken": t, "revision": r, "phase": "ASSET_OFFLINE"});
        let err = h
            .try_merge_status("fence-01", lower)
            .await
            .expect_err("a lower (token, revision) is refused");
        match err {
            kube::Error::Api(e) => {
                assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
                // Known as the fence by its structured cause, as the
                // operator's status writer knows it.
                assert!(
                    assetscan_operator::kubernetes::crd::is_fence_refusal(&e),
                    "{e:?}"
                );
            }
            other => panic!("expected 422, got {other}"),
        }
    }
    // Equal is accepted (a stall condition, a rescan time under the same
    // ticket revision).
    h.try_merge_status(
        "fence-01",
        json!({"fencingToken": token, "revision": revision}),
    )
    .await
    .expect("same (token, revision) is accepted");

    // A zombie's mirror: it read the object when the run began (the claim's
    // status) and now mirrors its stale ticket: ASSET_OFFLINE, revision 2.
    let patches = count_status_patches(&h);
    let zombie_view = as_at_the_claim(&h, &done);
    let mut stale: Ticket = h.ticket_of(&done).await;
    stale.status = Status::AssetOffline;
    stale.revision = 2;
    stale.facts = Default::default();
    stale.completed_steps = vec![assetscan_operator::domain::ticket::Step::OnlineCheck];
    let zombie = Executor::new(&h, "zombie");
    let mirror = zombie.mirror(&zombie_view);
    mirror.on_ticket(&stale).await;
    assert_eq!(patches(), 1, "one attempt, refused");
    assert_eq!(zombie.stale_writes(), 1.0);
    // Again, and once more through the Terminal path's re-mirror: nothing is
    // sent, nothing counted twice.
    mirror.on_ticket(&stale).await;
    mirror.on_ticket(&stale).await;
    assert_eq!(patches(), 1, "no retry of a refused status");
    assert_eq!(zombie.stale_writes(), 1.0);
    let now = api.get("fence-01").await.unwrap();
    assert_eq!(now.status, done.status, "the newer status stands");
    let warnings: Vec<_> = events_of(&h, "fence-01")
        .await
        .into_iter()
        .filter(|(_, r, _)| r == "StaleStatusRejected")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");

    // A controller that finds a newer executor's claim in the status (token
    // + 5) while its ticket is older: it does not even try to write.
    h.merge_status(
        "fence-01",
        json!({"fencingToken": token + 5, "revision": 1, "phase": "INIT"}),
    )
    .await;
    let patches = count_status_patches(&h);
    let b = h.controller("replica-b").await;
    let finished = || b.counter("assetscan_reconciles_total{result=\"finished\"}");
    until("replica-b's first reconcile ended", PATIENCE, async || {
        finished() >= 1.0
    })
    .await;
    assert_eq!(b.counter("assetscan_stale_writes_rejected_total"), 1.0);
    // A second reconcile, and nothing else: with no status write sent there
    // is no watch event of its own to loop on. Each reconcile refuses its
    // stale status locally, once.
    h.poke("fence-01").await;
    until("replica-b's second reconcile ended", PATIENCE, async || {
        finished() >= 2.0
    })
    .await;
    assert_eq!(patches(), 0, "no status write was even sent");
    assert_eq!(b.reconciles(), 2.0, "no reconcile loop");
    assert_eq!(b.counter("assetscan_stale_writes_rejected_total"), 2.0);
    let now = api.get("fence-01").await.unwrap();
    assert_eq!(now.status.unwrap().fencing_token, Some(token + 5));
    b.stop().await;
}

/// A claim is recorded only over the object as read before the acquire.
/// After Redis lost its data, an executor that read the object while the run
/// was in progress (status: its claim, token t) draws token t + 1 for the
/// same run. Retried over a refreshed status, that claim would be accepted
/// (t + 1 is above everything stored) and turn the recorded `FINISHED` back
/// into `INIT`, or hand the token to a second executor: it is refused
/// instead, and the run stops before any provider call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_over_a_status_changed_since_the_read_is_not_recorded() {
    let (h, done) = finished_by_one_replica("reclaim-01").await;
    assert_eq!(phase(&done), Some(Status::Finished));
    let token = status(&done).fencing_token.unwrap();

    // The late executor's view: the object as it was at the claim.
    let mut late_view = as_at_the_claim(&h, &done);
    late_view.metadata.resource_version = Some("1".into());
    // Its claim after the data loss: the same run, floor t, token t + 1.
    let mut reclaimed: Ticket = h.ticket_of(&done).await;
    reclaimed.status = Status::Init;
    reclaimed.fencing_token = token as u64 + 1;
    reclaimed.revision = 1;
    reclaimed.facts = Default::default();
    reclaimed.completed_steps = vec![];

    let late = Executor::new(&h, "late");
    let patches = count_status_patches(&h);
    assert!(
        late.mirror(&late_view).record_claim(&reclaimed).await == ClaimRecord::Refused,
        "a claim over a changed object is not recorded"
    );
    assert_eq!(patches(), 1, "one conditional attempt, not retried");
    // An executor that read the recorded end claims nothing: not even sent.
    assert_eq!(
        late.mirror(&done).record_claim(&reclaimed).await,
        ClaimRecord::Refused
    );
    assert_eq!(patches(), 1, "the claim of an ended run is not sent");
    let now = h.api().get("reclaim-01").await.unwrap();
    assert_eq!(now.status, done.status, "the recorded end stands");
}

/// A replica dies while it sends a notification (its lock is neither
/// released nor renewed): the other replica finds the asset locked, and
/// takes the run over once the lock expired, with a larger token, re-sends under the same idempotency
/// key (one effect), and the status never goes backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_dying_mid_notification_is_taken_over() {
    let h = Harness::start().await;
    // replica-a's notification is held in flight.
    let (a, notifying) = (h.high_risk_held("replica-a", "takeover-01", Held::Notification)).await;
    let before = status(&notifying).clone();
    let id = asset_id(&notifying.spec.asset_id);
    let lock = h.keys(id.as_str()).lock();
    let a_holder = get(&h.redis, &lock).expect("replica-a holds the lock");
    a.kill().await;
    h.stubs.sink.faults().release();
    // The dead replica's lock outlives replica-b's first look (as with a
    // longer ttl), so that replica-b surely meets it; its expiry is then
    // forced rather than waited for.
    hold_lock(&h.redis, &lock, &a_holder);

    let b = h.controller("replica-b").await;
    until("replica-b found the asset locked", PATIENCE, async || {
        b.counter("assetscan_lock_contention_total") >= 1.0
    })
    .await;
    expire_lock(&h.redis, &lock);
    // replica-b's retry was planned at the lock's remaining ttl: a watch
    // event makes it look again now.
    h.poke("takeover-01").await;
    let done = h.wait_terminal("takeover-01", PATIENCE).await;
    assert_finished_and_notified_after(&done, &before);
    assert_eq!(h.stubs.sink.effects(), 1, "one effect");
    assert!(
        h.stubs
            .sink
            .deliveries()
            .iter()
            .all(|d| d.header("idempotency-key") == before.ticket_id.as_deref()),
        "every delivery under the run's key"
    );
    // replica-b claimed the run where replica-a left it.
    let claims: Vec<(String, String)> = h
        .store()
        .await
        .audit(&id, 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.op() == "acquire" && e.accepted())
        .map(|e| {
            (
                e.get("holder")
                    .unwrap()
                    .split(['#', ':'])
                    .next()
                    .unwrap()
                    .to_owned(),
                e.get("status").unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        claims.last(),
        Some(&("replica-b".to_owned(), "NOTIFYING".to_owned())),
        "{claims:?}"
    );
    check_status_history(&h, "takeover-01", &done);
    b.stop().await;
}

/// An executor working from an outdated copy of the object (a lagging watch,
/// a stall) mirrors its ticket again. Its patch must not mix into the newer
/// status stored meanwhile: it is computed against a resourceVersion that is
/// no longer current, and it carries its own token, so it is refused rather
/// than merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_working_from_an_outdated_copy_cannot_mix_into_a_newer_status() {
    let (h, done) = finished_by_one_replica("mix-01").await;
    let token = status(&done).fencing_token.unwrap();

    // A newer executor's run is stored now.
    h.merge_status(
        "mix-01",
        json!({"fencingToken": token + 1, "revision": 1, "run": "newer-run", "phase": "ASSET_ONLINE"}),
    )
    .await;

    // The zombie still holds `done` and mirrors its ticket one revision on.
    let mut ticket = h.ticket_of(&done).await;
    ticket.revision += 1;
    let zombie = Executor::new(&h, "zombie");
    zombie.mirror(&done).on_ticket(&ticket).await;

    let now = h.api().get_status("mix-01").await.unwrap().status.unwrap();
    assert_eq!(
        (
            now.fencing_token,
            now.revision,
            now.run.as_deref(),
            now.phase
        ),
        (
            Some(token + 1),
            Some(1),
            Some("newer-run"),
            Some(Status::AssetOnline)
        ),
        "the newer status is untouched"
    );
    assert_eq!(zombie.stale_writes(), 1.0);
}

/// Two replicas add the finalizer to a new object at once: the first patch
/// to arrive is held back until the other one landed, so its JSON patch's
/// `test` fails (422). That is a race another replica won, not a failure:
/// counted apart, no reconcile failure, and the scan finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_race_another_replica_won_is_no_failure() {
    let mut h = Harness::start().await;
    // No membership: both replicas reconcile the new object (with one, the
    // replica it does not prefer leaves it alone: tests/shares.rs).
    h.config.scan_starts.membership_ttl = Duration::ZERO;
    let race = h.online(scan("race-01"));
    let faults = h.emu.faults();
    faults.delay(
        "PATCH",
        "/assetscans/race-01?",
        1,
        Duration::from_millis(1500),
    );
    let a = h.controller("replica-a").await;
    let b = h.controller("replica-b").await;
    h.create(&race).await;
    let races = || {
        a.counter("assetscan_finalizer_races_total") + b.counter("assetscan_finalizer_races_total")
    };
    until(
        "one replica lost the finalizer race",
        PATIENCE,
        async || races() >= 1.0,
    )
    .await;
    let done = h.wait_terminal("race-01", PATIENCE).await;
    assert_eq!(done.status.unwrap().phase, Some(Status::Finished));
    assert_eq!(done.metadata.finalizers.unwrap().len(), 1);
    for replica in [&a, &b] {
        assert_eq!(
            replica.counter("assetscan_reconcile_failures_total{reason=\"Finalizer\"}"),
            0.0,
            "a race is not a failure"
        );
    }
    a.stop().await;
    b.stop().await;
}

/// An executor outside any controller (a zombie, a late one), with its
/// own metrics and Event recorder.
struct Executor {
    api: Api<AssetScan>,
    recorder: Recorder,
    metrics: Metrics,
}

impl Executor {
    fn new(h: &Harness, instance: &str) -> Executor {
        let reporter = Reporter {
            controller: "assetscan-operator".into(),
            instance: Some(instance.into()),
        };
        Executor {
            api: h.api(),
            recorder: Recorder::new(h.client.clone(), reporter),
            metrics: Metrics::new(),
        }
    }

    /// Its status mirror over `view`, the object as it read it.
    fn mirror<'a>(&'a self, view: &'a AssetScan) -> StatusMirror<'a> {
        StatusMirror::new(self.api.clone(), view, &self.recorder, &self.metrics, None)
    }

    fn stale_writes(&self) -> f64 {
        metric(
            &self.metrics.encode(),
            "assetscan_stale_writes_rejected_total",
        )
    }
}
