//! A fresh stack for one measured run: an API server (the test kit's
//! emulator in its own process, or a real cluster given by a kubeconfig),
//! a counting proxy before it that the replicas talk to, a real
//! redis-server and zero-latency provider stubs; and the AssetScans.

use crate::procstat::{cpu_seconds, peak_rss_kib};
use crate::proxy::{self, Counts};
use crate::report::Cost;
use crate::software::{AssetSoftware, Mix};
use anyhow::{Context as _, Result, bail};
use assetscan_operator::kubernetes::controller::settings::ScanStartsSection;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanSpec, Target};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Every this many assets, one has vulnerable packages and notifies a
/// webhook (the rest are online and clean): reports and notifications of
/// real size, at a rate a fleet might show.
pub const HIGH_RISK_EVERY: usize = 50;

/// The packages of `examples/assetscan-debian-openssl.yaml`: critical
/// findings in the OSV stub's records.
const VULNERABLE: [(&str, &str); 4] = [
    ("openssl", "1.1.1n-0+deb10u3"),
    ("openssh", "1:7.9p1-10+deb10u2"),
    ("xz-utils", "5.2.4-1+deb10u1"),
    ("glibc", "2.28-10+deb10u2"),
];

/// A child process killed when dropped.
pub struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn cost(&self) -> Cost {
        Cost {
            name: self.name.clone(),
            peak_rss_kib: peak_rss_kib(self.pid()).unwrap_or(0),
            cpu_seconds: cpu_seconds(self.pid()).unwrap_or(0.0),
        }
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

/// Starts `command` with a piped stdout and returns it with the first
/// `http://` URL its first line names.
fn start_serving(name: &str, mut command: Command, log: &Path) -> Result<(Proc, String)> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let stdout = child.stdout.take().context("stdout")?;
    let proc = Proc {
        name: name.to_owned(),
        child,
    };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .split_whitespace()
        .find_map(|w| {
            w.starts_with("http://")
                .then(|| w.to_owned())
                .or_else(|| w.starts_with("127.0.0.1:").then(|| format!("http://{w}")))
        })
        .with_context(|| format!("{name} printed no URL: {line:?}"))?;
    Ok((proc, url))
}

/// `kube-emulator` sized for `count` objects: a change log that outlasts a
/// watch's reconnection at the run's write rate, no per-object write
/// history (tests read it; here it would keep every old version).
fn start_emulator(work: &Path, count: usize) -> Result<(Proc, String)> {
    let mut command = Command::new(sibling_binary("kube-emulator")?);
    command
        .args(["--port", "0", "--no-write-history", "--watch-history"])
        .arg((count * 2).max(10_000).to_string())
        .arg("--crds")
        .arg(repo().join("crds"))
        .arg("--kubeconfig")
        .arg(work.join("emulator.kubeconfig"));
    let (proc, url) = start_serving("emulator", command, &work.join("emulator.log"))?;
    Ok((proc, url))
}

/// Where the API is: the emulator this run started, or a real cluster
/// reached through `kubectl proxy` (its credentials, plain HTTP on
/// loopback), in a namespace of the run's own.
pub enum Backend {
    Emulator,
    Cluster { kubeconfig: PathBuf },
}

/// Which namespaces the replicas watch.
#[derive(Clone, Copy)]
pub enum Watch<'a> {
    /// The run's own namespace alone.
    Own,
    /// Every namespace, as a cluster-wide install does; these tenants'
    /// namespaces are created and may use the webhook (`channelAccess`:
    /// with every namespace watched, a channel is open to none unless
    /// listed). The emulator only: on a real cluster the replicas would
    /// take up every AssetScan there.
    Tenants(&'a [&'a str]),
}

fn config_yaml(
    stubs: &ProviderStubs,
    dir: &Path,
    starts: &ScanStartsSection,
    tenants: &[String],
) -> Result<String> {
    let providers = stubs.write_providers_section(dir, "secops-")?;
    let access = match tenants {
        [] => String::new(),
        _ => format!(
            "channelAccess: {{secops-webhook: {{namespaces: [{}]}}}}\n",
            tenants.join(", ")
        ),
    };
    Ok(format!(
        "redis: {{timeout: 2s}}\n\
         lock: {{ttl: 10s}}\n\
         tickets: {{retention: 1h, auditCap: 100000}}\n\
         scanStarts: {{perSecond: {}, burst: {}{}}}\n\
         {access}{providers}",
        starts.per_second,
        starts.burst,
        membership(starts)
    ))
}

/// `membershipTtl`, when not the default (an older operator binary, for a
/// before/after comparison, knows no such key).
fn membership(starts: &ScanStartsSection) -> String {
    let ttl = starts.membership_ttl;
    if ttl == ScanStartsSection::default().membership_ttl {
        return String::new();
    }
    format!(", membershipTtl: {}ms", ttl.as_millis())
}

/// The `index`th AssetScan of a run, with its software as `mix` says.
fn scan(index: usize, mix: &Mix) -> AssetScan {
    let asset = asset(index);
    let high_risk = index % HIGH_RISK_EVERY == HIGH_RISK_EVERY - 1;
    let vulnerable: &[(&str, &str)] = if high_risk { &VULNERABLE } else { &[] };
    let (software, sbom) = match mix.of(index, vulnerable) {
        AssetSoftware::Inline(packages) => (packages, None),
        AssetSoftware::Sbom(reference) => (Vec::new(), Some(reference)),
    };
    AssetScan::new(
        &format!("scan-{index:06}"),
        AssetScanSpec {
            asset_id: asset.clone(),
            target: Target {
                inventory_ref: Some(asset),
                ..Target::default()
            },
            software,
            sbom,
            vex: vec![],
            policy: Default::default(),
            notify: if high_risk {
                vec!["secops-webhook".into()]
            } else {
                vec![]
            },
            rescan_interval: None,
            suspend: false,
            report_history_limit: None,
        },
    )
}

/// Packages the runs of `count` assets ask about: the mix's per asset,
/// and the vulnerable ones of the high-risk assets.
pub fn packages_asked(count: usize, mix: &Mix) -> u64 {
    let high_risk = high_risk_among(count);
    (count * mix.packages + high_risk * VULNERABLE.len()) as u64
}

/// The high-risk assets (those that notify) among the first `count`.
pub fn high_risk_among(count: usize) -> usize {
    count / HIGH_RISK_EVERY
}

pub fn asset(index: usize) -> String {
    format!("asset-{index:06}")
}

/// A fresh stack. Its parts stop when it is dropped; a namespace it
/// created on a real cluster is deleted by [`Stack::finish`].
pub struct Stack {
    /// The driver's own client (uncounted).
    pub client: kube::Client,
    /// The run's own namespace (the replicas' kubeconfig default).
    pub namespace: String,
    /// The tenants' namespaces when the replicas watch every namespace;
    /// empty when they watch [`Stack::namespace`] alone.
    pub tenants: Vec<String>,
    /// The requests through the proxy, which the replicas' kubeconfig
    /// points at.
    pub counts: Counts,
    /// The emulator, or `kubectl proxy` before a real cluster.
    pub server: Proc,
    pub backend_is_emulator: bool,
    pub stubs: ProviderStubs,
    pub redis: RedisServer,
    redis_url: String,
    pub work: tempfile::TempDir,
}

impl Stack {
    /// Starts Redis, the stubs, the API (sized for `count` objects) and the
    /// counting proxy before it, creates the tenants' namespaces `watch`
    /// names, and writes the replicas' config and kubeconfig.
    pub async fn start(
        backend: &Backend,
        count: usize,
        starts: &ScanStartsSection,
        watch: Watch<'_>,
    ) -> Result<Stack> {
        let work = tempfile::Builder::new()
            .prefix("assetscan-scale-")
            .tempdir()?;
        let redis = RedisServer::start()?;
        let stubs = ProviderStubs::start().await?;
        stubs.serve_examples();
        // Only counts: a run of 100 000 assets would hold every request.
        stubs.osv.forget_requests();
        let (server, url, client, namespace) = match backend {
            Backend::Emulator => {
                let (server, url) = start_emulator(work.path(), count)?;
                let kc = Kubeconfig::read_from(work.path().join("emulator.kubeconfig"))?;
                (server, url, client_of(kc).await?, "default".to_owned())
            }
            Backend::Cluster { kubeconfig } => {
                let (server, url) = kubectl_proxy(kubeconfig, work.path())?;
                let client = client_of(Kubeconfig::read_from(kubeconfig)?).await?;
                Api::<AssetScan>::all(client.clone())
                    .list_metadata(&kube::api::ListParams::default().limit(1))
                    .await
                    .context(
                        "listing AssetScans: are the CRDs installed? (kubectl apply -f crds/)",
                    )?;
                let namespace = own_namespace(&client).await?;
                (server, url, client, namespace)
            }
        };
        let tenants: Vec<String> = match watch {
            Watch::Own => Vec::new(),
            Watch::Tenants(_) if !matches!(backend, Backend::Emulator) => {
                bail!("the replicas watch every namespace: against the emulator only")
            }
            Watch::Tenants(names) => names.iter().map(|n| (*n).to_owned()).collect(),
        };
        create_namespaces(&client, &tenants).await?;
        let counts = Counts::default();
        let proxy_url = proxy::start(&url, counts.clone()).await?;
        std::fs::write(
            work.path().join("operator.kubeconfig"),
            plain_kubeconfig(&proxy_url, &namespace),
        )?;
        std::fs::write(
            work.path().join("config.yaml"),
            config_yaml(&stubs, work.path(), starts, &tenants)?,
        )?;
        Ok(Stack {
            client,
            namespace,
            tenants,
            counts,
            server,
            backend_is_emulator: matches!(backend, Backend::Emulator),
            stubs,
            redis_url: redis.url(),
            redis,
            work,
        })
    }

    pub fn redis_url(&self) -> &str {
        &self.redis_url
    }

    pub fn api(&self) -> Api<AssetScan> {
        self.api_in(&self.namespace)
    }

    /// The AssetScans of `namespace`, through the driver's own client.
    pub fn api_in(&self, namespace: &str) -> Api<AssetScan> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The namespace the replicas watch; `None`: every namespace.
    pub fn watched(&self) -> Option<&str> {
        self.tenants.is_empty().then_some(self.namespace.as_str())
    }

    /// Creates `count` AssetScans in the run's own namespace.
    pub async fn create_scans(&self, count: usize, mix: &Mix) -> Result<()> {
        self.create_scans_in(&self.namespace, 0..count, mix).await
    }

    /// Creates the AssetScans `indices` (their names and assets: each
    /// index its own) in `namespace`, with the software `mix` says (their
    /// SBOMs served by the stub source), 16 at a time, their assets online.
    pub async fn create_scans_in(
        &self,
        namespace: &str,
        indices: Range<usize>,
        mix: &Mix,
    ) -> Result<()> {
        let created = Instant::now();
        let count = indices.len();
        mix.serve(&self.stubs.sbom, &VULNERABLE);
        futures::stream::iter(indices)
            .map(|i| {
                let api = self.api_in(namespace);
                self.stubs.inventory.set_online(&asset(i), true);
                let object = scan(i, mix);
                async move { api.create(&PostParams::default(), &object).await }
            })
            .buffer_unordered(16)
            .try_collect::<Vec<_>>()
            .await
            .with_context(|| format!("creating the AssetScans in {namespace}"))?;
        println!(
            "created {count} objects in {:.1} s",
            created.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Deletes the namespace the run created on a real cluster (its
    /// AssetScans with it, once the replicas are gone and cannot remove
    /// their finalizers: those are removed here).
    pub async fn finish(self) -> Result<()> {
        if self.backend_is_emulator {
            return Ok(());
        }
        remove_finalizers(&self.api()).await?;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        namespaces
            .delete(&self.namespace, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting namespace {}", self.namespace))?;
        Ok(())
    }

    /// API writes so far, by verb and resource.
    pub fn requests(&self) -> BTreeMap<String, u64> {
        self.counts.snapshot()
    }
}

/// Removes every AssetScan's finalizers, 16 at a time: with the replicas
/// gone, nobody else would, and their namespace would never go.
async fn remove_finalizers(api: &Api<AssetScan>) -> Result<()> {
    let names: Vec<String> = api
        .list_metadata(&kube::api::ListParams::default())
        .await
        .context("listing the AssetScans")?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    futures::stream::iter(names)
        .map(|name| {
            let (api, patch) = (api.clone(), patch.clone());
            async move {
                api.patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .context("removing finalizers")?;
    Ok(())
}

async fn client_of(kubeconfig: Kubeconfig) -> Result<kube::Client> {
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .context("reading the kubeconfig")?;
    kube::Client::try_from(config).context("API client")
}

/// `kubectl proxy` on a free loopback port, with `kubeconfig`'s
/// credentials.
fn kubectl_proxy(kubeconfig: &Path, work: &Path) -> Result<(Proc, String)> {
    let mut command = Command::new("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig).args([
        "proxy",
        "--port",
        "0",
        "--address",
        "127.0.0.1",
    ]);
    start_serving("kubectl-proxy", command, &work.join("kubectl-proxy.log"))
}

/// Creates each of `names` as a Namespace.
async fn create_namespaces(client: &kube::Client, names: &[String]) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
    }
    Ok(())
}

/// A namespace of the run's own on a real cluster.
async fn own_namespace(client: &kube::Client) -> Result<String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let created = namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    generate_name: Some("assetscan-scale-".into()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .context("creating the run's namespace")?;
    created.metadata.name.context("the namespace has no name")
}

/// A kubeconfig for `url`, plain HTTP on loopback, no credentials (the
/// proxy, or `kubectl proxy` behind it, holds them).
fn plain_kubeconfig(url: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: scale\n  cluster: {{server: \"{url}\"}}\n\
         users:\n- name: scale\n  user: {{}}\ncontexts:\n- name: scale\n  context: {{cluster: scale, user: scale, namespace: {namespace}}}\n\
         current-context: scale\n"
    )
}
