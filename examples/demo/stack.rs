//! What the replicas run against: a redis-server (or `REDIS_URL`), the
//! Kubernetes API emulator with the repository's CRDs, and the provider
//! stubs with real data; the operators' config pointing at them; and the
//! repository's example AssetScans.

use crate::{LOCK_TTL, NAMESPACE, OFFLINE, SCENARIO_ASSET, now_ms};
use anyhow::{Context as _, Result};
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use kube::api::Api;
use std::path::{Path, PathBuf};

/// Everything the replicas run against. Stops when dropped.
pub struct Stack {
    pub stubs: ProviderStubs,
    pub emulator: Emulator,
    /// The redis-server the demo started, if `REDIS_URL` named none.
    _own_redis: Option<RedisServer>,
    pub redis_url: String,
    /// The operators' key prefix: a fresh one on a shared Redis.
    pub prefix: String,
}

impl Stack {
    /// Starts it all, writes the kubeconfig and the operators' config into
    /// `work`, and prints where each part is.
    pub async fn start(work: &Path) -> Result<Stack> {
        // Redis: REDIS_URL when given (under a fresh key prefix), else our own.
        let (own_redis, redis_url, prefix) = match std::env::var("REDIS_URL") {
            Ok(url) => (None, url, format!("demo{}", now_ms())),
            Err(_) => {
                let own = RedisServer::start().context("starting redis-server")?;
                let url = own.url();
                (Some(own), url, "asc".to_owned())
            }
        };
        let emulator = Emulator::start(EmulatorOptions {
            crd_dir: Some(repo().join("crds")),
            ..EmulatorOptions::default()
        })
        .await?;
        emulator.write_kubeconfig(&work.join("kubeconfig"))?;
        let stubs = ProviderStubs::start().await?;
        stubs.serve_examples();
        write_config(&stubs, work, &prefix)?;
        println!("  kubernetes API emulator  {}", emulator.url());
        println!("  redis                    {redis_url} (prefix {prefix})");
        println!(
            "  providers                inventory, OSV, KEV, EPSS, webhook sink, WeCom (stubs with real data)"
        );
        println!("  lock ttl                 {:?}\n", LOCK_TTL);
        Ok(Stack {
            stubs,
            emulator,
            _own_redis: own_redis,
            redis_url,
            prefix,
        })
    }

    /// The AssetScans of the demo's namespace, through the emulator.
    pub fn api(&self) -> Result<Api<AssetScan>> {
        Ok(Api::namespaced(self.emulator.client()?, NAMESPACE))
    }

    /// Every asset of `scans` online in the inventory, except the
    /// scenario's (until it is back) and the [`OFFLINE`] ones.
    pub fn set_inventory(&self, scans: &[AssetScan]) {
        for scan in scans {
            let inventory_id = scan.spec.target.inventory_ref.clone().unwrap_or_default();
            let online =
                scan.spec.asset_id != SCENARIO_ASSET && !OFFLINE.contains(&inventory_id.as_str());
            self.stubs.inventory.set_online(&inventory_id, online);
        }
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn write_config(stubs: &ProviderStubs, dir: &Path, prefix: &str) -> Result<()> {
    let providers = stubs.write_providers_section(dir, "secops-")?;
    // The replicas watch every namespace: the demo's may use its channels,
    // explicitly (a channel not listed is open to no namespace).
    let access: String = ["webhook", "wecom", "slack"]
        .iter()
        .map(|kind| format!("  secops-{kind}: {{namespaces: [{NAMESPACE}]}}\n"))
        .collect();
    let access = format!("channelAccess:\n{access}");
    let config = format!(
        "redis: {{prefix: {prefix}, timeout: 2s}}\n\
         lock: {{ttl: {}ms}}\n\
         steps:\n  onlineCheck: {{timeout: 3s, maxAttempts: 3, initialBackoff: 200ms, maxBackoff: 1s}}\n\
         {access}{providers}",
        LOCK_TTL.as_millis()
    );
    std::fs::write(dir.join("config.yaml"), config)?;
    Ok(())
}

/// The repository's example AssetScans, `examples/assetscan-*.yaml`.
pub fn read_examples() -> Result<Vec<AssetScan>> {
    assetscan_testkit::stubs::example_manifests()?
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p)?;
            assetscan_operator::yaml::from_str(&text).with_context(|| format!("{}", p.display()))
        })
        .collect()
}

/// Their names, comma-separated.
pub fn names(scans: &[AssetScan]) -> String {
    scans
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}
