//! One measured run: a fresh stack (kube-emulator process, counting proxy,
//! redis-server, provider stubs, two operator replicas), `count` AssetScans
//! created, all finished, then a restart of both replicas and an idle span.

use crate::procstat::{cpu_seconds, peak_rss_kib};
use crate::proxy::{self, Counts, is_write};
use anyhow::{Context as _, Result, bail};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanSpec, Target};
use assetscan_testkit::process::OperatorCommand;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
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

/// What one process cost during the scan phase.
pub struct Cost {
    name: String,
    peak_rss_kib: u64,
    cpu_seconds: f64,
}

pub struct Report {
    count: usize,
    elapsed: Duration,
    costs: Vec<Cost>,
    requests: BTreeMap<String, u64>,
    redis_calls: BTreeMap<String, u64>,
    redis_processed: u64,
    restart_idle_writes: BTreeMap<String, u64>,
    restart_idle_redis: BTreeMap<String, u64>,
    idle: Duration,
}

impl Report {
    pub fn print(&self) {
        let n = self.count as f64;
        let secs = self.elapsed.as_secs_f64();
        println!("all finished in {secs:.1} s: {:.1} scans/s", n / secs);
        let total_cpu: f64 = self.costs.iter().map(|c| c.cpu_seconds).sum();
        for c in &self.costs {
            println!(
                "  {:<10} peak RSS {:>7.1} MiB  CPU {:>7.1} s ({:>4.1}% of the run's CPU)",
                c.name,
                c.peak_rss_kib as f64 / 1024.0,
                c.cpu_seconds,
                100.0 * c.cpu_seconds / total_cpu.max(f64::EPSILON)
            );
        }
        println!("API requests per scan (verb resource):");
        let mut writes = 0;
        for (key, calls) in &self.requests {
            if is_write(key) {
                writes += calls;
            }
            println!("  {key:<32} {:>8.2}  ({calls})", *calls as f64 / n);
        }
        println!("  {:<32} {:>8.2}", "= writes", writes as f64 / n);
        let commands: u64 = self.redis_calls.values().sum();
        println!(
            "Redis per scan: {:.2} commands processed (round trips incl. scripts), {:.2} calls incl. inside scripts",
            self.redis_processed as f64 / n,
            commands as f64 / n
        );
        for (cmd, calls) in &self.redis_calls {
            println!("  {cmd:<24} {:>8.2}", *calls as f64 / n);
        }
        println!(
            "restart of both replicas + {} s idle: API writes {:?}, Redis calls {:?}",
            self.idle.as_secs(),
            self.restart_idle_writes,
            self.restart_idle_redis
        );
    }

    /// Guarantees broken by this run (not targets: those are read from the
    /// figures).
    pub fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        if !self.restart_idle_writes.is_empty() {
            found.push(format!(
                "API writes after the restart: {:?}",
                self.restart_idle_writes
            ));
        }
        found
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

fn config_yaml(stubs: &ProviderStubs, dir: &Path) -> Result<String> {
    let providers = stubs.write_providers_section(dir, "secops-")?;
    Ok(format!(
        "redis: {{timeout: 2s}}\n\
         lock: {{ttl: 10s}}\n\
         tickets: {{retention: 1h, auditCap: 100000}}\n\
         {providers}"
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

pub async fn measure(settings: &Settings) -> Result<Report> {
    let work = tempfile::Builder::new()
        .prefix("assetscan-scale-")
        .tempdir()?;
    let redis = RedisServer::start()?;
    let stubs = ProviderStubs::start().await?;
    let (emulator, url) = start_emulator(work.path(), settings.count)?;
    let counts = Counts::default();
    let proxy_url = proxy::start(&url, counts.clone()).await?;
    let kubeconfig = std::fs::read_to_string(work.path().join("emulator.kubeconfig"))?;
    std::fs::write(
        work.path().join("operator.kubeconfig"),
        kubeconfig.replace(&url, &proxy_url),
    )?;
    let config = config_yaml(&stubs, work.path())?;
    std::fs::write(work.path().join("config.yaml"), config)?;
    let kc = Kubeconfig::read_from(work.path().join("emulator.kubeconfig"))?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?,
    )?;
    let api: Api<AssetScan> = Api::namespaced(client, NAMESPACE);

    let created = Instant::now();
    futures::stream::iter(0..settings.count)
        .map(|i| {
            let api = api.clone();
            stubs.inventory.set_online(&format!("asset-{i:06}"), true);
            async move { api.create(&PostParams::default(), &scan(i)).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .context("creating the AssetScans")?;
    println!(
        "created {} objects in {:.1} s",
        settings.count,
        created.elapsed().as_secs_f64()
    );

    let emulator_cpu_before = cpu_seconds(emulator.pid()).unwrap_or(0.0);
    let started = Instant::now();
    let mut replicas = (0..REPLICAS)
        .map(|i| start_replica(work.path(), i, &redis.url(), settings))
        .collect::<Result<Vec<_>>>()?;
    all_finished(api.clone(), settings.count, settings.timeout).await?;
    let elapsed = started.elapsed();
    let mut costs: Vec<Cost> = replicas.iter().map(cost).collect();
    let mut emulator_cost = cost(&emulator);
    emulator_cost.cpu_seconds -= emulator_cpu_before;
    costs.push(emulator_cost);
    if let Some(pid) = redis.pid() {
        costs.push(Cost {
            name: "redis".into(),
            peak_rss_kib: peak_rss_kib(pid).unwrap_or(0),
            cpu_seconds: cpu_seconds(pid).unwrap_or(0.0),
        });
    }
    let requests = counts.snapshot();
    let redis_calls_done = redis_calls(&redis)?;
    let redis_processed_done = redis_processed(&redis)?;

    // Restart both replicas, then stay idle: nothing may be written.
    replicas.clear();
    let watches_before = counts
        .snapshot()
        .get("watch assetscans")
        .copied()
        .unwrap_or(0);
    replicas = (0..REPLICAS)
        .map(|i| start_replica(work.path(), i, &redis.url(), settings))
        .collect::<Result<Vec<_>>>()?;
    let restart = Instant::now();
    while counts
        .snapshot()
        .get("watch assetscans")
        .copied()
        .unwrap_or(0)
        < watches_before + u64::from(REPLICAS)
    {
        if restart.elapsed() > settings.timeout {
            bail!("restarted replicas never watched");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(settings.idle).await;
    let after = counts.snapshot();
    let restart_idle_writes = delta(&after, &requests)
        .into_iter()
        .filter(|(k, _)| is_write(k))
        .collect();
    let restart_idle_redis = delta(&redis_calls(&redis)?, &redis_calls_done);
    drop(replicas);
    Ok(Report {
        count: settings.count,
        elapsed,
        costs,
        requests,
        redis_calls: redis_calls_done,
        redis_processed: redis_processed_done,
        restart_idle_writes,
        restart_idle_redis,
        idle: settings.idle,
    })
}
