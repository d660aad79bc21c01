//! A Sentinel group (master, replica, three sentinels; real processes on
//! loopback) failing over in the middle of runs driven by the pipeline:
//!
//! - a graceful `SENTINEL FAILOVER` between `HIGH_RISK_FOUND` and the
//!   notification, repeated with a seeded schedule: with the replica
//!   acknowledgement (`redis.replicaAck`, on behind Sentinel) no run
//!   notifies twice; without it the number that do is printed;
//! - the master SIGKILLed while a run is inside a provider call: the run's
//!   next write meets the dead connection, the store asks the sentinels for
//!   the new master and the run finishes there;
//! - one node lost must not stop the alerts: after the master of a master +
//!   replica group is SIGKILLed, the promoted replica has no replica, and
//!   high-risk runs notify without waiting for one (counted), until the
//!   old node is back as a replica and the wait applies again; a Sentinel
//!   in front of a master without replicas notifies too.
//!
//!   cargo test --test redis_failover -- --nocapture

mod kit;

use assetscan_operator::domain::ticket::{Status, ThreatIntelFacts, Ticket, VulnFacts};
use assetscan_operator::domain::{AssetId, Policy, ScanRequest, ThreatIntelPolicy, Triage};
use assetscan_operator::pipeline::{
    ClaimRecord, Effects, Notification, Observer, Outcome, Pipeline, StepError, StepPolicies,
    StoreFailure,
};
use assetscan_operator::probes::observe_store;
use assetscan_operator::store::{
    RedisTarget, ReplicaAck, ReplicaAckMode, ReplicaStats, StoreConfig, TicketStore,
};
use assetscan_operator::telemetry::Metrics;
use assetscan_testkit::redis::SentinelGroup;
use assetscan_testkit::wait::until;
use kit::setup::get;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Failovers per run of the test; `FAILOVER_ROUNDS` overrides.
const ROUNDS: u32 = 20;
/// The schedule's seed unless `FAILOVER_SEED` says otherwise.
const SEED: u64 = 20_240_601;

/// Runs a blocking fixture call (sentinel waits) without stalling the
/// runtime's other worker.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Providers answering at once: online, one CVSS 10.0 finding (or 3.1 for
/// a clean asset), and channels that accept and count every delivery by
/// idempotency key. `hold` keeps the vulnerability query open until
/// released.
#[derive(Clone, Default)]
struct Fx {
    clean: bool,
    deliveries: Arc<Mutex<BTreeMap<String, u32>>>,
    hold: Option<Arc<Hold>>,
}

/// A point where a run waits for the test: `reached` once it got there,
/// then it goes on at `go`.
#[derive(Default)]
struct Hold {
    reached: Notify,
    go: Notify,
}

impl Hold {
    async fn pass(&self) {
        self.reached.notify_one();
        self.go.notified().await;
    }
}

impl Effects for Fx {
    async fn check_online(&self, _req: &ScanRequest) -> Result<bool, StepError> {
        Ok(true)
    }

    async fn query_vulnerabilities(
        &self,
        _req: &ScanRequest,
        _triage: &Triage,
    ) -> Result<VulnFacts, StepError> {
        if let Some(hold) = &self.hold {
            hold.pass().await;
        }
        Ok(VulnFacts {
            total: 1,
            max_cvss: Some(if self.clean { 3.1 } else { 10.0 }),
            ..VulnFacts::default()
        })
    }

    async fn threat_intel(
        &self,
        _req: &ScanRequest,
        _vulns: &VulnFacts,
    ) -> Result<ThreatIntelFacts, StepError> {
        Ok(ThreatIntelFacts::default())
    }

    async fn notify(
        &self,
        channels: &[String],
        notification: &Notification,
    ) -> BTreeMap<String, Result<String, StepError>> {
        *self
            .deliveries
            .lock()
            .unwrap()
            .entry(notification.ticket_id.clone())
            .or_default() += 1;
        channels
            .iter()
            .map(|c| (c.clone(), Ok(format!("{c}:{}", notification.ticket_id))))
            .collect()
    }
}

/// Holds the run right after `HIGH_RISK_FOUND` was written.
struct AtHighRisk(Hold);

impl Observer for AtHighRisk {
    /// No AssetScan to record it in; a run claimed at `HIGH_RISK_FOUND` is
    /// held there too.
    async fn record_claim(&self, ticket: &Ticket) -> ClaimRecord {
        self.on_ticket(ticket).await;
        ClaimRecord::NotKept
    }

    async fn on_ticket(&self, ticket: &Ticket) {
        if ticket.status == Status::HighRiskFound {
            self.0.pass().await;
        }
    }
}

fn request(asset: &str, holder: &str, clean: bool) -> ScanRequest {
    ScanRequest {
        policy: Policy {
            cvss_threshold: 7.0,
            threat_intel: ThreatIntelPolicy::Never,
            epss_threshold: 0.5,
            min_coverage: None,
        },
        channels: if clean {
            Vec::new()
        } else {
            vec!["ops".into()]
        },
        ..kit::requests::request(asset, "r1", holder)
    }
}

/// A pipeline on the group, and its own store connection.
async fn pipeline(
    group: &SentinelGroup,
    mode: ReplicaAckMode,
    fx: Fx,
) -> (Arc<Pipeline<Fx>>, TicketStore) {
    let target = RedisTarget::parse(&group.target_spec()).unwrap();
    let config = StoreConfig {
        replica_ack: ReplicaAck {
            mode,
            ..ReplicaAck::default()
        },
        ..StoreConfig::default()
    };
    let store = TicketStore::connect(&target, config).await.unwrap();
    let pipeline = Pipeline::new(store.clone(), fx, StepPolicies::default());
    (Arc::new(pipeline), store)
}

/// One round, for one pipeline: the run held at `HIGH_RISK_FOUND` is let go
/// once the failover named the new master, while the old one (deaf to the
/// sentinels) still takes writes; its outcome.
type Round = tokio::task::JoinHandle<Result<Outcome, StoreFailure>>;

fn start_round(pipeline: &Arc<Pipeline<Fx>>, req: &ScanRequest, at: &Arc<AtHighRisk>) -> Round {
    let (pipeline, req, at) = (pipeline.clone(), req.clone(), at.clone());
    tokio::spawn(async move { pipeline.run(&req, &*at, &CancellationToken::new()).await })
}

/// Deliveries per ticket that got more than one.
fn doubles(fx: &Fx) -> usize {
    fx.deliveries
        .lock()
        .unwrap()
        .values()
        .filter(|n| **n > 1)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_before_the_notification_never_notifies_twice_with_replica_acks() {
    let seed = env_or("FAILOVER_SEED", SEED);
    let rounds = env_or("FAILOVER_ROUNDS", ROUNDS);
    println!("failover schedule: seed {seed}, {rounds} failovers (FAILOVER_SEED, FAILOVER_ROUNDS)");
    let mut rng = StdRng::seed_from_u64(seed);
    let group = blocking(SentinelGroup::start).expect("sentinel group starts");
    let (acked_fx, plain_fx) = (Fx::default(), Fx::default());
    let (acked, acked_store) = pipeline(&group, ReplicaAckMode::Auto, acked_fx.clone()).await;
    let (plain, _) = pipeline(&group, ReplicaAckMode::Never, plain_fx.clone()).await;
    // In steady state: the store knows the master's replica (in sync).
    let stats = acked_store.replica_stats().unwrap();
    until(
        "the store sees the replica",
        Duration::from_secs(30),
        async || stats.online.load(Ordering::Relaxed) == 1,
    )
    .await;
    let (mut refused, mut on_new_master) = (0, 0);
    for round in 0..rounds {
        let acked_req = request(&format!("acked-{round}"), &format!("a{round}"), false);
        let plain_req = request(&format!("plain-{round}"), &format!("p{round}"), false);
        let (at_a, at_p) = (
            Arc::new(AtHighRisk(Hold::default())),
            Arc::new(AtHighRisk(Hold::default())),
        );
        let runs = [
            start_round(&acked, &acked_req, &at_a),
            start_round(&plain, &plain_req, &at_p),
        ];
        at_a.0.reached.notified().await;
        at_p.0.reached.notified().await;

        // The failover, with the old master cut off from the sentinels: it
        // keeps taking the runs' writes, as a gracefully demoted master does
        // until a sentinel reconfigures it.
        let old = group.master_port().unwrap();
        blocking(|| group.refuse_reconfiguration(old)).unwrap();
        let new = blocking(|| group.failover()).expect("failover");
        assert_ne!(new, old);
        // The schedule: how long after the promotion the runs go on.
        let after = Duration::from_millis(rng.random_range(0..400));
        tokio::time::sleep(after).await;
        at_a.0.go.notify_one();
        at_p.0.go.notify_one();
        let [a, p] = runs;
        match a.await.unwrap() {
            Err(e) if e.reason() == "RedisNotReplicated" => refused += 1,
            // Its connection moved to the new master, which has no replica
            // (the old one is deaf) and which the sentinels name: the
            // notification went ahead there, where it survives.
            Ok(Outcome::Terminal(t)) if t.status == Status::Finished => {
                let key = acked_store.keys(&acked_req.asset).ticket("r1");
                let on_new: Option<Ticket> = get(group.node(new).unwrap(), &key)
                    .and_then(|raw| serde_json::from_str(&raw).ok());
                assert_eq!(
                    on_new.map(|t| t.status),
                    Some(Status::Finished),
                    "round {round}: the acked run went on, but not on the new master"
                );
                on_new_master += 1;
            }
            other => panic!("round {round}: the acked run went on: {other:?}"),
        }
        assert!(
            matches!(p.await.unwrap(), Ok(Outcome::Terminal(_))),
            "round {round}: the plain run finished on the old master"
        );

        // The sentinels reach the old master: it becomes a replica of the
        // new one and drops what only it had. Both runs are run again.
        blocking(|| group.allow_reconfiguration(old)).unwrap();
        blocking(|| group.reconfigure_now(old)).unwrap();
        blocking(|| group.wait_demoted(old)).expect("old master demoted");
        for (pipeline, req) in [(&acked, &acked_req), (&plain, &plain_req)] {
            let outcome = pipeline.run(req, &(), &CancellationToken::new()).await;
            assert!(
                matches!(&outcome, Ok(Outcome::Terminal(t)) if t.status == Status::Finished),
                "round {round}: {outcome:?}"
            );
        }
    }
    let (with_ack, without) = (doubles(&acked_fx), doubles(&plain_fx));
    println!(
        "double notifications over {rounds} failovers: {with_ack} with replica acks, {without} without ({refused} acked runs refused to notify on the old master, {on_new_master} notified on the new one)"
    );
    assert_eq!(with_ack, 0);
    assert_eq!(refused + on_new_master, rounds);
    assert!(without > 0, "the failovers hit the window the wait closes");
}

/// The master dies while the run is inside a provider call; the sentinels
/// promote the replica; the run's next write meets the dead connection,
/// asks the sentinels again and goes on under its token on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_run_is_replaced_and_the_run_finishes_there() {
    let mut group = blocking(SentinelGroup::start).expect("sentinel group starts");
    let hold = Arc::new(Hold::default());
    let fx = Fx {
        clean: true,
        hold: Some(hold.clone()),
        ..Fx::default()
    };
    let (pipeline, store) = pipeline(&group, ReplicaAckMode::Auto, fx).await;
    let req = request("killed-01", "h1", true);
    let run = start_round(&pipeline, &req, &Arc::new(AtHighRisk(Hold::default())));
    hold.reached.notified().await;

    // The replica has the claimed ticket at ASSET_ONLINE: a promotion keeps it.
    let key = store.keys(&req.asset).ticket(&req.run);
    until_the_replica_holds(&group, &key, |raw| {
        serde_json::from_str::<Ticket>(raw).is_ok_and(|t| t.status == Status::AssetOnline)
    })
    .await;
    let new = blocking(|| group.kill_master()).expect("the sentinels fail over");
    hold.go.notify_one();
    let outcome = run.await.unwrap();
    let Ok(Outcome::Terminal(ticket)) = outcome else {
        panic!("the run did not finish: {outcome:?}");
    };
    assert_eq!(ticket.status, Status::Finished);
    let on_new: Ticket =
        serde_json::from_str(&get(group.node(new).unwrap(), &key).unwrap()).unwrap();
    assert_eq!(
        (on_new.status, on_new.fencing_token),
        (Status::Finished, ticket.fencing_token),
        "finished on the new master under its token"
    );
}

/// The replica wait's counters: (replicas online, writes acknowledged,
/// writes that went ahead unreplicated).
fn replica_counts(stats: &ReplicaStats) -> (i64, u64, u64) {
    (
        stats.online.load(Ordering::Relaxed),
        stats.acknowledged_writes.load(Ordering::Relaxed),
        stats.unreplicated_writes.load(Ordering::Relaxed),
    )
}

/// One sample of the operator's metrics as a scrape shows it.
fn scraped(store: &TicketStore, sample: &str) -> String {
    let metrics = Metrics::new();
    observe_store(&metrics, store);
    let text = metrics.encode();
    text.lines()
        .find(|l| l.starts_with(&format!("{sample} ")))
        .unwrap_or_else(|| panic!("no {sample} in {text}"))
        .to_owned()
}

/// Runs a high-risk scan of `asset` to its end; it must finish.
async fn notify_once(pipeline: &Pipeline<Fx>, asset: &str) {
    let req = request(asset, asset, false);
    let outcome = pipeline.run(&req, &(), &CancellationToken::new()).await;
    assert!(
        matches!(&outcome, Ok(Outcome::Terminal(t)) if t.status == Status::Finished),
        "{asset}: {outcome:?}"
    );
}

/// A 1 master + 1 replica group loses its master (SIGKILL): Sentinel
/// promotes the replica, which has no replica of its own. A high-risk run
/// that was inside a provider call at the kill notifies within the failover
/// wait and the notification's timeout, without waiting for a replica there
/// is none of (counted, and shown by the metrics); once the old node is
/// back as a replica, the notification's writes wait for it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_master_is_killed_alerts_go_out_until_a_replica_is_back_to_wait_for() {
    let mut group = blocking(SentinelGroup::start).expect("sentinel group starts");
    let hold = Arc::new(Hold::default());
    let fx = Fx {
        hold: Some(hold.clone()),
        ..Fx::default()
    };
    let (pipeline, store) = pipeline(&group, ReplicaAckMode::Auto, fx.clone()).await;
    let stats = store.replica_stats().expect("the wait reads the replicas");
    until(
        "the store sees the replica",
        Duration::from_secs(30),
        async || stats.online.load(Ordering::Relaxed) == 1,
    )
    .await;
    let req = request("killed-alert", "k1", false);
    let run = {
        let (pipeline, req) = (pipeline.clone(), req.clone());
        tokio::spawn(async move { pipeline.run(&req, &(), &CancellationToken::new()).await })
    };
    hold.reached.notified().await;
    // What the run wrote so far is on the replica, as a promotion needs.
    let key = store.keys(&req.asset).ticket(&req.run);
    let old = group.master_port().unwrap();
    until_the_replica_holds(&group, &key, |_| true).await;

    let killed = Instant::now();
    let new = blocking(|| group.kill_master()).expect("the sentinels fail over");
    hold.go.notify_one();
    let outcome = run.await.unwrap();
    let took = killed.elapsed();
    assert!(
        matches!(&outcome, Ok(Outcome::Terminal(t)) if t.status == Status::Finished),
        "the alert went out: {outcome:?}"
    );
    let bound = store.config().failover_wait + StepPolicies::default().notify.timeout;
    println!("killed master: notified {took:?} after the SIGKILL (bound {bound:?})");
    assert!(took < bound, "notified after {took:?}, over {bound:?}");
    assert_eq!(doubles(&fx), 0);
    let (online, acked, alone) = replica_counts(stats);
    assert_eq!(online, 0, "the new master has no replica");
    assert_eq!(acked, 0);
    assert_eq!(
        alone, 2,
        "the intent and the receipt went ahead unreplicated"
    );
    assert_eq!(
        scraped(&store, "assetscan_redis_replicas_online"),
        "assetscan_redis_replicas_online 0"
    );
    assert_eq!(
        scraped(&store, "assetscan_notification_writes_unreplicated"),
        "assetscan_notification_writes_unreplicated 2"
    );

    // Further runs go on at once (on the same store: its replica wait).
    let fx = Fx { hold: None, ..fx };
    let pipeline = Pipeline::new(store.clone(), fx.clone(), StepPolicies::default());
    notify_once(&pipeline, "alone-2").await;
    assert_eq!(replica_counts(stats), (0, 0, 4));

    // The old node is back, as a replica of the new master.
    blocking(|| group.revive(old)).expect("the old node syncs from the new master");
    until(
        "the store sees the replica",
        Duration::from_secs(30),
        async || stats.online.load(Ordering::Relaxed) == 1,
    )
    .await;
    notify_once(&pipeline, "replicated-again").await;
    assert_eq!(replica_counts(stats), (1, 2, 4), "WAIT acknowledged again");
    let back: Ticket = serde_json::from_str(
        &get(
            group.node(old).unwrap(),
            &store
                .keys(&AssetId::new("replicated-again".to_owned()).unwrap())
                .ticket("r1"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(back.status, Status::Finished, "on the replica too");
    assert_ne!(new, old);
}

/// A Sentinel in front of a master without replicas (discovery only):
/// there is no replica to wait for, and high-risk runs notify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_sentinel_a_master_without_replicas_notifies() {
    let group = blocking(|| SentinelGroup::start_with_replicas(0)).expect("sentinel group starts");
    let fx = Fx::default();
    let (pipeline, store) = pipeline(&group, ReplicaAckMode::Auto, fx.clone()).await;
    notify_once(&pipeline, "lone-01").await;
    assert_eq!(fx.deliveries.lock().unwrap().len(), 1);
    let stats = store.replica_stats().unwrap();
    assert_eq!(replica_counts(stats), (0, 0, 2));
}

/// Waits until the replica of `group`'s master holds `key` with a value
/// `holds` accepts: what a promotion keeps.
async fn until_the_replica_holds(group: &SentinelGroup, key: &str, holds: impl Fn(&str) -> bool) {
    let master = group.master_port().unwrap();
    let replica = group.nodes().iter().find(|n| n.port() != master).unwrap();
    until(
        "the replica has the ticket",
        Duration::from_secs(30),
        async || get(replica, key).is_some_and(|raw| holds(&raw)),
    )
    .await;
}
