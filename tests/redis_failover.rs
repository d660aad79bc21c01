//! A Sentinel group (master, replica, three sentinels; real processes on
//! loopback) failing over in the middle of runs driven by the pipeline:
//!
//! - a graceful `SENTINEL FAILOVER` between `HIGH_RISK_FOUND` and the
//!   notification, repeated with a seeded schedule: with the replica
//!   acknowledgement (`redis.replicaAck`, on behind Sentinel) no run
//!   notifies twice; without it the number that do is printed;
//! - the master SIGKILLed while a run is inside a provider call: the run's
//!   next write meets the dead connection, the store asks the sentinels for
//!   the new master and the run finishes there.
//!
//!   cargo test --test redis_failover -- --nocapture

mod kit;

use assetscan_operator::domain::ticket::{Status, ThreatIntelFacts, Ticket, VulnFacts};
use assetscan_operator::domain::{AssetId, Policy, ScanRequest, Target, ThreatIntelPolicy};
use assetscan_operator::pipeline::{
    Effects, Notification, Observer, Outcome, Pipeline, StepError, StepPolicies,
};
use assetscan_operator::store::{
    RedisTarget, ReplicaAck, ReplicaAckMode, StoreConfig, StoreError, TicketStore,
};
use assetscan_testkit::redis::SentinelGroup;
use assetscan_testkit::wait::until;
use kit::setup::get;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
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

    async fn query_vulnerabilities(&self, _req: &ScanRequest) -> Result<VulnFacts, StepError> {
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
    async fn on_ticket(&self, ticket: &Ticket) {
        if ticket.status == Status::HighRiskFound {
            self.0.pass().await;
        }
    }
}

fn request(asset: &str, holder: &str, clean: bool) -> ScanRequest {
    ScanRequest {
        asset: AssetId::new(asset.to_owned()).unwrap(),
        run: "r1".into(),
        target: Target::Inventory { id: asset.into() },
        software: Vec::new(),
        sbom: None,
        policy: Policy {
            cvss_threshold: 7.0,
            threat_intel: ThreatIntelPolicy::Never,
            epss_threshold: 0.5,
        },
        channels: if clean {
            Vec::new()
        } else {
            vec!["ops".into()]
        },
        token_floor: 0,
        holder: holder.into(),
        owner: None,
        supersedes: None,
        expect_open: false,
    }
}

async fn pipeline(group: &SentinelGroup, mode: ReplicaAckMode, fx: Fx) -> Arc<Pipeline<Fx>> {
    let target = RedisTarget::parse(&group.target_spec()).unwrap();
    let config = StoreConfig {
        replica_ack: ReplicaAck {
            mode,
            ..ReplicaAck::default()
        },
        ..StoreConfig::default()
    };
    let store = TicketStore::connect(&target, config).await.unwrap();
    Arc::new(Pipeline::new(store, fx, StepPolicies::default()))
}

/// One round, for one pipeline: the run held at `HIGH_RISK_FOUND` is let go
/// once the failover named the new master, while the old one (deaf to the
/// sentinels) still takes writes; its outcome.
type Round = tokio::task::JoinHandle<Result<Outcome, StoreError>>;

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
    let acked = pipeline(&group, ReplicaAckMode::Auto, acked_fx.clone()).await;
    let plain = pipeline(&group, ReplicaAckMode::Never, plain_fx.clone()).await;
    let mut refused = 0;
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
            Err(StoreError::NotReplicated { .. }) => refused += 1,
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
        "double notifications over {rounds} failovers: {with_ack} with replica acks, {without} without ({refused} acked runs refused to notify before the failover)"
    );
    assert_eq!(with_ack, 0);
    assert_eq!(refused, rounds);
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
    let pipeline = pipeline(&group, ReplicaAckMode::Auto, fx).await;
    let req = request("killed-01", "h1", true);
    let run = start_round(&pipeline, &req, &Arc::new(AtHighRisk(Hold::default())));
    hold.reached.notified().await;

    // The replica has the claimed ticket at ASSET_ONLINE: a promotion keeps it.
    let key = pipeline.store().keys(&req.asset).ticket(&req.run);
    let master = group.master_port().unwrap();
    let replica = group.nodes().iter().find(|n| n.port() != master).unwrap();
    until(
        "the replica has the ticket",
        Duration::from_secs(30),
        async || {
            get(replica, &key)
                .and_then(|raw| serde_json::from_str::<Ticket>(&raw).ok())
                .is_some_and(|t| t.status == Status::AssetOnline)
        },
    )
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
