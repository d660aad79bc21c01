//! The lock cycle (take, give back) through the ticket store, which fences,
//! claims the ticket and audits, against `rslock` (Redlock on one server: no
//! fencing, no claim, no audit), on the same server, in alternating rounds;
//! then where a cycle's time goes ([`profile`]).

mod profile;

use crate::bed::{Bed, asset};
use crate::stats::{Spread, percentile_us};
use crate::{BenchError, server};
use assetscan_operator::store::TicketStore;
use futures::future::try_join_all;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

/// Cycles/s and latencies of one side in one round.
struct Side {
    rate: f64,
    p50_us: f64,
    p99_us: f64,
}

pub async fn report(bed: &Bed) -> Result<(), BenchError> {
    let store = bed.store().await?;
    let rslock = rslock::LockManager::new(vec![bed.server.url()]);
    println!("# lock cycle (acquire + release) against rslock, {ROUNDS} rounds");
    for (tasks, cycles) in [(1usize, 1500usize), (32, 150)] {
        // Warm-up: connections open, scripts loaded.
        ours(&store, tasks, 10).await?;
        theirs(&rslock, tasks, 10).await?;
        let mut ratios = Vec::new();
        let mut sides = Vec::new();
        for _ in 0..ROUNDS {
            let a = ours(&store, tasks, cycles).await?;
            let b = theirs(&rslock, tasks, cycles).await?;
            ratios.push(a.rate / b.rate);
            sides.push((a, b));
        }
        sides.sort_by(|x, y| (x.0.rate / x.1.rate).total_cmp(&(y.0.rate / y.1.rate)));
        let (a, b) = &sides[sides.len() / 2];
        println!(
            "lock cycle, {tasks} task(s): store {:.0} cycles/s (p50 {:.0} µs, p99 {:.0} µs), rslock {:.0} cycles/s (p50 {:.0} µs, p99 {:.0} µs) [median round]",
            a.rate, a.p50_us, a.p99_us, b.rate, b.p50_us, b.p99_us
        );
        println!(
            "lock cycle ratio to rslock, {tasks} task(s): {}",
            Spread::of(ratios)
        );
    }
    profile::profile(bed, &store, &rslock).await?;
    let commands = server::commands(&bed.server)?;
    let cycle = store
        .acquire(&asset("cost-of-a-cycle")?, "r1", "A", 0)
        .await?;
    store
        .release(&asset("cost-of-a-cycle")?, &cycle.lease)
        .await?;
    println!(
        "lock cycle through the store: {} commands (rslock: 4)",
        server::commands(&bed.server)? - commands
    );
    Ok(())
}

/// Runs `cycles` cycles in each of `tasks` tasks, each on its own asset.
async fn ours(store: &TicketStore, tasks: usize, cycles: usize) -> Result<Side, BenchError> {
    let started = Instant::now();
    let runs = (0..tasks).map(|t| {
        let store = store.clone();
        tokio::spawn(async move {
            let asset = asset(&format!("lock-{t}"))?;
            let holder = format!("bench-{t}");
            let mut latencies = Vec::with_capacity(cycles);
            for _ in 0..cycles {
                let at = Instant::now();
                let got = store.acquire(&asset, "r1", &holder, 0).await?;
                store.release(&asset, &got.lease).await?;
                latencies.push(at.elapsed());
            }
            Ok::<_, BenchError>(latencies)
        })
    });
    side(started, try_join_all(runs).await?)
}

async fn theirs(
    locks: &rslock::LockManager,
    tasks: usize,
    cycles: usize,
) -> Result<Side, BenchError> {
    let started = Instant::now();
    let runs = (0..tasks).map(|t| {
        let locks = locks.clone();
        tokio::spawn(async move {
            let resource = format!("rslock-{t}").into_bytes();
            let mut latencies = Vec::with_capacity(cycles);
            for _ in 0..cycles {
                let at = Instant::now();
                let lock = locks
                    .lock(&resource, Duration::from_secs(30))
                    .await
                    .map_err(|e| BenchError::Rslock(e.to_string()))?;
                locks.unlock(&lock).await;
                latencies.push(at.elapsed());
            }
            Ok::<_, BenchError>(latencies)
        })
    });
    side(started, try_join_all(runs).await?)
}

fn side(
    started: Instant,
    per_task: Vec<Result<Vec<Duration>, BenchError>>,
) -> Result<Side, BenchError> {
    let elapsed = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for latencies in per_task {
        all.extend(latencies?);
    }
    Ok(Side {
        rate: all.len() as f64 / elapsed,
        p50_us: percentile_us(&mut all, 50.0),
        p99_us: percentile_us(&mut all, 99.0),
    })
}
