//! What one scenario runs against, on either backend: the API server (an
//! emulator of its own, or the prepared cluster's namespace), a real
//! redis-server, the provider stubs, and `assetscan-operator run`
//! processes with the operator's credentials.

use crate::backend::Backend;
use crate::controller_kit::kit::scans::ScanBuilder;
use crate::controller_kit::kit::tickets::asset_id;
use crate::controller_kit::{config_yaml, create_in, metric};
use assetscan_operator::config::Config;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport};
use assetscan_operator::providers::install_crypto_provider;
use assetscan_operator::store::{AssetKeys, AuditEntry, RedisTarget, TicketStore};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::process::{OperatorCommand, OperatorProcess, free_port};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use assetscan_testkit::wait;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
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
    operator_kubeconfig: PathBuf,
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
        let (emulator, namespace, admin, operator_client, operator_kubeconfig) = match backend {
            Backend::Emulator => {
                let emu = Emulator::start(EmulatorOptions {
                    crd_dir: Some(assetscan_testkit::tools::repo().join("crds")),
                    namespaces: vec![EMULATOR_NAMESPACE.into()],
                    ..EmulatorOptions::default()
                })
                .await
                .expect("emulator starts");
                let kubeconfig = dir.path().join("kubeconfig");
                emu.write_kubeconfig(&kubeconfig).expect("kubeconfig");
                let client = emu.client().expect("emulator client");
                let ns = EMULATOR_NAMESPACE.to_owned();
                (Some(emu), ns, client.clone(), client, kubeconfig)
            }
            Backend::Cluster(p) => {
                let (admin, operator) = (p.admin.clone(), p.operator.clone());
                let kubeconfig = p.operator_kubeconfig.clone();
                (None, p.namespace.clone(), admin, operator, kubeconfig)
            }
        };
        Stack {
            backend: backend.clone(),
            namespace,
            admin,
            operator_client,
            operator_kubeconfig,
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
        let log = self.dir.path().join(format!("operator-{instance}.log"));
        let url = self.redis.url();
        let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
        let command = OperatorCommand::new(
            binary,
            &self.config_path,
            &url,
            &self.operator_kubeconfig,
            instance,
            &self.namespace,
        )
        .metrics_port(free_port());
        more(command).spawn(&log).expect("operator starts")
    }

    /// Marks the scan's asset online in the inventory stub, and builds it.
    pub fn online(&self, scan: ScanBuilder) -> AssetScan {
        if let Some(id) = scan.inventory_ref() {
            self.stubs.inventory.set_online(id, true);
        }
        scan.build()
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

    pub fn keys(&self, asset: &str) -> AssetKeys {
        AssetKeys::new(&self.config.store().prefix, &asset_id(asset))
    }

    /// The scenario's own view of the ticket store.
    pub async fn store(&self) -> TicketStore {
        TicketStore::connect(
            &RedisTarget::Standalone(self.redis.url()),
            self.config.store(),
        )
        .await
        .expect("store connects")
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
