//! `make demo`: the scenario this operator exists for, live.
//!
//! Two replicas of the real controller (separate processes) run against the
//! test kit's Kubernetes API emulator, a real redis-server and real HTTP
//! provider stubs. The example AssetScans are applied. Replica A sees
//! `web-01` offline and stalls right before writing it down (a fault drill
//! makes the process SIGSTOP itself there); its lock expires; replica B takes
//! over with a larger token, finds the asset online with a high-risk
//! vulnerability, notifies, records NOTIFIED and FINISHED. Then A is resumed
//! (SIGCONT) and writes its stale ASSET_OFFLINE: the store rejects it.
//!
//! Prints the timeline and a `kubectl get assetscans`-like table; exits 0
//! only when the final state is correct.

use anyhow::{Context as _, Result, bail, ensure};
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::store::{AuditEntry, RedisTarget, StoreConfig, TicketStore};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use kube::api::{Api, PostParams};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// The object of the scenario and its asset.
const SCENARIO: &str = "web-01";
const SCENARIO_ASSET: &str = "web-01.prod.example.com";
/// Assets the inventory reports offline for the whole demo.
const OFFLINE: &[&str] = &["lab-printer-07.office.example.com"];
const LOCK_TTL: Duration = Duration::from_secs(4);
const NAMESPACE: &str = "default";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("\ndemo FAILED: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A running operator replica.
struct Replica {
    name: &'static str,
    child: Child,
}

impl Replica {
    fn start(
        name: &'static str,
        binary: &Path,
        work: &Path,
        redis_url: &str,
        drill: Option<String>,
    ) -> Result<Replica> {
        let log = std::fs::File::create(work.join(format!("{name}.log")))?;
        let mut cmd = Command::new(binary);
        cmd.args(["run", "--metrics-addr", "127.0.0.1:0", "--instance", name])
            .arg("--config")
            .arg(work.join("config.yaml"))
            .env("REDIS_URL", redis_url)
            .env("KUBECONFIG", work.join("kubeconfig"))
            .env("RUST_LOG", "info,kube=warn,hyper=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(drill) = drill {
            cmd.env("FAILPOINTS", format!("stop-before-write=return({drill})"));
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(Replica { name, child })
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether the process is stopped (state `T` in /proc).
    fn is_stopped(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next())
            })
            .is_some_and(|state| state == 'T')
    }

    fn signal(&self, signal: nix::sys::signal::Signal) -> Result<()> {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal)
            .with_context(|| format!("signal {signal} to {}", self.name))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.signal(nix::sys::signal::Signal::SIGCONT);
        let _ = self.signal(nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Orchestrator-side moments, merged into the timeline.
struct Moment {
    at_ms: u64,
    who: String,
    what: String,
}

fn now_ms() -> u64 {
    assetscan_operator::domain::ticket::now_ms()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The operator binary in this example's own target directory (the parent
/// of `examples/`), wherever `CARGO_TARGET_DIR` put it: `make demo` builds
/// it with the fault-drill feature before running this.
fn operator_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .context("cannot locate the target directory")?;
    let binary = dir.join("assetscan-operator");
    ensure!(
        binary.exists(),
        "{} is missing: run `make demo` (it builds the operator with the fault-drill feature)",
        binary.display()
    );
    Ok(binary)
}

async fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn run() -> Result<()> {
    let started = Instant::now();
    let binary = operator_binary()?;
    let work = tempfile::Builder::new()
        .prefix("assetscan-demo-")
        .tempdir()?;
    let work_dir = work.path();
    println!("assetscan-operator demo: the stalled-executor scenario, live\n");

    // Redis: REDIS_URL when given (under a fresh key prefix), else our own.
    let own_redis;
    let (redis_url, prefix) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, format!("demo{}", now_ms())),
        Err(_) => {
            own_redis = RedisServer::start().context("starting redis-server")?;
            (own_redis.url(), "asc".to_owned())
        }
    };
    let emulator = Emulator::start(EmulatorOptions {
        crd_dir: Some(repo().join("crds")),
        ..EmulatorOptions::default()
    })
    .await?;
    emulator.write_kubeconfig(&work_dir.join("kubeconfig"))?;
    let stubs = ProviderStubs::start().await?;
    stubs.serve_examples();
    write_config(&stubs, work_dir, &prefix)?;
    println!("  kubernetes API emulator  {}", emulator.url());
    println!("  redis                    {redis_url} (prefix {prefix})");
    println!(
        "  providers                inventory, OSV, KEV, EPSS, webhook sink, WeCom (stubs with real data)"
    );
    println!("  lock ttl                 {:?}\n", LOCK_TTL);

    let client = emulator.client()?;
    let api: Api<AssetScan> = Api::namespaced(client, NAMESPACE);
    let examples = read_examples()?;
    for scan in &examples {
        let inventory_id = scan.spec.target.inventory_ref.clone().unwrap_or_default();
        let online =
            scan.spec.asset_id != SCENARIO_ASSET && !OFFLINE.contains(&inventory_id.as_str());
        stubs.inventory.set_online(&inventory_id, online);
    }

    let mut moments = Vec::new();
    let replica_a = Replica::start(
        "replica-a",
        &binary,
        work_dir,
        &redis_url,
        Some(format!("{SCENARIO_ASSET}:{}", Status::AssetOffline)),
    )?;
    moments.push(Moment {
        at_ms: now_ms(),
        who: "replica-a".into(),
        what: "started".into(),
    });
    for scan in &examples {
        api.create(&PostParams::default(), scan).await?;
    }
    println!(
        "applied {} AssetScans from examples/: {}",
        examples.len(),
        names(&examples)
    );

    wait_for("replica-a to stall", Duration::from_secs(60), async || {
        replica_a.is_stopped().then_some(())
    })
    .await?;
    moments.push(Moment {
        at_ms: now_ms(),
        who: "replica-a".into(),
        what: format!("saw {SCENARIO} offline, STALLED before writing it (SIGSTOP)"),
    });
    println!("replica-a saw {SCENARIO} offline and stalled (process stopped)");

    stubs.inventory.set_online(SCENARIO_ASSET, true);
    moments.push(Moment {
        at_ms: now_ms(),
        who: "inventory".into(),
        what: format!("{SCENARIO} is back online"),
    });
    let replica_b = Replica::start("replica-b", &binary, work_dir, &redis_url, None)?;
    moments.push(Moment {
        at_ms: now_ms(),
        who: "replica-b".into(),
        what: "started".into(),
    });
    println!("replica-b started; waiting for replica-a's lock to expire ({LOCK_TTL:?})");

    let finished = wait_for(
        "replica-b to finish web-01",
        Duration::from_secs(90),
        async || {
            let scan = api.get(SCENARIO).await.ok()?;
            let status = scan.status?;
            (status.phase == Some(Status::Finished)).then_some(status)
        },
    )
    .await?;
    println!(
        "replica-b finished {SCENARIO}: token {:?}",
        finished.fencing_token.unwrap_or_default()
    );

    let resumed_at = now_ms();
    replica_a.signal(nix::sys::signal::Signal::SIGCONT)?;
    moments.push(Moment {
        at_ms: resumed_at,
        who: "replica-a".into(),
        what: "resumed (SIGCONT) with its stale context".into(),
    });
    println!("replica-a resumed");

    let store = TicketStore::connect(
        &RedisTarget::parse(&redis_url)?,
        StoreConfig {
            prefix: prefix.clone(),
            ..StoreConfig::default()
        },
    )
    .await?;
    let asset = AssetId::new(SCENARIO_ASSET)?;
    let audit = wait_for(
        "replica-a's stale write to be rejected",
        Duration::from_secs(30),
        async || {
            let audit = store.audit(&asset, 1000).await.ok()?;
            audit
                .iter()
                .any(|e| e.get("result") == Some("STALE_TOKEN"))
                .then_some(audit)
        },
    )
    .await?;

    // Let every other example reach its end too.
    wait_for(
        "every AssetScan to finish",
        Duration::from_secs(90),
        async || {
            let all = api.list(&Default::default()).await.ok()?;
            all.items
                .iter()
                .all(|s| {
                    s.status
                        .as_ref()
                        .and_then(|st| st.phase)
                        .is_some_and(Status::is_terminal)
                })
                .then_some(())
        },
    )
    .await?;

    print_timeline(&audit, &moments);
    let all = api.list(&Default::default()).await?;
    print_table(&all.items, &work_dir.join("kubeconfig"));
    let verdict = verify(&all.items, &audit, &stubs);
    drop(replica_b);
    drop(replica_a);
    println!("\nlogs: {} (kept)", work_dir.display());
    let _ = work.keep();
    match verdict {
        Ok(lines) => {
            println!("\nchecks:");
            for line in lines {
                println!("  ok  {line}");
            }
            println!("\ndemo passed in {:.1}s", started.elapsed().as_secs_f64());
            Ok(())
        }
        Err(err) => Err(err),
    }
}

fn write_config(stubs: &ProviderStubs, dir: &Path, prefix: &str) -> Result<()> {
    let providers = stubs.write_providers_section(dir, "secops-")?;
    let config = format!(
        "redis: {{prefix: {prefix}, timeout: 2s}}\n\
         lock: {{ttl: {}ms}}\n\
         steps:\n  onlineCheck: {{timeout: 3s, maxAttempts: 3, initialBackoff: 200ms, maxBackoff: 1s}}\n\
         {providers}",
        LOCK_TTL.as_millis()
    );
    std::fs::write(dir.join("config.yaml"), config)?;
    Ok(())
}

fn read_examples() -> Result<Vec<AssetScan>> {
    assetscan_testkit::stubs::example_manifests()?
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p)?;
            serde_yaml::from_str(&text).with_context(|| format!("{}", p.display()))
        })
        .collect()
}

fn names(scans: &[AssetScan]) -> String {
    scans
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

fn replica_of(holder: &str) -> String {
    holder.split(['#', ':']).next().unwrap_or(holder).to_owned()
}

fn print_timeline(audit: &[AuditEntry], moments: &[Moment]) {
    let mut rows: Vec<(u64, String, String)> = moments
        .iter()
        .map(|m| (m.at_ms, m.who.clone(), m.what.clone()))
        .collect();
    let mut holders: Vec<(u64, String)> = Vec::new();
    for e in audit {
        let at: u64 = e.get("at").and_then(|t| t.parse().ok()).unwrap_or(0);
        let token = e.get("token").unwrap_or("-");
        let (who, what) = match e.op() {
            "acquire" => {
                let who = replica_of(e.get("holder").unwrap_or("?"));
                holders.push((e.token().unwrap_or(0), who.clone()));
                (
                    who,
                    format!(
                        "acquired the lock, token {token}, claimed the ticket at {}",
                        e.get("status").unwrap_or("?")
                    ),
                )
            }
            "release" => (
                replica_of(e.get("holder").unwrap_or("?")),
                "released the lock".into(),
            ),
            _ => {
                let who = holders
                    .iter()
                    .find(|(t, _)| Some(*t) == e.token())
                    .map(|(_, w)| w.clone())
                    .unwrap_or_else(|| "?".into());
                let (from, to) = (e.get("from").unwrap_or("?"), e.get("to").unwrap_or("?"));
                if e.accepted() {
                    let move_ = format!("{from} -> {to}");
                    (
                        who,
                        format!(
                            "write {move_:<36} token {token}  accepted (revision {})",
                            e.get("revision").unwrap_or("?")
                        ),
                    )
                } else {
                    (
                        who,
                        format!(
                            "write {:<36} token {token}  REJECTED {} (the ticket is {from} under token {})",
                            format!("-> {to}"),
                            e.get("result").unwrap_or("?"),
                            e.get("valid").unwrap_or("?")
                        ),
                    )
                }
            }
        };
        rows.push((at, who, what));
    }
    rows.sort_by_key(|r| r.0);
    let t0 = rows.first().map_or(0, |r| r.0);
    println!("\ntimeline of {SCENARIO} ({SCENARIO_ASSET}):");
    for (at, who, what) in rows {
        println!(
            "  {:>6.2}s  {who:<10} {what}",
            (at.saturating_sub(t0)) as f64 / 1000.0
        );
    }
}

/// `kubectl get assetscans` through the emulator, or the same columns
/// printed here when kubectl is not installed.
fn print_table(scans: &[AssetScan], kubeconfig: &Path) {
    println!("\n$ kubectl get assetscans");
    let kubectl = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "assetscans", "-n", NAMESPACE])
        .output();
    if let Ok(out) = kubectl
        && out.status.success()
    {
        print!("{}", String::from_utf8_lossy(&out.stdout));
        return;
    }
    println!(
        "{:<16} {:<36} {:<12} {:<10} {:<9} {:>5}",
        "NAME", "ASSET", "PHASE", "HIGH-RISK", "NOTIFIED", "TOKEN"
    );
    for s in scans {
        let st = s.status.clone().unwrap_or_default();
        println!(
            "{:<16} {:<36} {:<12} {:<10} {:<9} {:>5}",
            s.metadata.name.clone().unwrap_or_default(),
            s.spec.asset_id,
            st.phase.map(|p| p.to_string()).unwrap_or_default(),
            st.high_risk.map(|h| h.to_string()).unwrap_or_default(),
            st.notification
                .as_ref()
                .and_then(|n| serde_json::to_value(n.state).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            st.fencing_token.map(|t| t.to_string()).unwrap_or_default(),
        );
    }
}

/// The final state, checked. Returns what was verified.
fn verify(scans: &[AssetScan], audit: &[AuditEntry], stubs: &ProviderStubs) -> Result<Vec<String>> {
    let mut checked = Vec::new();
    let scenario = scans
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(SCENARIO))
        .context("web-01 is gone")?;
    let status = scenario.status.clone().unwrap_or_default();
    ensure!(
        status.phase == Some(Status::Finished),
        "web-01 phase is {:?}",
        status.phase
    );
    ensure!(
        status.high_risk == Some(true),
        "web-01 is not marked high risk"
    );
    let stale: Vec<&AuditEntry> = audit
        .iter()
        .filter(|e| e.get("result") == Some("STALE_TOKEN"))
        .collect();
    ensure!(
        stale.len() == 1,
        "expected one rejected write, found {}",
        stale.len()
    );
    let rejected = stale[0];
    ensure!(
        rejected.get("to") == Some("ASSET_OFFLINE"),
        "the rejected write is not ASSET_OFFLINE"
    );
    let a_token = rejected.token().context("rejected write without token")?;
    let b_token = status.fencing_token.unwrap_or_default() as u64;
    ensure!(
        b_token > a_token,
        "final token {b_token} not above the stale {a_token}"
    );
    checked.push(format!("web-01 FINISHED with high risk under token {b_token}; replica-a's ASSET_OFFLINE with token {a_token} was rejected"));
    ensure!(
        !audit
            .iter()
            .any(|e| e.op() == "advance" && e.accepted() && e.get("to") == Some("ASSET_OFFLINE")),
        "an ASSET_OFFLINE write was accepted"
    );
    checked.push("no ASSET_OFFLINE was ever recorded for web-01".into());
    let notified = status.notification.context("web-01 has no notification")?;
    let deliveries = stubs.sink.deliveries();
    let for_web01 = deliveries
        .iter()
        .filter(|d| d.header("idempotency-key") == Some(notified.idempotency_key.as_str()))
        .count();
    ensure!(
        for_web01 >= 1,
        "the webhook sink never got web-01's notification"
    );
    checked.push(format!(
        "web-01's notification reached the webhook ({for_web01} delivery, key {})",
        notified.idempotency_key
    ));
    ensure!(
        stubs.wecom.messages().len() == 1,
        "billing-api's WeCom alert count is {}",
        stubs.wecom.messages().len()
    );
    checked.push("billing-api's WeCom alert was sent once".into());
    for s in scans {
        let phase = s.status.as_ref().and_then(|st| st.phase);
        let name = s.metadata.name.clone().unwrap_or_default();
        ensure!(phase == Some(Status::Finished), "{name} ended {phase:?}");
        let offline = s
            .status
            .as_ref()
            .is_some_and(|st| st.high_risk.is_none() && st.vulnerabilities.is_none());
        ensure!(
            offline == OFFLINE.contains(&s.spec.target.inventory_ref.as_deref().unwrap_or("")),
            "{name}: unexpected verdict"
        );
    }
    checked.push(format!(
        "all {} AssetScans FINISHED; the offline asset was never queried for vulnerabilities",
        scans.len()
    ));
    Ok(checked)
}
