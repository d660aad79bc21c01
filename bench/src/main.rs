//! `make bench`: what one scan costs in Redis, measured side by side on one
//! redis-server the bench starts itself. Every figure is a ratio or a count
//! taken in the same run as what it is compared with, over several rounds
//! (min / median / max), because the machine it runs on is shared and
//! absolute times alone say little. The last line is the pipeline's
//! throughput divided by the Redis bound.

mod bed;
mod cpu;
mod effects;
mod lock;
mod paths;
mod replica;
mod server;
mod size;
mod stats;
mod throughput;
mod watchdog;

use clap::{Parser, ValueEnum};
use std::process::ExitCode;

/// The bench's sections, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Section {
    Paths,
    Lock,
    Size,
    Watchdog,
    Replica,
    Throughput,
}

/// What one scan costs in Redis (see docs/benchmarks.md).
#[derive(Parser)]
struct Args {
    /// Run only these sections (all, in order, when none is named); the
    /// last line, the ratio to the Redis bound, comes with `throughput`.
    #[arg(value_enum)]
    sections: Vec<Section>,
    /// One short round of the throughput section: shows that it still
    /// measures (`make test` runs it), not what it measures.
    #[arg(long)]
    quick: bool,
}

/// Why the bench could not measure.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("redis fixture: {0}")]
    Fixture(#[from] assetscan_testkit::redis::FixtureError),
    #[error("store: {0}")]
    Store(#[from] assetscan_operator::store::StoreError),
    #[error("run: {0}")]
    Run(#[from] assetscan_operator::ports::StoreFailure),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("rslock: {0}")]
    Rslock(String),
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: &'static str,
        source: std::io::Error,
    },
    #[error("cannot parse {what}: {text:.200}")]
    Parse { what: &'static str, text: String },
    #[error("unexpected outcome: {0:.200}")]
    Outcome(String),
    #[error("a bench task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let scale = if args.quick {
        throughput::Scale::QUICK
    } else {
        throughput::Scale::FULL
    };
    match run(&args.sections, scale).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench failed: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(only: &[Section], scale: throughput::Scale) -> Result<(), BenchError> {
    let runs = |section| only.is_empty() || only.contains(&section);
    let bed = bed::Bed::start()?;
    println!(
        "redis-server {} on 127.0.0.1:{}",
        bed.version()?,
        bed.port()
    );
    if runs(Section::Paths) {
        paths::report(&bed).await?;
    }
    if runs(Section::Lock) {
        lock::report(&bed).await?;
    }
    if runs(Section::Size) {
        size::report(&bed).await?;
    }
    if runs(Section::Watchdog) {
        watchdog::report(&bed).await?;
    }
    if runs(Section::Replica) {
        replica::report(&bed).await?;
    }
    if runs(Section::Throughput) {
        let ratio = throughput::report(&bed, scale).await?;
        println!("ratio to the Redis bound: {ratio:.2}");
    }
    Ok(())
}
