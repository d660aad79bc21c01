//! `make bench`: what one scan costs in Redis, measured side by side on one
//! redis-server the bench starts itself. Every figure is a ratio or a count
//! taken in the same run as what it is compared with, over several rounds
//! (min / median / max), because the machine it runs on is shared and
//! absolute times alone say little. The last line is the pipeline's
//! throughput divided by the Redis bound.

mod bed;
mod effects;
mod lock;
mod paths;
mod server;
mod size;
mod stats;
mod throughput;
mod watchdog;

use std::process::ExitCode;

/// Why the bench could not measure.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("redis fixture: {0}")]
    Fixture(#[from] assetscan_testkit::redis::FixtureError),
    #[error("store: {0}")]
    Store(#[from] assetscan_operator::store::StoreError),
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
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bench failed: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), BenchError> {
    let bed = bed::Bed::start()?;
    println!(
        "redis-server {} on 127.0.0.1:{}",
        bed.version()?,
        bed.port()
    );
    paths::report(&bed).await?;
    lock::report(&bed).await?;
    size::report(&bed).await?;
    watchdog::report(&bed).await?;
    let ratio = throughput::report(&bed).await?;
    println!("ratio to the Redis bound: {ratio:.2}");
    Ok(())
}
