//! The measured runs: a steady one (one set of replicas from the first
//! start to all finished, then a restart and an idle span), and a rescale
//! (the number of shards changed mid-run, as `helm upgrade --set
//! replicas=N` changes it).

use crate::control_plane;
use crate::footprint::{self, Footprint};
use crate::latency::Latency;
use crate::progress::Progress;
use crate::proxy::is_write;
use crate::replicas::{Launch, Replicas};
use crate::report::{Cost, ProviderPeak, Report, Rescale, RestartIdle, SoftwareCost, StartBound};
use crate::software::Mix;
use crate::stack::{Backend, Stack, Watch};
use anyhow::{Context as _, Result};
use assetscan_operator::domain::run_order;
use assetscan_operator::kubernetes::controller::settings::ScanStartsSection;
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::peak::peak;
use assetscan_testkit::wait;
use kube::api::Api;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How a set of runs is made.
pub struct Settings {
    pub backend: Backend,
    pub operator: PathBuf,
    pub concurrency: u16,
    pub timeout: Duration,
    pub idle: Duration,
    pub starts: ScanStartsSection,
    /// Replicas per shard (not sharded among themselves).
    pub replicas_per_shard: u32,
    pub mix: Mix,
}

/// How long replicas get to stop after SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// `count` AssetScans, `shards` replicas from the start to all finished.
pub async fn steady(settings: &Settings, count: usize, shards: u32) -> Result<Report> {
    let (stack, created, mut progress) = prepare(settings, count).await?;
    let launch = launch(settings, &stack);
    let before = Mark::take(&stack).await;
    let started = Instant::now();
    let replicas = Replicas::start(&launch, shards, 0)?;
    progress.wait(count, settings.timeout).await?;
    let elapsed = started.elapsed();
    let costs = replicas.costs();
    let peak = peak_rss(&costs);
    let scan = ScanPhase::measure(&stack, elapsed, costs, before).await?;
    let mut latency = Latency::default();
    replicas.scrape_latency(&mut latency).await;
    replicas.stop(STOP_GRACE).await;
    let mut report = scan
        .report(settings, &stack, count, shards, peak, &created)
        .await?;
    report.latency = latency;
    if !settings.idle.is_zero() {
        report.restart_idle =
            Some(restart_and_idle(settings, &stack, &launch, count, shards).await?);
    }
    stack.finish().await?;
    Ok(report)
}

/// `count` AssetScans, replicas for `steps[0]` shards from the start, and
/// changed to each next number of shards as a share of the AssetScans has
/// finished (for 2 → 4 → 2: at a third, at two thirds).
pub async fn rescale(settings: &Settings, count: usize, steps: &[u32]) -> Result<Report> {
    let first = *steps
        .first()
        .context("no shard counts to rescale between")?;
    let (stack, created, mut progress) = prepare(settings, count).await?;
    let launch = launch(settings, &stack);
    let before = Mark::take(&stack).await;
    let started = Instant::now();
    let mut replicas = Replicas::start(&launch, first, 0)?;
    // Every object labelled first: a label written after this is the
    // rescale's doing.
    wait_labelled(&stack, count, settings.timeout).await?;
    let writes_before = object_writes(&stack.requests());
    let mut peak = 0;
    let mut figures = Vec::new();
    let mut latency = Latency::default();
    for (step, &next) in steps.iter().enumerate().skip(1) {
        progress
            .wait(count * step / steps.len(), settings.timeout)
            .await?;
        peak = peak.max(peak_rss(&replicas.costs()));
        let from = replicas.shards;
        replicas.scrape_latency(&mut latency).await;
        let stopped = Instant::now();
        replicas.stop(STOP_GRACE).await;
        replicas = Replicas::start(&launch, next, u32::try_from(step).unwrap_or(u32::MAX))?;
        replicas
            .wait_covering(count as u64, settings.timeout)
            .await?;
        figures.push((from, next, stopped.elapsed()));
    }
    progress.wait(count, settings.timeout).await?;
    let elapsed = started.elapsed();
    let costs = replicas.costs();
    let peak = peak.max(peak_rss(&costs));
    let scan = ScanPhase::measure(&stack, elapsed, costs, before).await?;
    replicas.scrape_latency(&mut latency).await;
    replicas.stop(STOP_GRACE).await;
    let shards = steps.last().copied().unwrap_or(first);
    let mut report = scan
        .report(settings, &stack, count, shards, peak, &created)
        .await?;
    report.latency = latency;
    report.rescale = Some(Rescale {
        steps: figures,
        object_writes: object_writes(&report.requests) - writes_before,
    });
    stack.finish().await?;
    Ok(report)
}

/// A fresh stack with `count` AssetScans created, their sizes as created,
/// and the watch of their progress.
pub async fn prepare(
    settings: &Settings,
    count: usize,
) -> Result<(Stack, std::collections::HashMap<String, u64>, Progress)> {
    let stack = Stack::start(&settings.backend, count, &settings.starts, Watch::Own).await?;
    stack.create_scans(count, &settings.mix).await?;
    let created = footprint::scan_sizes(&stack.client, &stack.namespace).await?;
    let progress = Progress::watch(stack.api());
    Ok((stack, created, progress))
}

pub fn launch<'a>(settings: &'a Settings, stack: &'a Stack) -> Launch<'a> {
    Launch {
        operator: &settings.operator,
        work: stack.work.path(),
        redis: stack.redis_url(),
        namespace: stack.watched(),
        concurrency: settings.concurrency,
        per_shard: settings.replicas_per_shard,
    }
}

fn peak_rss(costs: &[Cost]) -> u64 {
    costs.iter().map(|c| c.peak_rss_kib).max().unwrap_or(0)
}

/// Writes to AssetScans themselves: labels and finalizers.
fn object_writes(requests: &BTreeMap<String, u64>) -> u64 {
    requests
        .iter()
        .filter(|(k, _)| is_write(k) && k.ends_with(" assetscans"))
        .map(|(_, v)| v)
        .sum()
}

async fn wait_labelled(stack: &Stack, count: usize, timeout: Duration) -> Result<()> {
    wait::poll(timeout, async || {
        (object_writes(&stack.requests()) >= count as u64)
            .then_some(())
            .ok_or(())
    })
    .await
    .map_err(|()| anyhow::anyhow!("not every AssetScan was labelled within {timeout:?}"))
}

/// What the scan phase measured, taken as it ended.
struct ScanPhase {
    elapsed: Duration,
    costs: Vec<Cost>,
    requests: BTreeMap<String, u64>,
    redis_calls: BTreeMap<String, u64>,
    redis_processed: u64,
    providers: Vec<ProviderPeak>,
}

/// The servers' CPU counters as the scan phase starts: what it cost them
/// is the difference at its end.
struct Mark {
    /// The emulator's, or `kubectl proxy`'s before a real cluster.
    server_cpu: f64,
    /// A real cluster's API server's.
    control_plane: Option<control_plane::Sample>,
}

impl Mark {
    async fn take(stack: &Stack) -> Mark {
        Mark {
            server_cpu: stack.server.cost().cpu_seconds,
            control_plane: control_plane::of(stack).await,
        }
    }
}

impl ScanPhase {
    async fn measure(
        stack: &Stack,
        elapsed: Duration,
        mut costs: Vec<Cost>,
        before: Mark,
    ) -> Result<ScanPhase> {
        let mut server = stack.server.cost();
        server.cpu_seconds -= before.server_cpu;
        costs.push(server);
        if let (Some(start), Some(end)) = (before.control_plane, control_plane::of(stack).await) {
            costs.push(control_plane::cost(start, end));
        }
        if let Some(pid) = stack.redis.pid() {
            costs.push(Cost {
                name: "redis".into(),
                peak_rss_kib: crate::procstat::peak_rss_kib(pid).unwrap_or(0),
                cpu_seconds: crate::procstat::cpu_seconds(pid).unwrap_or(0.0),
            });
        }
        let stubs = &stack.stubs;
        let second = Duration::from_secs(1);
        let providers = [
            ("inventory", stubs.inventory.call_times()),
            ("osv", stubs.osv.call_times()),
            ("epss", stubs.epss.call_times()),
            ("webhook", stubs.sink.call_times()),
        ]
        .into_iter()
        .map(|(name, times)| ProviderPeak {
            name,
            requests: times.len(),
            peak: peak(&times, second),
        })
        .collect();
        Ok(ScanPhase {
            elapsed,
            costs,
            requests: stack.requests(),
            redis_calls: redis_calls(&stack.redis)?,
            redis_processed: redis_processed(&stack.redis)?,
            providers,
        })
    }

    /// The report, with what is counted once the replicas stopped: the
    /// etcd footprint and the runs per generation.
    async fn report(
        self,
        settings: &Settings,
        stack: &Stack,
        count: usize,
        shards: u32,
        replica_peak_rss_kib: u64,
        created: &std::collections::HashMap<String, u64>,
    ) -> Result<Report> {
        quiet_counts(stack).await;
        let footprint: Footprint = footprint::measure(&stack.client, &stack.namespace, created)
            .await
            .context("measuring the footprint")?;
        let software = software_cost(settings, stack, count, created, &footprint);
        Ok(Report {
            count,
            shards,
            elapsed: self.elapsed,
            costs: self.costs,
            replica_peak_rss_kib,
            requests: self.requests,
            redis_calls: self.redis_calls,
            redis_processed: self.redis_processed,
            providers: self.providers,
            bound: StartBound {
                replicas: shards * settings.replicas_per_shard,
                starts: settings.starts.clone(),
            },
            footprint,
            second_runs: second_runs(&stack.api()).await?,
            checked_twice: stack.stubs.inventory.assets_asked_twice(),
            rescale: None,
            latency: Latency::default(),
            restart_idle: None,
            idle: settings.idle,
            software,
        })
    }
}

/// The software's figures, once the replicas stopped.
fn software_cost(
    settings: &Settings,
    stack: &Stack,
    count: usize,
    created: &std::collections::HashMap<String, u64>,
    footprint: &Footprint,
) -> SoftwareCost {
    let n = count.max(1) as f64;
    let stored_created = created.values().sum::<u64>() as f64 / n;
    let (api_sent, api_received) = stack.counts.bytes();
    SoftwareCost {
        mix: settings.mix.describe(),
        stored_created,
        stored_after: stored_created + footprint.object_added as f64 / n,
        api_sent,
        api_received,
        sbom_calls: stack.stubs.sbom.document_calls(),
        sbom_bytes: stack.stubs.sbom.bytes_served(),
        packages_asked: crate::stack::packages_asked(count, &settings.mix),
        osv_queries: stack.stubs.osv.queries_received(),
    }
}

/// AssetScans whose finished run is not their generation's first (the
/// first is scan 0: `<owner>-g<generation>-s0`).
pub async fn second_runs(api: &Api<AssetScan>) -> Result<usize> {
    let mut found = 0;
    footprint::each(api, |obj| {
        let run = obj.status.as_ref().and_then(|s| s.run.as_deref());
        if run
            .and_then(run_order)
            .is_some_and(|(_, (_, scan))| scan > 0)
        {
            found += 1;
        }
    })
    .await
    .context("listing the AssetScans")?;
    Ok(found)
}

/// Starts the replicas again (the old ones stopped), waits until they
/// watch every AssetScan, then stays idle: nothing may be written. The API
/// writes and the Redis calls since the old replicas stopped.
async fn restart_and_idle(
    settings: &Settings,
    stack: &Stack,
    launch: &Launch<'_>,
    count: usize,
    shards: u32,
) -> Result<RestartIdle> {
    let requests_before = quiet_counts(stack).await;
    let redis_before = redis_calls(&stack.redis)?;
    let replicas = Replicas::start(launch, shards, 1)?;
    replicas
        .wait_covering(count as u64, settings.timeout)
        .await?;
    tokio::time::sleep(settings.idle).await;
    let writes = delta(&stack.requests(), &requests_before)
        .into_iter()
        .filter(|(k, _)| is_write(k))
        .collect();
    let redis = delta(&redis_calls(&stack.redis)?, &redis_before);
    let peak_rss_kib = peak_rss(&replicas.costs());
    replicas.stop(STOP_GRACE).await;
    Ok(RestartIdle {
        writes,
        redis,
        peak_rss_kib,
    })
}

/// The proxy's counts once they stop moving (unchanged for 200 ms): what
/// stopped replicas sent is all counted.
pub async fn quiet_counts(stack: &Stack) -> BTreeMap<String, u64> {
    let mut last = stack.requests();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = stack.requests();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// `cmdstat_<name>` calls from `INFO commandstats`.
fn redis_calls(redis: &RedisServer) -> Result<BTreeMap<String, u64>> {
    let info = redis.command(&["INFO", "commandstats"])?;
    Ok(info
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect())
}

fn redis_processed(redis: &RedisServer) -> Result<u64> {
    let info = redis.command(&["INFO", "stats"])?;
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .context("total_commands_processed")
}

fn delta(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}
