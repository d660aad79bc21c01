//! What an upgrade run starts before its phases: Redis, the provider
//! stubs, the API emulator (unless a cluster is given), both releases'
//! configurations, binaries and CRDs; and the run's state.

use super::cluster::Cluster;
use super::{Inject, OTHER_PREFIX, Options};
use crate::ChaosError;
use crate::audit::{PREFIX, RedisView};
use crate::objects::{Channel, Kind, PlannedObject};
use crate::plan::Scale;
use crate::replicas::{Launch, ReplicaSet};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions, read_crd_dir};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Replicas, as the chart's default rollout would replace them.
pub(super) const REPLICAS: usize = 3;
/// How long a step waits for its new replica's first claim.
pub(super) const CLAIM_WAIT: Duration = Duration::from_secs(20);
/// How long the runs get to settle at the end.
pub(super) const SETTLE: Duration = Duration::from_secs(120);
/// How long the vulnerability provider and the webhook receiver take.
const PROVIDER_LATENCY: Duration = Duration::from_millis(500);
/// Between two AssetScans created while a step waits.
pub(super) const CREATE_EVERY: Duration = Duration::from_millis(400);

/// The run in progress.
pub(super) struct Upgrade {
    pub options: Options,
    pub t0: Instant,
    pub scale: Scale,
    /// The redis-server and the API emulator run as long as the run.
    pub _redis: RedisServer,
    pub view: RedisView,
    pub stubs: ProviderStubs,
    pub _emulator: Option<Emulator>,
    pub cluster: Cluster,
    pub replicas: ReplicaSet,
    pub previous: Launch,
    pub current: Launch,
    pub previous_crds: Vec<Value>,
    pub current_crds: Vec<Value>,
    /// Every AssetScan created, in order.
    pub created: Vec<PlannedObject>,
    /// Manifests the API server refused, with its answer.
    pub refused: Vec<(String, String)>,
    /// Instance names of the replicas started, with their release.
    pub started: Vec<(String, &'static str)>,
}

pub(super) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ChaosError {
    let context = context.into();
    move |source| ChaosError::Io { context, source }
}

/// The kind of the `index`th AssetScan: four in ten high risk (alerted
/// through the webhook, half of them through WeCom too), two offline,
/// four clean.
pub(super) fn kind(index: usize) -> Kind {
    match index % 10 {
        0 | 1 => Kind::HighRisk {
            channels: vec![Channel::Webhook],
            log4j: index.is_multiple_of(20),
        },
        2 | 3 => Kind::HighRisk {
            channels: vec![Channel::Webhook, Channel::WeCom],
            log4j: false,
        },
        4 | 5 => Kind::Offline,
        n => Kind::Clean {
            findings: n % 2 == 0,
        },
    }
}

/// This tree's AssetScan CRD with a new required spec field.
fn require_new_field(crds: &mut [Value]) {
    for crd in crds {
        if crd["spec"]["names"]["kind"] != "AssetScan" {
            continue;
        }
        for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
            let spec = &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"];
            spec["properties"]["owner"] = json!({"type": "string"});
            match spec["required"].as_array_mut() {
                Some(required) => required.push(json!("owner")),
                None => spec["required"] = json!(["owner"]),
            }
        }
    }
}

impl Upgrade {
    pub(super) fn say(&self, what: impl AsRef<str>) {
        println!(
            "{:>8.2}s  {}",
            self.t0.elapsed().as_secs_f64(),
            what.as_ref()
        );
    }

    pub(super) async fn start(options: Options) -> Result<Upgrade, ChaosError> {
        let dir = options.dir.clone();
        let redis = tokio::task::block_in_place(RedisServer::start)?;
        let stubs = ProviderStubs::start()
            .await
            .map_err(io("start the provider stubs"))?;
        stubs.serve_examples();
        // Slow enough providers that a replica stopped by the rollout
        // leaves runs in flight for the others to take over.
        stubs.osv.faults().set_latency(PROVIDER_LATENCY);
        stubs.sink.faults().set_latency(PROVIDER_LATENCY);
        let (emulator, kubeconfig) = match &options.kubeconfig {
            Some(path) => (None, path.clone()),
            None => {
                let emu = Emulator::start(EmulatorOptions::default()).await?;
                let path = dir.join("kubeconfig");
                emu.write_kubeconfig(&path)?;
                (Some(emu), path)
            }
        };
        let cluster = Cluster::connect(&kubeconfig).await?;
        let scale = Scale::bounded();
        let providers = stubs
            .write_providers_section(&dir, "secops-")
            .map_err(io("write the providers section"))?;
        let config = |name: &str, prefix: &str, release: Release| -> Result<PathBuf, ChaosError> {
            let path = dir.join(name);
            let text = release.config(crate::world::config_yaml(&scale, &providers, prefix));
            std::fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
            Ok(path)
        };
        let current_prefix = match options.inject {
            Some(Inject::DifferentLock) => OTHER_PREFIX,
            _ => PREFIX,
        };
        let launch = |binary: &Path, config: PathBuf| Launch {
            binary: binary.to_owned(),
            config,
            kubeconfig: kubeconfig.clone(),
            redis_url: redis.url(),
            dir: dir.clone(),
        };
        let bridge = options.inject != Some(Inject::NoBridge);
        let previous = launch(
            &options.previous_operator,
            config("previous.yaml", PREFIX, Release::Previous)?,
        );
        let current = launch(
            &options.operator,
            config("current.yaml", current_prefix, Release::Current { bridge })?,
        );
        let previous_crds = read_crd_dir(&options.previous_tree.join("crds"))?;
        let mut current_crds = read_crd_dir(&options.tree.join("crds"))?;
        if options.inject == Some(Inject::RequiredField) {
            require_new_field(&mut current_crds);
        }
        Ok(Upgrade {
            t0: Instant::now(),
            view: RedisView::new(&redis.url()),
            replicas: ReplicaSet::new(previous.clone(), REPLICAS),
            scale,
            _redis: redis,
            stubs,
            _emulator: emulator,
            cluster,
            previous,
            current,
            previous_crds,
            current_crds,
            created: Vec::new(),
            refused: Vec::new(),
            started: Vec::new(),
            options,
        })
    }
}

/// Whose config a replica reads: the previous release refuses the keys it
/// does not know, so its config leaves out this tree's.
#[derive(Clone, Copy)]
enum Release {
    Previous,
    Current { bridge: bool },
}

impl Release {
    fn config(self, text: String) -> String {
        match self {
            Release::Previous => without_block(&text, "  sbomSources:"),
            Release::Current { bridge: true } => text,
            Release::Current { bridge: false } => {
                text.replacen("redis: {", "redis: {identityBridge: false, ", 1)
            }
        }
    }
}

/// `text` without the YAML block that starts at the line `header` (that
/// line and the more indented lines after it).
fn without_block(text: &str, header: &str) -> String {
    let depth = header.len() - header.trim_start().len();
    let mut inside = false;
    let mut kept = String::with_capacity(text.len());
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        inside = if line == header {
            true
        } else {
            inside && indent > depth
        };
        if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_release_config_leaves_out_this_trees_keys() {
        let text = "providers:\n  online: {a: 1}\n  sbomSources:\n    artifacts: {b: 2}\n  other: {c: 3}\nredis: {prefix: x}\n";
        assert_eq!(
            Release::Previous.config(text.into()),
            "providers:\n  online: {a: 1}\n  other: {c: 3}\nredis: {prefix: x}\n"
        );
        assert!(
            Release::Current { bridge: false }
                .config(text.into())
                .contains("redis: {identityBridge: false, prefix: x}")
        );
    }
}
