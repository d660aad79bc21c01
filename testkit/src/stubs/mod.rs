//! Provider stubs: real HTTP servers on free loopback ports that speak the
//! providers' protocols (inventory, OSV, KEV feed, EPSS, a signed-webhook
//! sink, WeCom robot, Slack webhook, a receiver that answers as PagerDuty,
//! Teams or Alertmanager's webhook do), count calls per route, and misbehave
//! on demand (latency, statuses, malformed or wrong-shape bodies, oversized
//! streamed bodies, hangs) through [`Faults`].
//!
//! Each stub is a [`Stub`] of its provider's state and derefs to its
//! [`StubServer`] for `url()`, `faults()` and `calls(route)`. They need a
//! running tokio runtime and stop when dropped.

pub mod epss;
pub mod fixtures;
pub mod inventory;
pub mod kev;
pub mod osv;
pub mod peak;
pub mod receiver;
pub mod sbom;
pub mod server;
pub mod sink;
pub mod slack;
pub mod stub;
pub mod wecom;

pub use epss::EpssStub;
pub use fixtures::{FixtureDataError, Fixtures};
pub use inventory::InventoryStub;
pub use kev::KevStub;
pub use osv::OsvStub;
pub use receiver::{Answer, ReceiverStub};
pub use sbom::SbomStub;
pub use server::{Fault, Faults, StubServer};
pub use sink::{Delivery, SinkKeys, WebhookSink};
pub use slack::SlackStub;
pub use stub::Stub;
pub use wecom::WeComStub;

use std::path::{Path, PathBuf};
use std::time::Instant;

/// The `maxBodyBytes` of the stub SBOM source in the stubs' config.
pub const SBOM_MAX_BODY_BYTES: usize = 256 * 1024;

/// Provider calls so far, per stub route ([`ProviderStubs::counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StubCounters {
    pub inventory: u64,
    pub querybatch: u64,
    pub records: u64,
    pub kev: u64,
    pub epss: u64,
    pub deliveries: usize,
    pub effects: usize,
}

/// The repository's example AssetScans, `examples/assetscan-*.yaml`, in
/// file-name order.
pub fn example_manifests() -> std::io::Result<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("assetscan-") && n.ends_with(".yaml"))
        })
        .collect();
    paths.sort();
    Ok(paths)
}

/// Every stub at once, loaded with the real fixtures: the 15 OSV records,
/// the whole KEV catalog, FIRST's EPSS example.
#[derive(Debug)]
pub struct ProviderStubs {
    pub inventory: InventoryStub,
    pub osv: OsvStub,
    pub kev: KevStub,
    pub epss: EpssStub,
    pub sink: WebhookSink,
    pub wecom: WeComStub,
    pub slack: SlackStub,
    /// The SBOM source `artifacts` (empty until a test puts documents).
    pub sbom: SbomStub,
}

impl ProviderStubs {
    /// The sink's Standard Webhooks secret (the base64 of 32 bytes).
    pub const WEBHOOK_SECRET: &'static str = "whsec_YXNzZXRzY2FuLXRlc3Qtd2ViaG9vay1zZWNyZXQtMzI=";
    /// The WeCom robot's key.
    pub const WECOM_KEY: &'static str = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa";

    /// Every stub, with the data of [`Fixtures::locate`].
    pub async fn start() -> std::io::Result<ProviderStubs> {
        ProviderStubs::start_from(&Fixtures::locate()).await
    }

    /// Every stub, with the data in `fixtures`.
    pub async fn start_from(fixtures: &Fixtures) -> std::io::Result<ProviderStubs> {
        let osv = OsvStub::start().await?;
        osv.load_records_dir(&fixtures.path(fixtures::OSV_RECORDS))?;
        let epss = EpssStub::start().await?;
        epss.load_response(&fixtures.read(fixtures::EPSS_EXAMPLE)?)?;
        Ok(ProviderStubs {
            inventory: InventoryStub::start().await?,
            osv,
            kev: KevStub::start_with(fixtures.read(fixtures::KEV_CATALOG)?).await?,
            epss,
            sink: WebhookSink::start(Self::WEBHOOK_SECRET).await?,
            wecom: WeComStub::start(Self::WECOM_KEY).await?,
            slack: SlackStub::start().await?,
            sbom: SbomStub::start().await?,
        })
    }

    /// The `maxBodyBytes` of the stub SBOM source in the stubs' config.
    pub const SBOM_MAX_BODY_BYTES: usize = 256 * 1024;

    /// Provider calls so far, per stub route.
    pub fn counters(&self) -> StubCounters {
        StubCounters {
            inventory: self.inventory.asset_calls(),
            querybatch: self.osv.querybatch_calls(),
            records: self.osv.vuln_calls(),
            kev: self.kev.feed_calls(),
            epss: self.epss.epss_calls(),
            deliveries: self.sink.deliveries().len(),
            effects: self.sink.effects(),
        }
    }

    /// When each call so far to any of the stubs arrived, oldest first:
    /// every provider request of the run, for its peak rate
    /// ([`peak::peak`]).
    pub fn call_times(&self) -> Vec<Instant> {
        let mut times: Vec<Instant> = [
            &*self.inventory,
            &*self.osv,
            &*self.kev,
            &*self.epss,
            &*self.sink,
            &*self.wecom,
            &*self.slack,
            &*self.sbom,
        ]
        .iter()
        .flat_map(|stub| stub.call_times())
        .collect();
        times.sort_unstable();
        times
    }

    /// Makes the OSV stub answer for the packages of the repository's
    /// example AssetScans: every record under the packages it names (Ubuntu,
    /// Alpine, PyPI, Maven, Go), and the Debian 10 packages of
    /// `examples/assetscan-debian-openssl.yaml` mapped to the fixtures'
    /// records of the same software (the fixtures hold no Debian OSV records,
    /// see their README; the stub does not evaluate versions).
    pub fn serve_examples(&self) {
        self.osv.index_affected_packages();
        for (name, id) in [
            ("openssl", "CVE-2018-5407"),
            ("openssh", "UBUNTU-CVE-2024-6387"),
            ("xz-utils", "UBUNTU-CVE-2024-3094"),
            ("glibc", "UBUNTU-CVE-2023-4911"),
        ] {
            self.osv.set_package_vulns("Debian:10", name, &[id]);
        }
    }

    /// Writes the channel secrets as files into `dir` and returns the
    /// operator's `providers` config section (YAML) pointing at the stubs:
    /// the inventory (the TCP probe needs no stub), OSV, KEV, EPSS,
    /// channels `webhook`, `wecom` and `slack`, and the SBOM source
    /// `artifacts` (1 s timeout, [`SBOM_MAX_BODY_BYTES`]).
    pub fn write_config(&self, dir: &Path) -> std::io::Result<String> {
        self.write_channels_config(dir, "")
    }

    /// [`ProviderStubs::write_config`] nested under `providers:`, ready to
    /// append to an operator config file, with `channel_prefix` before each
    /// channel name (`secops-` gives the names of `examples/config.yaml`).
    pub fn write_providers_section(
        &self,
        dir: &Path,
        channel_prefix: &str,
    ) -> std::io::Result<String> {
        let section = self.write_channels_config(dir, channel_prefix)?;
        let indented: String = section.lines().map(|line| format!("  {line}\n")).collect();
        Ok(format!("providers:\n{indented}"))
    }

    fn write_channels_config(&self, dir: &Path, channel_prefix: &str) -> std::io::Result<String> {
        let secret = |name: &str, value: &str| -> std::io::Result<String> {
            let path = dir.join(name);
            std::fs::write(&path, value)?;
            Ok(path.display().to_string())
        };
        let webhook_url = secret("webhook-url", &self.sink.hook_url())?;
        let webhook_secret = secret("webhook-secret", Self::WEBHOOK_SECRET)?;
        let wecom_key = secret("wecom-key", Self::WECOM_KEY)?;
        let slack_url = secret("slack-url", &self.slack.webhook_url())?;
        Ok(format!(
            r#"online: {{inventory: {{baseUrl: "{inventory}"}}}}
vulnerabilities: {{kind: osv, baseUrl: "{osv}"}}
threatIntel:
  kev: {{url: "{kev}"}}
  epss: {{baseUrl: "{epss}"}}
notifications:
  {channel_prefix}webhook: {{kind: webhook, urlFrom: {{file: "{webhook_url}"}}, secretFrom: {{file: "{webhook_secret}"}}}}
  {channel_prefix}wecom: {{kind: wecom, baseUrl: "{wecom}", keyFrom: {{file: "{wecom_key}"}}}}
  {channel_prefix}slack: {{kind: slack, urlFrom: {{file: "{slack_url}"}}}}
sbomSources:
  artifacts: {{baseUrl: "{sbom}", timeout: 1s, maxBodyBytes: {SBOM_MAX_BODY_BYTES}}}
"#,
            inventory = self.inventory.url(),
            osv = self.osv.url(),
            kev = self.kev.feed_url(),
            epss = self.epss.url(),
            wecom = self.wecom.url(),
            sbom = self.sbom.base_url(),
        ))
    }
}
