//! What waiting for a replica costs (`redis.replicaAck`): high-risk runs
//! against a master with one replica on loopback, with the notification's
//! writes (`NOTIFYING`, `NOTIFIED`) sent with `WAIT 1` and without, side by
//! side in each round. The wait rides in the same request as the write, so
//! it adds the replica's acknowledgement, not a round trip.

use crate::BenchError;
use crate::bed::{Bed, request};
use crate::effects::{InstantEffects, Path};
use crate::stats::Spread;
use assetscan_operator::pipeline::{Outcome, Pipeline, StepPolicies};
use assetscan_operator::store::{
    RedisTarget, ReplicaAck, ReplicaAckMode, StoreConfig, TicketStore,
};
use assetscan_testkit::redis::RedisServer;
use futures::future::try_join_all;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const ROUNDS: usize = 5;
/// Runs at once, as a replica's reconciles run them.
const TASKS: usize = 8;
/// How long each rate is measured in each round.
const WINDOW: Duration = Duration::from_millis(1500);

pub async fn report(bed: &Bed) -> Result<(), BenchError> {
    let replica = RedisServer::start()?;
    replica.command(&["REPLICAOF", "127.0.0.1", &bed.port().to_string()])?;
    let synced = Instant::now();
    while !replica
        .command(&["INFO", "replication"])?
        .contains("master_link_status:up")
    {
        if synced.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Outcome("the replica did not sync".into()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (acked, acked_store) = pipeline(bed, ReplicaAckMode::Always).await?;
    let (plain, _) = pipeline(bed, ReplicaAckMode::Never).await?;
    // The wait is for the replicas the master has: measure once the store
    // knows the replica is there, and check that every write waited for it.
    let online = || {
        acked_store
            .replica_stats()
            .map_or(-1, |s| s.online.load(Ordering::Relaxed))
    };
    while online() != 1 {
        if synced.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Outcome(
                "the store did not see the replica".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "# replica acknowledgement, high-risk path, {TASKS} tasks, {ROUNDS} rounds (one replica)"
    );
    let (mut with, mut without, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let w = rate(&acked, &format!("ack-{round}")).await?;
        let wo = rate(&plain, &format!("plain-{round}")).await?;
        with.push(w);
        without.push(wo);
        ratios.push(w / wo);
    }
    let unreplicated = acked_store
        .replica_stats()
        .map_or(0, |s| s.unreplicated_writes.load(Ordering::Relaxed));
    if unreplicated > 0 {
        return Err(BenchError::Outcome(format!(
            "{unreplicated} writes went ahead without waiting for the replica"
        )));
    }
    println!("runs/s with WAIT: {}", Spread::of(with));
    println!("runs/s without: {}", Spread::of(without));
    println!(
        "replica acknowledgement: {} of the rate without it (min / median / max)",
        Spread::of(ratios)
    );
    Ok(())
}

/// A pipeline whose store waits for the replicas as `mode` says, and its
/// store connection (whose replica counts are read).
async fn pipeline(
    bed: &Bed,
    mode: ReplicaAckMode,
) -> Result<(Pipeline<InstantEffects>, TicketStore), BenchError> {
    let config = StoreConfig {
        lock_ttl: Duration::from_secs(30),
        replica_ack: ReplicaAck {
            mode,
            ..ReplicaAck::default()
        },
        ..StoreConfig::default()
    };
    let target = RedisTarget::Standalone(bed.server.url());
    let store = TicketStore::connect(&target, config).await?;
    let pipeline = Pipeline::new(store.clone(), InstantEffects, StepPolicies::default());
    Ok((pipeline, store))
}

/// High-risk runs per second over the window, `TASKS` at once.
async fn rate(pipeline: &Pipeline<InstantEffects>, tag: &str) -> Result<f64, BenchError> {
    let started = Instant::now();
    let counts = try_join_all((0..TASKS).map(|task| async move {
        let mut runs = 0u32;
        while started.elapsed() < WINDOW {
            let asset = format!("{tag}-{task}-{runs}");
            let req = request(&asset, "r1", Path::HighRisk, &asset)?;
            match pipeline.run(&req, &(), &CancellationToken::new()).await? {
                Outcome::Terminal(_) => runs += 1,
                other => return Err(BenchError::Outcome(format!("{other:?}"))),
            }
        }
        Ok::<u32, BenchError>(runs)
    }))
    .await?;
    Ok(f64::from(counts.iter().sum::<u32>()) / started.elapsed().as_secs_f64())
}
