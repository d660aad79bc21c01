//! What one scenario runs against, on either backend: the API server (an
//! emulator of its own, or the prepared cluster's namespace), a real
//! redis-server, the provider stubs, and `assetscan-operator run`
//! processes with the operator's credentials.

use crate::backend::Backend;
use crate::cluster::{self, Ledger, Prepared};
use crate::controller_kit::kit::scans::ScanBuilder;
use crate::controller_kit::kit::tickets::{asset_id, layout_of, own_store};
use crate::controller_kit::{config_yaml, create_in, metric, online_in};
use assetscan_operator::cli::config::Config;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport};
use assetscan_operator::providers::install_crypto_provider;
use assetscan_operator::store::{AssetKeys, AuditEntry, TicketStore};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::process::{OperatorCommand, OperatorProcess, free_port};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use assetscan_testkit::wait;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::config::Kubeconfig;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The namespace of an emulator's scenario (a cluster's is the run's own).
const EMULATOR_NAMESPACE: &str = "assetscan-e2e";

pub struct Stack {
    pub backend: Backend,
    pub namespace: String,
    /// The user's client: creates, edits and deletes AssetScans.
    pub admin: Client,
    /// The operator's credentials (on a cluster, the chart's Role).
    pub operator_client: Client,
    access: Access,
    pub redis: RedisServer,
    pub stubs: ProviderStubs,
    pub config: Config,
    config_path: PathBuf,
    dir: tempfile::TempDir,
    /// Kept alive for the scenario (emulator backend only).
    _emulator: Option<Emulator>,
}

impl Stack {
    pub async fn start(backend: &Backend) -> Stack {
        install_crypto_provider();
        let redis = RedisServer::start().expect("redis-server starts");
        let stubs = ProviderStubs::start().await.expect("provider stubs start");
        stubs.serve_examples();
        let dir = tempfile::Builder::new()
            .prefix("asc-e2e-")
            .tempdir()
            .expect("temp dir");
        let config_path = dir.path().join("config.yaml");
        // The scenarios watch both replicas decide every object (the fence
        // between two executors is their point): no membership, so that
        // neither leaves an object to the other (tests/shares.rs covers the
        // shares).
        let kit = config_yaml(&stubs, dir.path());
        assert!(kit.contains("membershipTtl: 1s"), "{kit}");
        let text = kit.replacen("membershipTtl: 1s", "membershipTtl: 0s", 1);
        std::fs::write(&config_path, &text).expect("write config");
        let config = Config::parse(&text, &config_path).expect("the config parses");
        let (emulator, server) = match backend {
            Backend::Emulator => {
                let (emulator, server) = Server::emulator(dir.path()).await;
                (Some(emulator), server)
            }
            Backend::Cluster(p) => (None, Server::cluster(p)),
        };
        Stack {
            backend: backend.clone(),
            namespace: server.namespace,
            admin: server.admin,
            operator_client: server.operator_client,
            access: server.access,
            redis,
            stubs,
            config,
            config_path,
            dir,
            _emulator: emulator,
        }
    }

    pub fn patience(&self) -> Duration {
        self.backend.patience()
    }

    pub fn api(&self) -> Api<AssetScan> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }

    pub fn reports(&self) -> Api<AssetScanReport> {
        Api::namespaced(self.admin.clone(), &self.namespace)
    }

    /// `assetscan-operator run` as replica `instance`, watching the
    /// scenario's namespace with the operator's credentials, its metrics
    /// and probes on a port of its own; `more` adds to the command.
    pub fn operator(
        &self,
        instance: &str,
        more: impl FnOnce(OperatorCommand<'_>) -> OperatorCommand<'_>,
    ) -> OperatorProcess {
        self.spawn(instance, &self.access.operator_kubeconfig, more)
    }

    /// `assetscan-operator run` as replica `instance` of the chart's
    /// cluster-wide install: every namespace watched, with its
    /// ServiceAccount's credentials.
    pub fn operator_of_all(&self, install: &ClusterWide, instance: &str) -> OperatorProcess {
        self.spawn(instance, &install.kubeconfig, |c| c.all_namespaces())
    }

    fn spawn(
        &self,
        instance: &str,
        kubeconfig: &Path,
        more: impl FnOnce(OperatorCommand<'_>) -> OperatorCommand<'_>,
    ) -> OperatorProcess {
        let log = self.dir.path().join(format!("operator-{instance}.log"));
        let url = self.redis.url();
        let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
        let command = OperatorCommand::new(
            binary,
            &self.config_path,
            &url,
            kubeconfig,
            instance,
            &self.namespace,
        )
        .metrics_port(free_port());
        more(command).spawn(&log).expect("operator starts")
    }

    /// The operator's config file edited by `edit` (for the processes
    /// started after), and the scenario's view of it.
    pub fn edit_config(&mut self, edit: impl FnOnce(&str) -> String) {
        let text = std::fs::read_to_string(&self.config_path).expect("read config");
        let text = edit(&text);
        std::fs::write(&self.config_path, &text).expect("write config");
        self.config = Config::parse(&text, &self.config_path).expect("the config parses");
    }

    /// A second namespace, and the chart installed for every namespace
    /// (`cluster::install_cluster_wide`), which the backend's authorizer
    /// lets make the operator's calls in both; all of it recorded for
    /// removal.
    pub async fn cluster_wide(&self) -> ClusterWide {
        self.cluster_wide_with(&[]).await
    }

    /// [`Stack::cluster_wide`] with more of the chart's flags (`--set …`).
    pub async fn cluster_wide_with(&self, chart: &[&str]) -> ClusterWide {
        let second = cluster::create_namespace(&self.admin, &self.access.ledger)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let kubeconfig = self.dir.path().join("cluster-wide.kubeconfig");
        cluster::install_cluster_wide(
            &self.admin,
            &self.access.kubeconfig,
            &self.access.ledger,
            &self.namespace,
            &[&self.namespace, &second],
            chart,
            &kubeconfig,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        ClusterWide { second, kubeconfig }
    }

    /// Marks the scan's asset online in the inventory stub, and builds it.
    pub fn online(&self, scan: ScanBuilder) -> AssetScan {
        online_in(&self.stubs, scan)
    }

    pub async fn create(&self, scan: &AssetScan) -> AssetScan {
        create_in(&self.api(), scan).await
    }

    /// Polls the object until `done` holds.
    pub async fn wait(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&AssetScan) -> bool,
    ) -> AssetScan {
        wait::object(&self.api(), name, what, self.patience(), done).await
    }

    pub async fn wait_gone(&self, name: &str) {
        wait::gone(&self.api(), name, self.patience()).await
    }

    /// Merges `patch` into the object (metadata or spec), as a user.
    pub async fn merge(&self, name: &str, patch: Value) -> AssetScan {
        self.api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {name} with {patch}: {e}"))
    }

    pub async fn annotate(&self, name: &str, annotations: Value) -> AssetScan {
        self.merge(name, json!({ "metadata": { "annotations": annotations } }))
            .await
    }

    /// A watch event without a new generation: a reconcile now.
    pub async fn poke(&self, name: &str) {
        let now = assetscan_operator::domain::ticket::now_ms().to_string();
        self.annotate(name, json!({ "test.assetscan.io/poke": now }))
            .await;
    }

    /// Merges `status` into the object's status as the user (time travel
    /// under the same fence, which the CRD's rules allow).
    pub async fn merge_status_as_user(&self, name: &str, status: Value) -> AssetScan {
        let patch = json!({ "status": status });
        self.api()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("status patch {name} with {patch}: {e}"))
    }

    /// Merges `status` into the object's status with the operator's
    /// credentials: what an executor's mirror sends.
    pub async fn try_merge_status_as_operator(
        &self,
        name: &str,
        status: Value,
    ) -> kube::Result<AssetScan> {
        let api: Api<AssetScan> = Api::namespaced(self.operator_client.clone(), &self.namespace);
        let patch = json!({ "status": status });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    /// The Redis keys of `asset`.
    pub fn keys(&self, asset: &str) -> AssetKeys {
        layout_of(&self.config, asset)
    }

    /// The test's own view of the ticket store (not used by any controller).
    pub async fn store(&self) -> TicketStore {
        own_store(&self.redis, &self.config).await
    }

    /// The runs whose tickets Redis holds for `asset`.
    pub async fn runs(&self, asset: &str) -> BTreeSet<String> {
        let runs = self
            .store()
            .await
            .runs(&asset_id(asset))
            .await
            .expect("runs");
        runs.into_iter().collect()
    }

    pub async fn audit(&self, asset: &str) -> Vec<AuditEntry> {
        self.store()
            .await
            .audit(&asset_id(asset), 10_000)
            .await
            .expect("audit")
    }

    /// The idempotency keys the webhook receiver was sent.
    pub fn delivered_keys(&self) -> BTreeSet<String> {
        let deliveries = self.stubs.sink.deliveries();
        deliveries
            .iter()
            .filter_map(|d| d.header("idempotency-key").map(str::to_owned))
            .collect()
    }
}

/// The scenario's API server, as the user and as the operator.
struct Server {
    namespace: String,
    admin: Client,
    operator_client: Client,
    access: Access,
}

/// What operator processes and more ServiceAccounts are set up with.
struct Access {
    /// The operator's credentials, for its processes.
    operator_kubeconfig: PathBuf,
    /// The user's kubeconfig, for more ServiceAccounts' tokens.
    kubeconfig: Kubeconfig,
    /// Where what the scenario creates beyond its namespace is recorded for
    /// removal: the run's ledger on a cluster, the scenario's own on the
    /// emulator (which goes with it).
    ledger: Arc<Mutex<Ledger>>,
}

impl Server {
    /// An emulator of the scenario's own, its kubeconfig written in `dir`;
    /// the user's credentials serve as the operator's.
    async fn emulator(dir: &Path) -> (Emulator, Server) {
        let emu = Emulator::start(EmulatorOptions {
            crd_dir: Some(assetscan_testkit::tools::repo().join("crds")),
            namespaces: vec![EMULATOR_NAMESPACE.into()],
            ..EmulatorOptions::default()
        })
        .await
        .expect("emulator starts");
        let path = dir.join("kubeconfig");
        emu.write_kubeconfig(&path).expect("kubeconfig");
        let client = emu.client().expect("emulator client");
        let server = Server {
            namespace: EMULATOR_NAMESPACE.to_owned(),
            admin: client.clone(),
            operator_client: client,
            access: Access {
                kubeconfig: Kubeconfig::read_from(&path).expect("read the kubeconfig"),
                operator_kubeconfig: path,
                ledger: Arc::default(),
            },
        };
        (emu, server)
    }

    /// The prepared cluster's namespace, credentials and ledger.
    fn cluster(p: &Prepared) -> Server {
        Server {
            namespace: p.namespace.clone(),
            admin: p.admin.clone(),
            operator_client: p.operator.clone(),
            access: Access {
                operator_kubeconfig: p.operator_kubeconfig.clone(),
                kubeconfig: p.kubeconfig.clone(),
                ledger: p.ledger.clone(),
            },
        }
    }
}

/// The chart's cluster-wide install ([`Stack::cluster_wide`]).
pub struct ClusterWide {
    /// The namespace created beside the scenario's.
    pub second: String,
    /// A token of its ServiceAccount, for the scenario's API server.
    kubeconfig: PathBuf,
}

/// One sample of a process's `/metrics`, 0 when absent; with `sample`
/// ending in `{`, the sum over that metric's label sets.
pub async fn metric_of(op: &OperatorProcess, sample: &str) -> f64 {
    let text = match op.get("/metrics").await {
        Ok((200, text)) => text,
        other => panic!("{}: /metrics: {other:?}\n{}", op.instance(), op.log()),
    };
    if sample.ends_with('{') {
        return text
            .lines()
            .filter(|l| l.starts_with(sample))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
    }
    metric(&text, sample)
}
