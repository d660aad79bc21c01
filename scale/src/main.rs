//! `make scale`: the real operator binary against the test kit's Kubernetes
//! API emulator (its own process, so its CPU is measurable) or a real
//! cluster, a real redis-server and zero-latency provider stubs, with up to
//! hundreds of thousands of AssetScans. For each count and each number of
//! shards (one replica per shard, as the chart's StatefulSet runs them) it
//! prints time to all finished, scans/s, peak RSS and CPU per process, API
//! requests per scan, Redis commands per scan, the etcd bytes the operator
//! added per asset, the peak provider request rates against the start
//! bound, and what a restart and an idle span after it wrote; then a
//! rescale mid-run (2 → 4 → 2 shards by default), and a summary with the
//! ratios the targets are stated in (docs/scaling.md).

mod control_plane;
mod footprint;
mod latency;
mod procstat;
mod progress;
mod proxy;
mod replicas;
mod report;
mod run;
mod software;
mod stack;
mod summary;

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
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    counts: Vec<usize>,
    /// Numbers of shards (replicas) to run each count with.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    shards: Vec<u32>,
    /// Shard counts of a rescale mid-run, at the largest count
    /// (`--rescale` alone: no rescale run).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "2,4,2")]
    rescale: Vec<u32>,
    /// Seconds of idleness measured after a restart of the replicas (0:
    /// no restart).
    #[arg(long, default_value_t = 30)]
    idle_seconds: u64,
    /// Reconciles in flight per replica (`run --concurrency`).
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// Give up on a run after this many seconds without progress to the
    /// next mark.
    #[arg(long, default_value_t = 3600)]
    timeout_seconds: u64,
    /// Runs started per second per replica (`scanStarts.perSecond`): high
    /// enough that the figures are the operator's capacity, not the bound.
    #[arg(long, default_value_t = 400)]
    starts_per_second: u32,
    /// Runs started at once per replica (`scanStarts.burst`).
    #[arg(long, default_value_t = 100)]
    starts_burst: u32,
    /// Replicas per shard, not sharded among themselves (the chart's
    /// default install: 2 replicas, 1 shard).
    #[arg(long, default_value_t = 1)]
    replicas_per_shard: u32,
    /// `scanStarts.membershipTtl` in ms (0: no membership, every replica
    /// reconciles every object); the operator's default when not given.
    #[arg(long)]
    membership_ttl_ms: Option<u64>,
    /// The operator binary to measure (default: the one built next to this
    /// driver), e.g. an older build for a before/after comparison.
    #[arg(long)]
    operator: Option<PathBuf>,
    /// Packages per asset beyond the high-risk assets' (0: none, the mix
    /// of earlier figures); at most 496 listed inline.
    #[arg(long, default_value_t = 0)]
    packages: usize,
    /// Where the packages are: listed in `spec.software`, or in an SBOM
    /// the AssetScan names (served by the stub SBOM source).
    #[arg(long, value_enum, default_value = "inline")]
    software: software::Listing,
    /// Run against this cluster (its current context; the CRDs installed)
    /// instead of the emulator, in a namespace of the run's own, deleted
    /// at the end.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
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
    let settings = run::Settings {
        backend: match &args.kubeconfig {
            Some(path) => stack::Backend::Cluster {
                kubeconfig: path.clone(),
            },
            None => stack::Backend::Emulator,
        },
        operator: match &args.operator {
            Some(path) => path.clone(),
            None => stack::sibling_binary("assetscan-operator")?,
        },
        concurrency: args.concurrency,
        timeout: Duration::from_secs(args.timeout_seconds),
        idle: Duration::from_secs(args.idle_seconds),
        starts: ScanStartsSection {
            per_second: args.starts_per_second,
            burst: args.starts_burst,
            membership_ttl: args.membership_ttl_ms.map_or(
                ScanStartsSection::default().membership_ttl,
                Duration::from_millis,
            ),
            ..ScanStartsSection::default()
        },
        replicas_per_shard: args.replicas_per_shard,
        mix: software::Mix {
            packages: args.packages,
            listing: args.software,
        },
    };
    println!("software: {}", settings.mix.describe());
    let mut reports = Vec::new();
    for &count in &args.counts {
        for &shards in &args.shards {
            println!("\n== {count} AssetScans, {shards} shard(s) ==");
            let report = run::steady(&settings, count, shards).await?;
            report.print();
            reports.push(report);
        }
    }
    if let (Some(&count), false) = (args.counts.iter().max(), args.rescale.is_empty()) {
        let steps: Vec<String> = args.rescale.iter().map(u32::to_string).collect();
        println!(
            "\n== {count} AssetScans, rescaled {} mid-run ==",
            steps.join(" -> ")
        );
        let report = run::rescale(&settings, count, &args.rescale).await?;
        report.print();
        reports.push(report);
    }
    summary::print(&reports);
    let failed: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.violations()
                .into_iter()
                .map(move |v| format!("{} x {}: {v}", r.count, r.shards))
        })
        .collect();
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}
