//! What an upgrade run starts before its phases: Redis, the provider
//! stubs (the webhook receiver with the keys [`Receiver`] says), the API
//! emulator (unless a cluster is given), both releases' configurations,
//! binaries and CRDs; and the run's state.

use super::cluster::Cluster;
use super::release::Understands;
use super::scans::{NAMESPACES, Scan};
use super::{Inject, LEGACY_SECRET, OTHER_PREFIX, Options, Receiver};
use crate::ChaosError;
use crate::audit::{PREFIX, RedisView};
use crate::objects::Channel;
use crate::plan::Scale;
use crate::replicas::{Launch, ReplicaSet};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions, read_crd_dir};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::{ProviderStubs, WebhookSink};
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
    pub previous: Release,
    pub current: Release,
    /// Every AssetScan created, in order.
    pub created: Vec<Scan>,
    /// The namespaces of [`NAMESPACES`] the run created (and deletes).
    pub namespaces_created: Vec<String>,
    /// Manifests the API server refused, with its answer.
    pub refused: Vec<(String, String)>,
    /// Instance names of the replicas started, with their release.
    pub started: Vec<(String, &'static str)>,
}

/// One release in the run: how its replicas start, and its CRDs.
pub(super) struct Release {
    pub launch: Launch,
    pub crds: Vec<Value>,
}

pub(super) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ChaosError {
    let context = context.into();
    move |source| ChaosError::Io { context, source }
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
        let stubs = start_stubs(options.receiver).await?;
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
        let (previous_config, current_config) = write_configs(&options, &scale, &stubs)?;
        let launch = |binary: &Path, config: PathBuf| Launch {
            binary: binary.to_owned(),
            config,
            kubeconfig: kubeconfig.clone(),
            redis_url: redis.url(),
            dir: dir.clone(),
        };
        let previous = Release {
            launch: launch(&options.previous.operator, previous_config),
            crds: read_crd_dir(&options.previous.tree.join("crds"))?,
        };
        let mut current = Release {
            launch: launch(&options.current.operator, current_config),
            crds: read_crd_dir(&options.current.tree.join("crds"))?,
        };
        if options.inject == Some(Inject::RequiredField) {
            require_new_field(&mut current.crds);
        }
        Ok(Upgrade {
            t0: Instant::now(),
            view: RedisView::new(&redis.url()),
            replicas: ReplicaSet::new(previous.launch.clone(), REPLICAS).all_namespaces(),
            scale,
            _redis: redis,
            stubs,
            _emulator: emulator,
            cluster,
            previous,
            current,
            created: Vec::new(),
            namespaces_created: Vec::new(),
            refused: Vec::new(),
            started: Vec::new(),
            options,
        })
    }
}

/// The provider stubs, the webhook receiver with the keys `receiver` says;
/// slow enough that a replica stopped by the rollout leaves runs in flight
/// for the others to take over.
async fn start_stubs(receiver: Receiver) -> Result<ProviderStubs, ChaosError> {
    let mut stubs = ProviderStubs::start()
        .await
        .map_err(io("start the provider stubs"))?;
    stubs.sink = WebhookSink::start_with(receiver.keys())
        .await
        .map_err(io("start the webhook receiver"))?;
    stubs.serve_examples();
    stubs.osv.faults().set_latency(PROVIDER_LATENCY);
    stubs.sink.faults().set_latency(PROVIDER_LATENCY);
    Ok(stubs)
}

/// Writes the secrets and both releases' configs into the run's directory;
/// returns the paths of the previous release's config and this tree's.
fn write_configs(
    options: &Options,
    scale: &Scale,
    stubs: &ProviderStubs,
) -> Result<(PathBuf, PathBuf), ChaosError> {
    let dir = &options.dir;
    let providers = stubs
        .write_providers_section(dir, "secops-")
        .map_err(io("write the providers section"))?;
    let secrets = Secrets {
        standard: dir.join("webhook-secret"),
        legacy: dir.join("legacy-webhook-secret"),
    };
    std::fs::write(&secrets.legacy, LEGACY_SECRET)
        .map_err(io(format!("write {}", secrets.legacy.display())))?;
    let config = |name: &str, prefix: &str, reader: Reader| -> Result<PathBuf, ChaosError> {
        let path = dir.join(name);
        let text = reader.config(
            crate::world::config_yaml(scale, &providers, prefix),
            options.receiver,
            &secrets,
        )?;
        std::fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
        Ok(path)
    };
    let previous = Reader {
        understands: Understands::release(options.previous_version),
        bridge: true,
    };
    let current = Reader {
        understands: Understands::CURRENT,
        bridge: options.inject != Some(Inject::NoBridge),
    };
    let current_prefix = match options.inject {
        Some(Inject::DifferentLock) => OTHER_PREFIX,
        _ => PREFIX,
    };
    Ok((
        config("previous.yaml", PREFIX, previous)?,
        config("current.yaml", current_prefix, current)?,
    ))
}

/// The webhook secrets' files: the `whsec_` one the stubs wrote, and
/// 0.1.0's.
struct Secrets {
    standard: PathBuf,
    legacy: PathBuf,
}

/// Whose config a replica reads: a release's operator refuses the keys it
/// does not know, so its config has only those it understands.
#[derive(Clone, Copy)]
struct Reader {
    understands: Understands,
    /// `false`: `redis.identityBridge: false` ([`Inject::NoBridge`]).
    bridge: bool,
}

impl Reader {
    /// The run's config `text` as this reader is given it: its webhook
    /// signing as the receiver expects it (0.1.0's secret for a release
    /// that knows no other; with a receiver that has only 0.1.0's, the
    /// Standard Webhooks secret and 0.1.0's beside it, both signatures
    /// sent), and each channel opened to both namespaces.
    fn config(
        self,
        text: String,
        receiver: Receiver,
        secrets: &Secrets,
    ) -> Result<String, ChaosError> {
        let file = |path: &Path| format!("{{file: \"{}\"}}", path.display());
        let standard = format!("secretFrom: {}", file(&secrets.standard));
        if !text.contains(&standard) {
            return Err(ChaosError::Io {
                context: "the providers section".into(),
                source: std::io::Error::other(format!(
                    "its webhook channel has no `{standard}` for the harness to change"
                )),
            });
        }
        let signing = if !self.understands.standard_webhooks {
            format!("secretFrom: {}", file(&secrets.legacy))
        } else if receiver == Receiver::Legacy {
            format!(
                "{standard}, legacySignature: true, legacySecretFrom: {}",
                file(&secrets.legacy)
            )
        } else {
            standard.clone()
        };
        let mut text = text.replacen(&standard, &signing, 1);
        if !self.understands.sbom_sources {
            text = without_block(&text, "  sbomSources:");
        }
        if self.understands.channel_access {
            text.push_str("channelAccess:\n");
            for channel in [Channel::Webhook, Channel::WeCom] {
                text.push_str(&format!(
                    "  {}: {{namespaces: [{}]}}\n",
                    channel.name(),
                    NAMESPACES.join(", ")
                ));
            }
        }
        if !self.bridge {
            text = text.replacen("redis: {", "redis: {identityBridge: false, ", 1);
        }
        Ok(text)
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

    fn secrets() -> Secrets {
        Secrets {
            standard: PathBuf::from("/d/webhook-secret"),
            legacy: PathBuf::from("/d/legacy"),
        }
    }

    const TEXT: &str = "redis: {prefix: x}\nproviders:\n  online: {a: 1}\n  notifications:\n    secops-webhook: {kind: webhook, urlFrom: {file: \"/d/u\"}, secretFrom: {file: \"/d/webhook-secret\"}}\n  sbomSources:\n    artifacts: {b: 2}\n  other: {c: 3}\n";

    fn reader(understands: Understands, bridge: bool) -> Reader {
        Reader {
            understands,
            bridge,
        }
    }

    #[test]
    fn release_0_1_0_reads_none_of_this_trees_keys_and_signs_its_way() {
        let v010 = Understands::release("0.1.0".parse().unwrap());
        for receiver in [Receiver::Legacy, Receiver::Both, Receiver::Standard] {
            let text = reader(v010, true)
                .config(TEXT.into(), receiver, &secrets())
                .unwrap();
            assert_eq!(
                text,
                "redis: {prefix: x}\nproviders:\n  online: {a: 1}\n  notifications:\n    secops-webhook: {kind: webhook, urlFrom: {file: \"/d/u\"}, secretFrom: {file: \"/d/legacy\"}}\n  other: {c: 3}\n"
            );
        }
    }

    #[test]
    fn this_tree_signs_as_the_receiver_expects_and_opens_both_namespaces() {
        let current = reader(Understands::CURRENT, true);
        let legacy = current
            .config(TEXT.into(), Receiver::Legacy, &secrets())
            .unwrap();
        assert!(legacy.contains("secretFrom: {file: \"/d/webhook-secret\"}, legacySignature: true, legacySecretFrom: {file: \"/d/legacy\"}}"), "{legacy}");
        let both = current
            .config(TEXT.into(), Receiver::Both, &secrets())
            .unwrap();
        assert!(!both.contains("legacy"), "{both}");
        assert!(both.contains("  sbomSources:\n"));
        assert!(both.ends_with("channelAccess:\n  secops-webhook: {namespaces: [upgrade-a, upgrade-b]}\n  secops-wecom: {namespaces: [upgrade-a, upgrade-b]}\n"), "{both}");
        // A release from 0.2.0 on is given this tree's config.
        assert_eq!(
            reader(Understands::release("0.2.0".parse().unwrap()), true)
                .config(TEXT.into(), Receiver::Both, &secrets())
                .unwrap(),
            both
        );
        assert!(
            reader(Understands::CURRENT, false)
                .config(TEXT.into(), Receiver::Both, &secrets())
                .unwrap()
                .starts_with("redis: {identityBridge: false, prefix: x}")
        );
        assert!(
            current
                .config("redis: {}\n".into(), Receiver::Both, &secrets())
                .is_err()
        );
    }
}
