//! Throughput of the real pipeline (zero-latency providers) against the
//! Redis bound: `redis-benchmark` calling `advance.lua` by EVALSHA on the
//! same server, divided by the scripts one scan runs. Both are measured in
//! each round, one right after the other.

use crate::bed::{Bed, asset, request};
use crate::effects::Path;
use crate::stats::Spread;
use crate::{BenchError, server};
use assetscan_operator::domain::ticket::now_ms;
use assetscan_operator::pipeline::Outcome;
use futures::future::try_join_all;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// How much a throughput report measures.
#[derive(Clone, Copy)]
pub struct Scale {
    rounds: usize,
    /// Concurrent runs.
    tasks: usize,
    /// Runs per task per round.
    runs_per_task: usize,
    /// `redis-benchmark` requests per round.
    bench_requests: usize,
}

impl Scale {
    /// `make bench`: 32 concurrent runs (enough to keep Redis busy from one
    /// client process), 32 × 160 = 5 120 runs a round, three rounds.
    pub const FULL: Scale = Scale {
        rounds: 3,
        tasks: 32,
        runs_per_task: 160,
        bench_requests: 60_000,
    };
    /// `--quick`, which `make test` runs: one short round, which shows that
    /// every step of the measurement still works, not what it measures.
    pub const QUICK: Scale = Scale {
        rounds: 1,
        tasks: 4,
        runs_per_task: 10,
        bench_requests: 2_000,
    };
}

/// `redis-benchmark` connections.
const BENCH_CLIENTS: usize = 32;

/// Returns the median ratio of the rounds.
pub async fn report(bed: &Bed, scale: Scale) -> Result<f64, BenchError> {
    let args = advance_call(bed).await?;
    println!(
        "# throughput, high-risk path, {} tasks, {} runs a round, {} rounds",
        scale.tasks,
        scale.tasks * scale.runs_per_task,
        scale.rounds
    );
    let mut ratios = Vec::new();
    let mut rates = Vec::new();
    let mut bounds = Vec::new();
    for round in 0..scale.rounds {
        let advance_rate =
            server::redis_benchmark(&bed.server, BENCH_CLIENTS, scale.bench_requests, &args)?;
        let (runs_per_s, scripts) = pipeline_rate(bed, round, scale).await?;
        let bound = advance_rate / scripts;
        println!(
            "round {round}: {runs_per_s:.0} runs/s; advance.lua {advance_rate:.0} calls/s / {scripts:.2} scripts per scan = bound {bound:.0} runs/s"
        );
        ratios.push(runs_per_s / bound);
        rates.push(runs_per_s);
        bounds.push(bound);
    }
    println!("pipeline runs/s: {}", Spread::of(rates));
    println!("Redis bound runs/s: {}", Spread::of(bounds));
    let ratios = Spread::of(ratios);
    println!("throughput ratio to the Redis bound: {ratios}");
    Ok(ratios.median())
}

/// `redis-benchmark` arguments for one `advance.lua` call (`X → X` at
/// `INIT` with an empty patch) on a ticket claimed for it.
async fn advance_call(bed: &Bed) -> Result<Vec<String>, BenchError> {
    let store = bed.store().await?;
    let a = asset("bound")?;
    let got = store.acquire(&a, "r1", "bound", 0).await?;
    drop(got.lease);
    let keys = store.keys(&a);
    let script = redis::Script::new(include_str!("../../lua/advance.lua"));
    let mut conn = redis::Client::open(bed.server.url())?
        .get_multiplexed_async_connection()
        .await?;
    let sha = script.load_async(&mut conn).await?;
    Ok([
        "EVALSHA".to_owned(),
        sha,
        "3".to_owned(),
        keys.ticket("r1"),
        keys.audit(),
        keys.facts("r1"),
        serde_json::json!({
            "v": 1, "token": got.token, "to": "INIT", "now": now_ms(), "patch": {},
            "keep_terminal_ms": 604_800_000, "audit_cap": 1000,
            "keep_open_ms": 86_400_000, "return_facts": false,
        })
        .to_string(),
    ]
    .into())
}

/// Runs/s of the pipeline, and EVALSHA calls per scan, in one round.
async fn pipeline_rate(bed: &Bed, round: usize, scale: Scale) -> Result<(f64, f64), BenchError> {
    let pipeline = Arc::new(bed.pipeline().await?);
    let scripts = server::calls(&bed.server, "evalsha")?;
    let started = Instant::now();
    let runs_per_task = scale.runs_per_task;
    let tasks = (0..scale.tasks).map(|t| {
        let pipeline = Arc::clone(&pipeline);
        tokio::spawn(async move {
            let shutdown = CancellationToken::new();
            for i in 0..runs_per_task {
                let req = request(
                    &format!("tp-{round}-{t}"),
                    &format!("r{i}"),
                    Path::HighRisk,
                    "A",
                )?;
                match pipeline.run(&req, &(), &shutdown).await? {
                    Outcome::Terminal(_) => {}
                    other => return Err(BenchError::Outcome(format!("{other:?}"))),
                }
            }
            Ok(())
        })
    });
    for done in try_join_all(tasks).await? {
        done?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let runs = (scale.tasks * runs_per_task) as f64;
    let scripts = (server::calls(&bed.server, "evalsha")? - scripts) as f64 / runs;
    Ok((runs / elapsed, scripts))
}
