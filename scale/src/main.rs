//! `make scale`: the real operator binary, two replicas sharded by asset,
//! against the test kit's Kubernetes API emulator (its own process, so its
//! CPU is measurable), a real redis-server and zero-latency provider stubs,
//! with thousands of AssetScans. Prints, per object count: time to all
//! finished, scans/s, peak RSS and CPU per process, API requests per scan by
//! verb and resource, Redis commands per scan, and the peak provider
//! requests per second against the replicas' start bound; then restarts
//! both replicas and stays idle, printing every API write and Redis command
//! in that time.

mod procstat;
mod proxy;
mod report;
mod stack;

use anyhow::{Result, bail};
use assetscan_operator::config::ScanStartsSection;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(name = "assetscan-scale")]
struct Args {
    /// Object counts to run, one fresh stack each.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    counts: Vec<usize>,
    /// Seconds of idleness measured after the restart.
    #[arg(long, default_value_t = 60)]
    idle_seconds: u64,
    /// Reconciles in flight per replica (`run --concurrency`).
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// Give up on a count after this many seconds without all finished.
    #[arg(long, default_value_t = 900)]
    timeout_seconds: u64,
    /// Runs started per second per replica (`scanStarts.perSecond`;
    /// default: the operator's).
    #[arg(long, default_value_t = ScanStartsSection::default().per_second)]
    starts_per_second: u32,
    /// Runs started at once per replica (`scanStarts.burst`; default: the
    /// operator's).
    #[arg(long, default_value_t = ScanStartsSection::default().burst)]
    starts_burst: u32,
    /// The operator binary to measure (default: the one built next to this
    /// driver), e.g. an older build for a before/after comparison.
    #[arg(long)]
    operator: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scale run FAILED: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<()> {
    assetscan_operator::providers::install_crypto_provider();
    let operator = match &args.operator {
        Some(path) => path.clone(),
        None => stack::sibling_binary("assetscan-operator")?,
    };
    let mut failed = Vec::new();
    for &count in &args.counts {
        println!("\n== {count} AssetScans, 2 replicas ==");
        let settings = stack::Settings {
            count,
            operator: operator.clone(),
            concurrency: args.concurrency,
            timeout: Duration::from_secs(args.timeout_seconds),
            idle: Duration::from_secs(args.idle_seconds),
            starts: ScanStartsSection {
                per_second: args.starts_per_second,
                burst: args.starts_burst,
                ..ScanStartsSection::default()
            },
        };
        let report = stack::measure(&settings).await?;
        report.print();
        failed.extend(
            report
                .violations()
                .into_iter()
                .map(|v| format!("{count}: {v}")),
        );
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}
