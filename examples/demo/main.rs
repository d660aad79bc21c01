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
//!
//! - `stack`: what the replicas run against;
//! - `replica`: an operator process, stopped and resumed with signals;
//! - `timeline`: the scenario as it happened, from the audit stream;
//! - `verdict`: the end state, shown and checked.

mod replica;
mod stack;
mod timeline;
mod verdict;

use anyhow::{Result, bail};
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::store::{AuditEntry, RedisTarget, StoreConfig, TicketStore};
use kube::api::{Api, PostParams};
use nix::sys::signal::Signal;
use replica::Replica;
use stack::Stack;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use timeline::Timeline;

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

fn now_ms() -> u64 {
    assetscan_operator::domain::ticket::now_ms()
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
    let binary = replica::operator_binary()?;
    let work = tempfile::Builder::new()
        .prefix("assetscan-demo-")
        .tempdir()?;
    let work_dir = work.path();
    println!("assetscan-operator demo: the stalled-executor scenario, live\n");
    let stack = Stack::start(work_dir).await?;
    let api = stack.api()?;
    let examples = stack::read_examples()?;
    stack.set_inventory(&examples);

    let scenario = Scenario {
        binary: &binary,
        work: work_dir,
        stack: &stack,
        api: &api,
    };
    let mut timeline = Timeline::default();
    let replica_a = scenario.stall(&examples, &mut timeline).await?;
    let replica_b = scenario.take_over(&mut timeline).await?;
    timeline.mark("replica-a", "resumed (SIGCONT) with its stale context");
    replica_a.signal(Signal::SIGCONT)?;
    println!("replica-a resumed");
    let audit = scenario.stale_write_rejected().await?;
    scenario.every_scan_finished().await?;

    timeline.print(&audit);
    let all = api.list(&Default::default()).await?;
    verdict::print_table(&all.items, &work_dir.join("kubeconfig"));
    let verdict = verdict::verify(&all.items, &audit, &stack.stubs);
    drop(replica_b);
    drop(replica_a);
    println!("\nlogs: {} (kept)", work_dir.display());
    let _ = work.keep();
    let lines = verdict?;
    println!("\nchecks:");
    for line in lines {
        println!("  ok  {line}");
    }
    println!("\ndemo passed in {:.1}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The scenario's steps, each waiting on what it is about.
struct Scenario<'a> {
    binary: &'a Path,
    work: &'a Path,
    stack: &'a Stack,
    api: &'a Api<AssetScan>,
}

impl Scenario<'_> {
    fn start(&self, name: &'static str, drill: Option<String>) -> Result<Replica> {
        Replica::start(name, self.binary, self.work, &self.stack.redis_url, drill)
    }

    /// Starts replica-a, armed to stop before it writes web-01 offline,
    /// applies `examples`, and waits until it stalled there.
    async fn stall(&self, examples: &[AssetScan], timeline: &mut Timeline) -> Result<Replica> {
        let drill = format!("{SCENARIO_ASSET}:{}", Status::AssetOffline);
        let replica_a = self.start("replica-a", Some(drill))?;
        timeline.mark("replica-a", "started");
        for scan in examples {
            self.api.create(&PostParams::default(), scan).await?;
        }
        println!(
            "applied {} AssetScans from examples/: {}",
            examples.len(),
            stack::names(examples)
        );
        wait_for("replica-a to stall", Duration::from_secs(60), async || {
            replica_a.is_stopped().then_some(())
        })
        .await?;
        timeline.mark(
            "replica-a",
            format!("saw {SCENARIO} offline, STALLED before writing it (SIGSTOP)"),
        );
        println!("replica-a saw {SCENARIO} offline and stalled (process stopped)");
        Ok(replica_a)
    }

    /// Brings web-01 back online and starts replica-b, which takes it over
    /// once replica-a's lock expired; waits until it finished web-01.
    async fn take_over(&self, timeline: &mut Timeline) -> Result<Replica> {
        self.stack.stubs.inventory.set_online(SCENARIO_ASSET, true);
        timeline.mark("inventory", format!("{SCENARIO} is back online"));
        let replica_b = self.start("replica-b", None)?;
        timeline.mark("replica-b", "started");
        println!("replica-b started; waiting for replica-a's lock to expire ({LOCK_TTL:?})");
        let finished = wait_for(
            "replica-b to finish web-01",
            Duration::from_secs(90),
            async || {
                let scan = self.api.get(SCENARIO).await.ok()?;
                let status = scan.status?;
                (status.phase == Some(Status::Finished)).then_some(status)
            },
        )
        .await?;
        println!(
            "replica-b finished {SCENARIO}: token {:?}",
            finished.fencing_token.unwrap_or_default()
        );
        Ok(replica_b)
    }

    /// Waits until the store rejected the resumed replica-a's stale write;
    /// web-01's audit stream then (its namespace's: the demo's Redis is a
    /// new install's, without the bridge to 0.1.0's layout).
    async fn stale_write_rejected(&self) -> Result<Vec<AuditEntry>> {
        let store = TicketStore::connect(
            &RedisTarget::parse(&self.stack.redis_url)?,
            StoreConfig {
                prefix: self.stack.prefix.clone(),
                ..StoreConfig::default()
            },
        )
        .await?
        .scoped(NAMESPACE)?;
        let asset = AssetId::new(SCENARIO_ASSET)?;
        wait_for(
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
        .await
    }

    /// Lets every other example reach its end too.
    async fn every_scan_finished(&self) -> Result<()> {
        wait_for(
            "every AssetScan to finish",
            Duration::from_secs(90),
            async || {
                let all = self.api.list(&Default::default()).await.ok()?;
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
        .await
    }
}
