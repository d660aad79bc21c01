//! One measured run: a fresh stack (kube-emulator process, counting proxy,
//! redis-server, provider stubs, two operator replicas), `count` AssetScans
//! created, all finished (the provider stubs' request log gives the peak
//! request rate), then a restart of both replicas and an idle span.

use crate::procstat::{cpu_seconds, peak_rss_kib};
use crate::proxy::{self, Counts, is_write};
use crate::report::{Cost, ProviderRate, Report};
use anyhow::{Context as _, Result, bail};
use assetscan_operator::config::ScanStartsSection;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanSpec, Target};
use assetscan_testkit::process::OperatorCommand;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use assetscan_testkit::stubs::peak::peak;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NAMESPACE: &str = "default";
const REPLICAS: u32 = 2;

pub struct Settings {
    pub count: usize,
    pub operator: PathBuf,
    pub concurrency: u16,
    pub timeout: Duration,
    pub idle: Duration,
    /// The replicas' start bound (`scanStarts`).
    pub starts: ScanStartsSection,
}

/// A child process killed when dropped.
struct Proc {
    name: String,
    child: Child,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn sibling_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("own path")?;
    let path = exe.with_file_name(name);
    if !path.exists() {
        bail!(
            "{} not found: build it in the same profile (make scale does)",
            path.display()
        );
    }
    Ok(path)
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Starts `kube-emulator` and returns it with the URL it printed.
fn start_emulator(work: &Path, count: usize) -> Result<(Proc, String)> {
    let mut child = Command::new(sibling_binary("kube-emulator")?)
        .args(["--port", "0", "--watch-history"])
        .arg((count * 20).max(10_000).to_string())
        .arg("--crds")
        .arg(repo().join("crds"))
        .arg("--kubeconfig")
        .arg(work.join("emulator.kubeconfig"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(work.join("emulator.log"))?)
        .spawn()
        .context("starting kube-emulator")?;
    let stdout = child.stdout.take().context("emulator stdout")?;
    let proc = Proc {
        name: "emulator".into(),
        child,
    };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .context("emulator printed no URL")?
        .to_owned();
    Ok((proc, url))
}

fn config_yaml(stubs: &ProviderStubs, dir: &Path, starts: &ScanStartsSection) -> Result<String> {
    let providers = stubs.write_providers_section(dir, "secops-")?;
    Ok(format!(
        "redis: {{timeout: 2s}}\n\
         lock: {{ttl: 10s}}\n\
         tickets: {{retention: 1h, auditCap: 100000}}\n\
         scanStarts: {{perSecond: {}, burst: {}}}\n\
         {providers}",
        starts.per_second, starts.burst
    ))
}

fn start_replica(work: &Path, index: u32, redis: &str, settings: &Settings) -> Result<Proc> {
    let name = format!("replica-{index}");
    let (config, kubeconfig) = (work.join("config.yaml"), work.join("operator.kubeconfig"));
    let child = OperatorCommand::new(
        &settings.operator,
        &config,
        redis,
        &kubeconfig,
        &name,
        NAMESPACE,
    )
    .log_filter("warn")
    .command(&work.join(format!("{name}.log")))?
    .args(["--shard-index", &index.to_string()])
    .args(["--shard-count", &REPLICAS.to_string()])
    .args(["--concurrency", &settings.concurrency.to_string()])
    .spawn()
    .with_context(|| format!("starting {name}"))?;
    Ok(Proc { name, child })
}

fn scan(index: usize) -> AssetScan {
    let asset = format!("asset-{index:06}");
    AssetScan::new(
        &format!("scan-{index:06}"),
        AssetScanSpec {
            asset_id: asset.clone(),
            target: Target {
                inventory_ref: Some(asset),
                ..Target::default()
            },
            software: vec![],
            policy: Default::default(),
            notify: vec![],
            rescan_interval: None,
            suspend: false,
            report_history_limit: None,
        },
    )
}

fn terminal(obj: &AssetScan) -> bool {
    obj.status.as_ref().is_some_and(|s| {
        s.phase.is_some_and(|p| p.is_terminal()) && s.observed_generation == obj.metadata.generation
    })
}

/// Watches (directly on the emulator, uncounted) until `count` objects
/// show a terminal phase.
async fn all_finished(api: Api<AssetScan>, count: usize, timeout: Duration) -> Result<()> {
    let mut done = HashSet::new();
    let mut objects = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let wait = async {
        while let Some(obj) = objects.try_next().await? {
            if terminal(&obj) {
                done.insert(obj.metadata.name.unwrap_or_default());
                if done.len() == count {
                    return Ok::<_, anyhow::Error>(());
                }
            }
        }
        bail!("watch ended")
    };
    tokio::time::timeout(timeout, wait)
        .await
        .with_context(|| format!("not all finished within {timeout:?}"))?
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

fn cost(proc: &Proc) -> Cost {
    Cost {
        name: proc.name.clone(),
        peak_rss_kib: peak_rss_kib(proc.pid()).unwrap_or(0),
        cpu_seconds: cpu_seconds(proc.pid()).unwrap_or(0.0),
    }
}

/// A fresh stack without its replicas. Its parts stop when it is dropped,
/// in this order.
struct Stack {
    /// The driver's own client, straight to the emulator (uncounted).
    api: Api<AssetScan>,
    /// The requests through the proxy, which the replicas' kubeconfig
    /// points at.
    counts: Counts,
    emulator: Proc,
    stubs: ProviderStubs,
    redis: RedisServer,
    work: tempfile::TempDir,
}

/// What the scan phase measured (see [`Report`]).
struct ScanPhase {
    elapsed: Duration,
    costs: Vec<Cost>,
    requests: BTreeMap<String, u64>,
    redis_calls: BTreeMap<String, u64>,
    redis_processed: u64,
    providers: ProviderRate,
}

/// Runs the stack through `settings`: creates the AssetScans, starts the
/// replicas and waits until all finished, then restarts both replicas and
/// stays idle.
pub async fn measure(settings: &Settings) -> Result<Report> {
    let stack = Stack::start(settings).await?;
    stack.create_scans(settings.count).await?;
    let (replicas, scan) = stack.run_scans(settings).await?;
    drop(replicas);
    let (restart_idle_writes, restart_idle_redis) = stack.restart_and_idle(settings).await?;
    Ok(Report {
        count: settings.count,
        elapsed: scan.elapsed,
        costs: scan.costs,
        requests: scan.requests,
        redis_calls: scan.redis_calls,
        redis_processed: scan.redis_processed,
        providers: scan.providers,
        restart_idle_writes,
        restart_idle_redis,
        idle: settings.idle,
    })
}

impl Stack {
    /// Starts Redis, the stubs, the emulator (sized for the settings'
    /// count of objects) and the counting proxy before it, and writes the
    /// replicas' config and kubeconfig.
    async fn start(settings: &Settings) -> Result<Stack> {
        let count = settings.count;
        let work = tempfile::Builder::new()
            .prefix("assetscan-scale-")
            .tempdir()?;
        let redis = RedisServer::start()?;
        let stubs = ProviderStubs::start().await?;
        let (emulator, url) = start_emulator(work.path(), count)?;
        let counts = Counts::default();
        let proxy_url = proxy::start(&url, counts.clone()).await?;
        let kubeconfig = std::fs::read_to_string(work.path().join("emulator.kubeconfig"))?;
        std::fs::write(
            work.path().join("operator.kubeconfig"),
            kubeconfig.replace(&url, &proxy_url),
        )?;
        let config = config_yaml(&stubs, work.path(), &settings.starts)?;
        std::fs::write(work.path().join("config.yaml"), config)?;
        let kc = Kubeconfig::read_from(work.path().join("emulator.kubeconfig"))?;
        let client = kube::Client::try_from(
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?,
        )?;
        Ok(Stack {
            api: Api::namespaced(client, NAMESPACE),
            counts,
            emulator,
            stubs,
            redis,
            work,
        })
    }

    /// Creates `count` AssetScans, 16 at a time, their assets online.
    async fn create_scans(&self, count: usize) -> Result<()> {
        let created = Instant::now();
        futures::stream::iter(0..count)
            .map(|i| {
                let api = self.api.clone();
                self.stubs
                    .inventory
                    .set_online(&format!("asset-{i:06}"), true);
                async move { api.create(&PostParams::default(), &scan(i)).await }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await
            .context("creating the AssetScans")?;
        println!(
            "created {count} objects in {:.1} s",
            created.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn start_replicas(&self, settings: &Settings) -> Result<Vec<Proc>> {
        (0..REPLICAS)
            .map(|i| start_replica(self.work.path(), i, &self.redis.url(), settings))
            .collect()
    }

    /// Starts the replicas and waits until every object finished: the
    /// replicas, still running, and what the phase cost.
    async fn run_scans(&self, settings: &Settings) -> Result<(Vec<Proc>, ScanPhase)> {
        let emulator_cpu_before = cpu_seconds(self.emulator.pid()).unwrap_or(0.0);
        let started = Instant::now();
        let replicas = self.start_replicas(settings)?;
        all_finished(self.api.clone(), settings.count, settings.timeout).await?;
        let elapsed = started.elapsed();
        let mut costs: Vec<Cost> = replicas.iter().map(cost).collect();
        let mut emulator_cost = cost(&self.emulator);
        emulator_cost.cpu_seconds -= emulator_cpu_before;
        costs.push(emulator_cost);
        if let Some(pid) = self.redis.pid() {
            costs.push(Cost {
                name: "redis".into(),
                peak_rss_kib: peak_rss_kib(pid).unwrap_or(0),
                cpu_seconds: cpu_seconds(pid).unwrap_or(0.0),
            });
        }
        let provider_calls = self.stubs.call_times();
        let phase = ScanPhase {
            elapsed,
            costs,
            requests: self.counts.snapshot(),
            redis_calls: redis_calls(&self.redis)?,
            redis_processed: redis_processed(&self.redis)?,
            providers: ProviderRate {
                requests: provider_calls.len(),
                peak: peak(&provider_calls, Duration::from_secs(1)),
                replicas: REPLICAS,
                starts: settings.starts.clone(),
            },
        };
        Ok((replicas, phase))
    }

    /// Starts both replicas again (the old ones stopped), waits until both
    /// watch, then stays idle: nothing may be written. The API writes and
    /// the Redis calls since the old replicas stopped (counted from then,
    /// not from the end of the scan phase: the last run's Event is sent
    /// after its status, and may reach the proxy after the phase's counts
    /// were taken).
    async fn restart_and_idle(
        &self,
        settings: &Settings,
    ) -> Result<(BTreeMap<String, u64>, BTreeMap<String, u64>)> {
        let requests_before = self.quiet_counts().await;
        let redis_before = redis_calls(&self.redis)?;
        let watches_before = self.watches();
        let replicas = self.start_replicas(settings)?;
        let restart = Instant::now();
        while self.watches() < watches_before + u64::from(REPLICAS) {
            if restart.elapsed() > settings.timeout {
                bail!("restarted replicas never watched");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(settings.idle).await;
        let after = self.counts.snapshot();
        let writes = delta(&after, &requests_before)
            .into_iter()
            .filter(|(k, _)| is_write(k))
            .collect();
        let redis = delta(&redis_calls(&self.redis)?, &redis_before);
        drop(replicas);
        Ok((writes, redis))
    }

    /// The proxy's counts once they stop moving (unchanged for 100 ms):
    /// what the stopped replicas sent is all counted.
    async fn quiet_counts(&self) -> BTreeMap<String, u64> {
        let mut last = self.counts.snapshot();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = self.counts.snapshot();
            if now == last {
                return now;
            }
            last = now;
        }
    }

    /// The watches of AssetScans opened through the proxy so far.
    fn watches(&self) -> u64 {
        self.counts
            .snapshot()
            .get("watch assetscans")
            .copied()
            .unwrap_or(0)
    }
}
