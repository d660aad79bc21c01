//! The phases of an upgrade run (see the module's documentation).

use super::Options;
use super::release::Understands;
use super::report::{Verdict, finish};
use super::scans::{NAMESPACES, Scan};
use super::setup::{CLAIM_WAIT, CREATE_EVERY, REPLICAS, SETTLE, Upgrade, io};
use crate::ChaosError;
use crate::audit::PREFIX;
use crate::history::is_settled;
use std::path::Path;
use std::time::{Duration, Instant};

pub(super) async fn run(options: Options) -> Result<Verdict, ChaosError> {
    let mut upgrade = Upgrade::start(options).await?;
    upgrade.install().await?;
    upgrade.roll().await?;
    upgrade.roll_back_and_forward().await?;
    upgrade.settle().await?;
    finish(upgrade).await
}

impl Upgrade {
    fn start_replica(&mut self, slot: usize, release: &'static str) -> Result<(), ChaosError> {
        let launch = if release == "previous" {
            self.previous.launch.clone()
        } else {
            self.current.launch.clone()
        };
        self.replicas.relaunch(launch);
        let first = !self
            .started
            .iter()
            .any(|(i, _)| i.starts_with(&format!("replica-{slot}")));
        let instance = self.replicas.start(slot, !first, None)?.instance.clone();
        self.say(format!("{instance} started ({release} release)"));
        self.started.push((instance, release));
        Ok(())
    }

    /// Creates the next AssetScan; a refusal is recorded, not fatal.
    async fn create_next(&mut self) -> Result<(), ChaosError> {
        let scan = Scan::new(self.created.len() + self.refused.len());
        self.stubs
            .inventory
            .set_online(&scan.object.asset, scan.object.online());
        match self.cluster.create(&scan).await? {
            Ok(()) => self.created.push(scan),
            Err(why) => {
                let why: String = why.chars().take(200).collect();
                self.say(format!("{} refused by the API server: {why}", scan.id()));
                self.refused.push((scan.id(), why));
            }
        }
        Ok(())
    }

    /// Phase 1: the previous release's CRDs and replicas, and a first
    /// batch of AssetScans until every run has settled.
    async fn install(&mut self) -> Result<(), ChaosError> {
        let version = self.options.previous_version;
        let understands = Understands::release(version);
        self.say(format!(
            "phase 1: the previous release {version} ({}): its CRDs, {REPLICAS} replicas watching all namespaces, {} AssetScans in {}",
            &self.options.previous_commit[..12.min(self.options.previous_commit.len())],
            self.options.objects,
            NAMESPACES.join(" and ")
        ));
        if understands != Understands::CURRENT {
            self.say(format!(
                "  {version} understands {understands:?}: its config has no key it does not know, the identity bridge is {}",
                if understands.namespaced_keys {
                    "not needed"
                } else {
                    "needed"
                }
            ));
        }
        self.cluster.apply_crds(&self.previous.crds).await?;
        self.namespaces_created = self.cluster.ensure_namespaces(&NAMESPACES).await?;
        let existing = self.cluster.existing(&NAMESPACES).await?;
        if !existing.is_empty() {
            return Err(ChaosError::Io {
                context: format!(
                    "namespaces {NAMESPACES:?} already hold {} AssetScans (e.g. {}): the run needs them empty",
                    existing.len(),
                    existing[0]
                ),
                source: std::io::Error::other("not empty"),
            });
        }
        self.cluster.record();
        for slot in 0..REPLICAS {
            self.start_replica(slot, "previous")?;
        }
        for _ in 0..self.options.objects {
            self.create_next().await?;
        }
        let after = self.wait_settled().await?;
        self.say(format!(
            "phase 1: {} runs settled after {after:.1} s; {} alerts delivered",
            self.created.len(),
            crate::world::deliveries(&self.stubs).len()
        ));
        if let Some(path) = self.options.capture.clone() {
            self.capture(&path).await?;
        }
        Ok(())
    }

    /// Writes the objects as the previous release's operator left them.
    async fn capture(&self, path: &Path) -> Result<(), ChaosError> {
        let mut objects = Vec::new();
        for scan in &self.created {
            if let Some(mut stored) = self.cluster.get(scan).await? {
                if let Some(meta) = stored["metadata"].as_object_mut() {
                    for field in [
                        "managedFields",
                        "uid",
                        "creationTimestamp",
                        "resourceVersion",
                    ] {
                        meta.remove(field);
                    }
                }
                objects.push(stored);
            }
        }
        let text = serde_json::to_string_pretty(&objects).map_err(|e| ChaosError::Io {
            context: "the captured objects".into(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(path, text + "\n").map_err(io(format!("write {}", path.display())))?;
        self.say(format!(
            "{} objects captured in {}",
            objects.len(),
            path.display()
        ));
        Ok(())
    }

    /// Phases 2 and 3: this tree's CRDs, then each replica replaced.
    async fn roll(&mut self) -> Result<(), ChaosError> {
        self.say("phase 2: this tree's CRDs applied");
        self.cluster.apply_crds(&self.current.crds).await?;
        self.say("phase 3: rolling upgrade, one replica at a time, AssetScans created all along");
        for slot in 0..REPLICAS {
            self.replace(slot, "this tree's").await?;
        }
        Ok(())
    }

    /// Phase 4: a failed rollout rolled back on one replica, then forward.
    async fn roll_back_and_forward(&mut self) -> Result<(), ChaosError> {
        self.say("phase 4: rollback of one replica to the previous release, then forward again");
        self.replace(0, "previous").await?;
        self.replace(0, "this tree's").await
    }

    /// Stops the replica in `slot` as a rollout does and starts `release`'s
    /// in its place; creates AssetScans until the new one claims a run.
    async fn replace(&mut self, slot: usize, release: &'static str) -> Result<(), ChaosError> {
        let grace = Duration::from_secs(20);
        if let Some(instance) = tokio::task::block_in_place(|| self.replicas.stop(slot, grace)) {
            self.say(format!("{instance} stopped (SIGTERM)"));
        }
        self.start_replica(slot, release)?;
        let instance = self
            .started
            .last()
            .map(|(i, _)| i.clone())
            .unwrap_or_default();
        let deadline = Instant::now() + CLAIM_WAIT;
        let before = self.created.len() + self.refused.len();
        loop {
            // Scans continue all along; at most a batch's worth per step.
            if self.created.len() + self.refused.len() < before + self.options.objects {
                self.create_next().await?;
            }
            let claims = self.claims_by(&instance).await?;
            if claims > 0 {
                self.say(format!(
                    "{instance} claimed {claims} run(s) in the shared Redis beside the other release ({} AssetScans created meanwhile)",
                    self.created.len() + self.refused.len() - before
                ));
                return Ok(());
            }
            if Instant::now() > deadline {
                self.say(format!(
                    "{instance} claimed no run under the key prefix {PREFIX} within {} s",
                    CLAIM_WAIT.as_secs()
                ));
                return Ok(());
            }
            tokio::time::sleep(CREATE_EVERY).await;
        }
    }

    /// Accepted claims whose holder is `instance`, in the audit streams.
    pub(super) async fn claims_by(&self, instance: &str) -> Result<usize, ChaosError> {
        let holder = format!("{instance}#");
        Ok(self
            .view
            .snapshot(0)
            .await?
            .iter()
            .filter(|r| r.op() == "acquire" && r.accepted())
            .filter(|r| r.get("holder").is_some_and(|h| h.starts_with(&holder)))
            .count())
    }

    /// Phase 5: every run settles.
    async fn settle(&mut self) -> Result<(), ChaosError> {
        self.say("phase 5: waiting until every run has settled");
        let after = self.wait_settled().await?;
        self.say(format!("phase 5: settled after {after:.1} s"));
        Ok(())
    }

    /// Waits until every AssetScan created has settled, or [`SETTLE`]
    /// passed; the seconds waited.
    async fn wait_settled(&self) -> Result<f64, ChaosError> {
        let started = Instant::now();
        loop {
            let mut all = true;
            for scan in &self.created {
                all &= self
                    .cluster
                    .get(scan)
                    .await?
                    .is_some_and(|o| is_settled(&o));
            }
            if all || started.elapsed() > SETTLE {
                return Ok(started.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
