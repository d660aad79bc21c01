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
//!
//! `--fairness` and `--failover` run scenarios instead, each with a
//! check it prints and fails on: another namespace's few AssetScans behind
//! a mass creation (`fairness`), a replica SIGKILLed mid-round
//! (`failover`).

mod control_plane;
mod failover;
mod fairness;
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

use anyhow::{Context as _, Result, bail};
use assetscan_operator::kubernetes::controller::settings::ScanStartsSection;
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
    /// Runs started per second per replica (`scanStarts.perSecond`).
    /// Default: 400, high enough that the figures are the operator's
    /// capacity, not the bound; with --fairness or --failover the chart's
    /// 20, as the bound binds.
    #[arg(long)]
    starts_per_second: Option<u32>,
    /// Runs started at once per replica (`scanStarts.burst`). Default:
    /// 100; with --fairness or --failover the chart's 20.
    #[arg(long)]
    starts_burst: Option<u32>,
    /// Replicas per shard, not sharded among themselves (the chart's
    /// default install: 2 replicas, 1 shard). Default: 1; with --failover 3.
    #[arg(long)]
    replicas_per_shard: Option<u32>,
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
    /// Instead of the plain counts and the rescale: namespace A creates
    /// the largest of --counts, then namespace B --fairness-few; B's few
    /// timed alone and behind A, against 2x (the emulator only: the
    /// replicas watch every namespace). One shard.
    #[arg(long)]
    fairness: bool,
    /// AssetScans namespace B creates with --fairness.
    #[arg(long, default_value_t = 20)]
    fairness_few: usize,
    /// Instead of the plain counts and the rescale: the largest of
    /// --counts, replicas of one shard (3 unless --replicas-per-shard), the
    /// last SIGKILLed when half finished; its share's pick-up against the
    /// chart's membershipTtl (10 s) + 10 s, every run finished, none
    /// notified or finished twice. After --fairness when both are given.
    #[arg(long)]
    failover: bool,
}

/// What the flags default to when not given: the plain runs measure
/// capacity, the scenarios the chart's bound.
struct Defaults {
    per_second: u32,
    burst: u32,
    per_shard: u32,
}

const PLAIN: Defaults = Defaults {
    per_second: 400,
    burst: 100,
    per_shard: 1,
};
const FAIRNESS: Defaults = Defaults {
    per_second: 20,
    burst: 20,
    per_shard: 1,
};
const FAILOVER: Defaults = Defaults {
    per_shard: 3,
    ..FAIRNESS
};

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
    if args.fairness || args.failover {
        return scenarios(args).await;
    }
    let settings = settings(args, &PLAIN)?;
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

/// `--fairness`, then `--failover`, at the largest of `--counts`; fails
/// when a check failed.
async fn scenarios(args: &Args) -> Result<()> {
    let count = args.counts.iter().copied().max().context("no --counts")?;
    let mut failed = Vec::new();
    if args.fairness {
        let settings = settings(args, &FAIRNESS)?;
        let few = args.fairness_few;
        println!("\n== fairness: {count} AssetScans in namespace A, then {few} in namespace B ==");
        failed.extend(fairness::run(&settings, count, few).await?.print());
    }
    if args.failover {
        let settings = settings(args, &FAILOVER)?;
        if settings.replicas_per_shard < 2 {
            bail!("--failover needs 2 replicas per shard or more: one survives the kill");
        }
        println!(
            "\n== failover: {count} AssetScans, {} replicas, one SIGKILLed when half finished ==",
            settings.replicas_per_shard
        );
        failed.extend(failover::run(&settings, count).await?.print());
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}

/// The settings the flags give, `defaults` for those not given.
fn settings(args: &Args, defaults: &Defaults) -> Result<run::Settings> {
    Ok(run::Settings {
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
            per_second: args.starts_per_second.unwrap_or(defaults.per_second),
            burst: args.starts_burst.unwrap_or(defaults.burst),
            membership_ttl: args.membership_ttl_ms.map_or(
                ScanStartsSection::default().membership_ttl,
                Duration::from_millis,
            ),
            ..ScanStartsSection::default()
        },
        replicas_per_shard: args.replicas_per_shard.unwrap_or(defaults.per_shard),
        mix: software::Mix {
            packages: args.packages,
            listing: args.software,
        },
    })
}
