//! What the controller tests share: a real redis-server, the provider stubs
//! (loaded with the real fixtures), the Kubernetes API emulator with the
//! checked-in CRD, a config file, in-process controllers started and
//! stopped per test, and operator processes against the same. Plus the
//! invariant checks on the emulator's write history that several tests
//! apply. The shared builders (`kit`) are re-exported.

#![allow(dead_code)]

#[path = "../kit/mod.rs"]
pub mod kit;
pub mod team_channels;
pub mod tenants;

// Not every test file that includes the kit uses all of it.
#[allow(unused_imports)]
pub use kit::{scans::*, setup::*, tickets::*};

use assetscan_operator::cli::config::Config;
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::shard::Shard;
use assetscan_operator::domain::ticket::{Status, Ticket};
use assetscan_operator::kubernetes::channel_access::ChannelPolicy;
use assetscan_operator::kubernetes::controller::{
    self, ConditionType, Context, ControllerSettings,
};
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::pipeline::Pipeline;
use assetscan_operator::providers::{Providers, install_crypto_provider};
use assetscan_operator::store::{AssetKeys, RedisTarget, TicketStore};
use assetscan_operator::telemetry::{LogFormat, Metrics};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
#[allow(unused_imports)]
pub use assetscan_testkit::process::{OperatorCommand, OperatorProcess, free_port};
use assetscan_testkit::redis::{RedisOptions, RedisServer};
use assetscan_testkit::stubs::ProviderStubs;
use assetscan_testkit::wait;
#[allow(unused_imports)]
pub use assetscan_testkit::wait::{until, until_ok, until_some};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const NAMESPACE: &str = "default";
/// The operator's field manager.
pub const OPERATOR: &str = assetscan_operator::kubernetes::controller::FIELD_MANAGER;
/// The lock ttl of the test config: short, so takeovers and LOCKED requeues
/// are quick; the watchdog renews every ttl/3.
pub const LOCK_TTL_MS: u64 = 1500;
/// How long a test waits for the event it is about before it fails: a
/// guard against hangs, not a measure. Tests go on the moment the event
/// happens, so a loaded machine slows them down without failing them.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Redis keeps its data across a restart (append-only file, synced on
    /// every write, so that what Redis acknowledged survives a SIGKILL).
    pub appendonly: bool,
}

pub struct Harness {
    pub redis: RedisServer,
    pub stubs: ProviderStubs,
    pub emu: Emulator,
    pub client: Client,
    pub dir: tempfile::TempDir,
    /// The operator's config file (YAML), without `redis.url`.
    pub config_path: PathBuf,
    pub config: Config,
    /// The namespace the in-process controllers watch (`None`: all).
    pub watched: Option<String>,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Harness {
        install_crypto_provider();
        if std::env::var_os("RUST_LOG").is_some() {
            assetscan_operator::telemetry::init_logging(LogFormat::Text, "info");
        }
        let extra = if options.appendonly {
            vec![("appendfsync".to_owned(), "always".to_owned())]
        } else {
            Vec::new()
        };
        let redis = RedisServer::start_with(RedisOptions {
            appendonly: options.appendonly,
            extra,
            ..RedisOptions::default()
        })
        .expect("redis-server starts");
        let stubs = ProviderStubs::start().await.expect("provider stubs start");
        stubs.serve_examples();
        let emu = Emulator::start(EmulatorOptions {
            crd_dir: Some(repo().join("crds")),
            ..EmulatorOptions::default()
        })
        .await
        .expect("emulator starts");
        let client = emu.client().expect("emulator client");
        let dir = tempfile::Builder::new()
            .prefix("asc-controller-")
            .tempdir()
            .expect("temp dir");
        let config_path = dir.path().join("config.yaml");
        let text = config_yaml(&stubs, dir.path());
        std::fs::write(&config_path, &text).expect("write config");
        let config = Config::parse(&text, &config_path).expect("test config parses");
        Harness {
            redis,
            stubs,
            emu,
            client,
            dir,
            config_path,
            config,
            watched: Some(NAMESPACE.into()),
        }
    }

    pub fn api(&self) -> Api<AssetScan> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// The Redis keys of `asset`.
    pub fn keys(&self, asset: &str) -> AssetKeys {
        layout_of(&self.config, asset)
    }

    /// The test's own view of the ticket store (not used by any controller).
    pub async fn store(&self) -> TicketStore {
        own_store(&self.redis, &self.config).await
    }

    /// Starts a controller in this process with its own store connection,
    /// watchdog, metrics and shutdown token.
    pub async fn controller(&self, instance: &str) -> Running {
        self.controller_on(instance, &RedisTarget::Standalone(self.redis.url()))
            .await
    }

    /// Controllers `instances`, started in that order.
    pub async fn replicas<const N: usize>(&self, instances: [&str; N]) -> [Running; N] {
        let mut running = Vec::with_capacity(N);
        for instance in instances {
            running.push(self.controller(instance).await);
        }
        running
            .try_into()
            .unwrap_or_else(|_| unreachable!("one controller per instance"))
    }

    /// [`Harness::controller`] against another Redis deployment (e.g. a
    /// Sentinel group) than the harness's own server.
    pub async fn controller_on(&self, instance: &str, target: &RedisTarget) -> Running {
        Self::running(self.context_on(instance, target, Shard::ALL).await)
    }

    /// A controller of one shard of the buckets.
    pub async fn sharded(&self, instance: &str, shard: Shard) -> Running {
        let target = RedisTarget::Standalone(self.redis.url());
        Self::running(self.context_on(instance, &target, shard).await)
    }

    fn running((ctx, store): (Arc<Context<Providers>>, TicketStore)) -> Running {
        let task = tokio::spawn(controller::run(ctx.clone()));
        Running {
            metrics: ctx.metrics.clone(),
            shutdown: ctx.shutdown.clone(),
            ctx,
            store,
            task,
        }
    }

    /// What a controller in this process shares between reconciles (its own
    /// store connection, watchdog, metrics and shutdown token), without the
    /// controller loop: for tests that call `reconcile` or `error_policy`
    /// themselves.
    pub async fn context(&self, instance: &str) -> Arc<Context<Providers>> {
        let target = RedisTarget::Standalone(self.redis.url());
        self.context_on(instance, &target, Shard::ALL).await.0
    }

    async fn context_on(
        &self,
        instance: &str,
        target: &RedisTarget,
        shard: Shard,
    ) -> (Arc<Context<Providers>>, TicketStore) {
        let store = TicketStore::connect(target, self.config.store())
            .await
            .expect("controller store connects");
        // Paced as the binary paces them (`run`).
        let providers = Providers::from_config(&self.config.providers)
            .expect("providers build")
            .paced(self.config.scan_starts.quota());
        let team_channels =
            (self.config.team_channel_settings(&providers)).expect("team channel settings");
        let ctx = Arc::new(Context::new(
            self.client.clone(),
            Pipeline::new(store.clone(), providers, self.config.steps.clone()),
            store.doors(),
            Arc::new(Metrics::new()),
            ControllerSettings {
                concurrency: 8,
                shard,
                namespace: self.watched.clone(),
                instance: instance.into(),
                progress_every: self.config.status.progress_every,
                scan_starts: self.config.scan_starts.clone(),
                reports: self.config.reports.clone(),
                events: self.config.events.clone(),
                team_channels,
                channels: ChannelPolicy::new(
                    &self.config.channel_access,
                    self.config.providers.notifications.keys(),
                    self.watched.as_deref(),
                )
                .expect("channel policy"),
            },
            CancellationToken::new(),
        ));
        (ctx, store)
    }

    pub async fn create(&self, scan: &AssetScan) -> AssetScan {
        create_in(&self.api(), scan).await
    }

    /// Polls the object until `done` holds, for up to `timeout`.
    pub async fn wait(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&AssetScan) -> bool,
    ) -> AssetScan {
        wait::object(&self.api(), name, what, timeout, done).await
    }

    /// Waits until the object's status shows `phase`.
    pub async fn wait_phase(&self, name: &str, phase: Status) -> AssetScan {
        let what = phase.to_string();
        self.wait(name, &what, PATIENCE, |o| {
            kit::scans::phase(o) == Some(phase)
        })
        .await
    }

    /// Waits until the object's status shows a terminal phase of its current
    /// generation.
    pub async fn wait_terminal(&self, name: &str, timeout: Duration) -> AssetScan {
        self.wait(name, "terminal", timeout, is_terminal).await
    }

    /// Waits until the object is gone (its finalizer done).
    pub async fn wait_gone(&self, name: &str) {
        wait::gone(&self.api(), name, PATIENCE).await
    }

    /// Marks the scan's asset online in the inventory stub, and builds it.
    pub fn online(&self, scan: ScanBuilder) -> AssetScan {
        online_in(&self.stubs, scan)
    }

    /// Controller `instance`, and `scan` (its asset online) created and
    /// run under it until its status shows `phase`.
    pub async fn run_until(
        &self,
        instance: &str,
        scan: ScanBuilder,
        phase: Status,
    ) -> (Running, AssetScan) {
        let (ctl, name) = self.launch(instance, scan).await;
        (ctl, self.wait_phase(&name, phase).await)
    }

    /// Controller `instance`, and the high-risk scan `name` run under it
    /// until it waits on `held`, whose replies are held in flight: its
    /// status shows the step before.
    pub async fn high_risk_held(
        &self,
        instance: &str,
        name: &str,
        held: Held,
    ) -> (Running, AssetScan) {
        let phase = match held {
            Held::VulnerabilityQuery => {
                self.stubs.osv.faults().hold();
                Status::AssetOnline
            }
            Held::Notification => {
                self.stubs.sink.faults().hold();
                Status::Notifying
            }
        };
        self.run_until(instance, scan(name).high_risk(), phase)
            .await
    }

    /// Controller `instance`, and `scan` (its asset online) created and
    /// run under it to its end.
    pub async fn run_to_end(&self, instance: &str, scan: ScanBuilder) -> (Running, AssetScan) {
        let (ctl, name) = self.launch(instance, scan).await;
        (ctl, self.wait_terminal(&name, PATIENCE).await)
    }

    async fn launch(&self, instance: &str, scan: ScanBuilder) -> (Running, String) {
        let scan = self.online(scan);
        let ctl = self.controller(instance).await;
        self.create(&scan).await;
        (ctl, scan.name_any())
    }

    /// Merges `patch` into the object (its metadata or spec).
    pub async fn merge(&self, name: &str, patch: Value) -> AssetScan {
        self.api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patch {name} with {patch}: {e}"))
    }

    /// Merges `status` into the object's status, as an executor's mirror
    /// would: the API server's answer (the fence's rule applies).
    pub async fn try_merge_status(&self, name: &str, status: Value) -> kube::Result<AssetScan> {
        let patch = json!({ "status": status });
        self.api()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    /// [`Harness::try_merge_status`], accepted.
    pub async fn merge_status(&self, name: &str, status: Value) -> AssetScan {
        self.try_merge_status(name, status.clone())
            .await
            .unwrap_or_else(|e| panic!("status patch {name} with {status}: {e}"))
    }

    /// Changes an annotation of the object: a watch event the controller
    /// reconciles at once, without a new generation (so without a new run).
    /// Used where a test needs a reconcile now rather than at a requeue
    /// time.
    pub async fn poke(&self, name: &str) {
        let now = assetscan_operator::domain::ticket::now_ms().to_string();
        self.annotate(name, json!({ "test.assetscan.io/poke": now }))
            .await;
    }

    /// Sets the object's annotations (merged with what it has).
    pub async fn annotate(&self, name: &str, annotations: Value) -> AssetScan {
        self.merge(name, json!({ "metadata": { "annotations": annotations } }))
            .await
    }

    /// `assetscan-operator run` as a process against this harness, as
    /// replica `instance` with the config file `config`; `more` adds to the
    /// command (a metrics port, a fault drill).
    pub fn operator(
        &self,
        instance: &str,
        config: &Path,
        more: impl FnOnce(OperatorCommand<'_>) -> OperatorCommand<'_>,
    ) -> OperatorProcess {
        let kubeconfig = self.dir.path().join("kubeconfig");
        self.emu.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let log = self.dir.path().join(format!("operator-{instance}.log"));
        let url = self.redis.url();
        let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
        let command = OperatorCommand::new(binary, config, &url, &kubeconfig, instance, NAMESPACE);
        more(command).spawn(&log).expect("operator starts")
    }

    /// The object's status writes (through `/status`), oldest first.
    pub fn status_writes(&self, name: &str) -> Vec<Value> {
        self.status_writes_by(name)
            .into_iter()
            .map(|(_, status)| status)
            .collect()
    }

    /// The object's status writes with their field managers, oldest first.
    pub fn status_writes_by(&self, name: &str) -> Vec<(String, Value)> {
        self.emu
            .history("assetscans", Some(NAMESPACE), name)
            .into_iter()
            .filter(|r| r.subresource.as_deref() == Some("status"))
            .map(|r| {
                (
                    r.field_manager.clone().unwrap_or_default(),
                    r.object["status"].clone(),
                )
            })
            .collect()
    }

    /// The Redis key of the ticket of the run the object's status names.
    pub fn ticket_key(&self, obj: &AssetScan) -> String {
        let run = status(obj).run.as_deref().expect("status.run");
        self.keys(&obj.spec.asset_id).ticket(run)
    }

    /// The ticket the object's status points at, checked to carry its
    /// token and revision.
    pub async fn mirrored_ticket(&self, obj: &AssetScan) -> Ticket {
        let ticket = self.ticket_of(obj).await;
        let s = status(obj);
        assert_eq!(
            (s.fencing_token, s.revision),
            (
                Some(ticket.fencing_token as i64),
                Some(ticket.revision as i64)
            ),
            "{}: the status carries the ticket's token and revision",
            obj.name_any()
        );
        ticket
    }

    /// The idempotency keys the webhook receiver was sent.
    pub fn delivered_keys(&self) -> std::collections::BTreeSet<String> {
        self.stubs
            .sink
            .deliveries()
            .iter()
            .map(|d| d.header("idempotency-key").unwrap().to_owned())
            .collect()
    }

    /// The ticket the object's status points at.
    pub async fn ticket_of(&self, obj: &AssetScan) -> Ticket {
        let status = obj.status.as_ref().expect("status");
        let run = status.run.as_deref().expect("status.run");
        self.store()
            .await
            .get_ticket(&AssetId::new(obj.spec.asset_id.clone()).unwrap(), run)
            .await
            .expect("get ticket")
            .unwrap_or_else(|| panic!("no ticket for {} run {run}", obj.name_any()))
    }
}

/// A controller running in this process.
pub struct Running {
    pub ctx: Arc<Context<Providers>>,
    /// Its own store connection.
    pub store: TicketStore,
    pub metrics: Arc<Metrics>,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<()>,
}

impl Running {
    /// Graceful stop: runs in flight stop and release their locks.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("controller stops within 15 s")
            .expect("controller task did not panic");
    }

    /// Killed: its reconciles (and their leases) are dropped mid-call,
    /// nothing is released.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// The value of one counter sample in the metrics text, 0 when absent.
    pub fn counter(&self, sample: &str) -> f64 {
        metric(&self.metrics.encode(), sample)
    }

    /// Its reconciles so far, whatever their result.
    pub fn reconciles(&self) -> f64 {
        self.metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("assetscan_reconciles_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// A lock holder id of a controller in this process: instance `instance`,
/// eight hex digits of its own, the object `name`
/// (`<instance>#<random>:<namespace>/<name>`).
pub fn assert_holder_id(holder: &str, instance: &str, name: &str) {
    let random = holder
        .strip_prefix(&format!("{instance}#"))
        .and_then(|rest| rest.strip_suffix(&format!(":{NAMESPACE}/{name}")))
        .unwrap_or_else(|| panic!("holder id {holder:?}"));
    assert!(
        random.len() == 8 && random.chars().all(|c| c.is_ascii_hexdigit()),
        "holder id {holder:?}"
    );
}

/// `requeue_after` of an Action, from its Debug form.
pub fn requeue_after(action: &kube::runtime::controller::Action) -> Option<Duration> {
    let text = format!("{action:?}");
    let inner = text.split("Some(").nth(1)?.split(')').next()?;
    let secs = if let Some(ms) = inner.strip_suffix("ms") {
        ms.parse::<f64>().ok()? / 1000.0
    } else {
        inner.strip_suffix('s')?.parse::<f64>().ok()?
    };
    Some(Duration::from_secs_f64(secs))
}

/// Creates `scan` through `api`; the test fails if it cannot.
pub async fn create_in(api: &Api<AssetScan>, scan: &AssetScan) -> AssetScan {
    api.create(&PostParams::default(), scan)
        .await
        .unwrap_or_else(|e| panic!("create {}: {e}", scan.name_any()))
}

/// The provider call a run is held at ([`Harness::high_risk_held`]).
pub enum Held {
    /// The OSV query: the run shows `ASSET_ONLINE`.
    VulnerabilityQuery,
    /// The webhook's delivery: the run shows `NOTIFYING`.
    Notification,
}

/// Waits until `name` of `api` has ended with channels refused: the object
/// as read then, and its `ChannelRefused` condition (status, reason,
/// message).
pub async fn ended_refusing(
    api: &Api<AssetScan>,
    name: &str,
    patience: Duration,
) -> (AssetScan, (String, String, String)) {
    let refused = |o: &AssetScan| condition(o, ConditionType::ChannelRefused);
    let done = wait::object(api, name, "its end, channels refused", patience, |o| {
        is_terminal(o) && refused(o).is_some()
    })
    .await;
    let condition = refused(&done).expect("the condition the wait saw");
    (done, condition)
}

/// The events.k8s.io Events of `namespace` about the object `name`, as
/// listed now.
pub async fn events_about(client: &kube::Client, namespace: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let list = api.list(&ListParams::default()).await.expect("list events");
    (list.items.into_iter())
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

/// Marks the scan's asset online in the inventory stub `stubs`, and builds it.
pub fn online_in(stubs: &ProviderStubs, scan: ScanBuilder) -> AssetScan {
    if let Some(id) = scan.inventory_ref() {
        stubs.inventory.set_online(id, true);
    }
    scan.build()
}

/// The value of the sample line that starts with `sample ` (name and
/// labels exactly as exposed), 0 when absent.
pub fn metric(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The operator's config for the tests: short lock ttl, step timeouts and
/// backoffs; every step written to the status (the tests watch the phases);
/// the providers section from the stubs, with the channel names of
/// `examples/config.yaml` (`secops-webhook`, `secops-wecom`, `secops-slack`);
/// the bridge to 0.1.0's layout on, as an upgraded deployment runs it (every
/// ticket also in the legacy layout the kit's `store()` and `keys()` read).
/// A new install's layout (`auto`, off on a fresh Redis) is what
/// `tests/tenancy.rs`, `tests/identity_bridge.rs`, the e2e scenarios of two
/// namespaces and the chaos run use.
pub fn config_yaml(stubs: &ProviderStubs, dir: &Path) -> String {
    let providers = stubs
        .write_providers_section(dir, "secops-")
        .expect("stub config")
        .replace(
            "online: {inventory:",
            "online: {tcp: {timeout: 1s}, inventory:",
        );
    let steps = steps_yaml([("3s", 3), ("10s", 3), ("10s", 3), ("5s", 4)], "500ms");
    format!(
        "redis: {{timeout: 1s, identityBridge: true}}\n\
         lock: {{ttl: {LOCK_TTL_MS}ms}}\n\
         tickets: {{retention: 1h, auditCap: 10000}}\n\
         status: {{progressEvery: 0s}}\n\
         scanStarts: {{rescanMinInterval: 1s, membershipTtl: 1s}}\n\
         {steps}{providers}"
    )
}

/// The AssetScans of `examples/assetscan-*.yaml`, in file-name order.
pub fn examples() -> Vec<(String, AssetScan)> {
    assetscan_testkit::stubs::example_manifests()
        .expect("examples/")
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let scan: AssetScan = assetscan_operator::yaml::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), scan)
        })
        .collect()
}

/// `(fencingToken, revision)` of a status as JSON.
pub fn fence(status: &Value) -> (i64, i64) {
    (
        status["fencingToken"].as_i64().unwrap_or(-1),
        status["revision"].as_i64().unwrap_or(-1),
    )
}

/// A status without the fields that only carry times, to tell a write that
/// changed something from one that only moved a timestamp.
pub fn without_times(status: &Value) -> Value {
    let mut s = status.clone();
    if let Some(map) = s.as_object_mut() {
        map.remove("nextScanTime");
        map.remove("lastScanTime");
    }
    if let Some(conditions) = s["conditions"].as_array_mut() {
        for c in conditions {
            if let Some(c) = c.as_object_mut() {
                c.remove("lastTransitionTime");
            }
        }
    }
    s
}

/// The invariants of one object's status write history:
/// - `(fencingToken, revision)` never goes backwards;
/// - no write changed only timestamps, and none was a no-op;
/// - the last write is the object's current status.
pub fn check_status_history(harness: &Harness, name: &str, current: &AssetScan) {
    let by = harness.status_writes_by(name);
    let writes: Vec<Value> = by.iter().map(|(_, s)| s.clone()).collect();
    assert!(!writes.is_empty(), "{name}: no status writes");
    for pair in writes.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.get("fencingToken").is_some() {
            assert!(
                fence(b) >= fence(a),
                "{name}: status went backwards: {:?} -> {:?}",
                fence(a),
                fence(b)
            );
        }
    }
    // The operator's own writes (a test's time travel is not churn).
    for pair in by.windows(2) {
        let ((ma, a), (mb, b)) = (&pair[0], &pair[1]);
        if ma != OPERATOR || mb != OPERATOR {
            continue;
        }
        assert_ne!(
            without_times(a),
            without_times(b),
            "{name}: a status write changed nothing but timestamps:\n{a:#}\n->\n{b:#}"
        );
    }
    let last = writes.last().unwrap();
    let stored = serde_json::to_value(current.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        *last, stored,
        "{name}: the last status write is what is stored"
    );
}

/// Every accepted write of the run's ticket — its claim by `acquire` and
/// each `advance` — was mirrored: its `(token, revision)` appears among
/// the status writes, in the same order.
pub async fn check_every_transition_mirrored(harness: &Harness, obj: &AssetScan) {
    check_transitions_mirrored_from(harness, obj, 0).await;
}

/// Like [`check_every_transition_mirrored`], for the writes with a token of
/// at least `min_token` (after Redis lost its data, and the audit with it).
pub async fn check_transitions_mirrored_from(harness: &Harness, obj: &AssetScan, min_token: i64) {
    let name = obj.name_any();
    let status = obj.status.as_ref().unwrap();
    let run = status.run.clone().unwrap();
    let asset = AssetId::new(obj.spec.asset_id.clone()).unwrap();
    // The controller's keys: those of the object's namespace.
    let namespace = obj.namespace().expect("a namespaced object");
    let store = harness.store().await.scoped(&namespace).unwrap();
    let ticket_key = store.keys(&asset).ticket(&run);
    let accepted: Vec<(i64, i64)> = store
        .audit(&asset, 10_000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.get("ticket") == Some(ticket_key.as_str()) && e.accepted())
        .filter(|e| {
            // An acquire that found the run ended claims nothing.
            e.op() == "advance"
                || (e.op() == "acquire" && !matches!(e.get("status"), Some("FINISHED" | "FAILED")))
        })
        .filter_map(|e| {
            Some((
                e.get("token")?.parse().ok()?,
                e.get("revision")?.parse().ok()?,
            ))
        })
        .filter(|(token, _)| *token >= min_token)
        .collect();
    let mut accepted = accepted;
    accepted.dedup();
    let mirrored: Vec<(i64, i64)> = harness
        .status_writes(&name)
        .iter()
        .filter(|s| s["run"].as_str() == Some(run.as_str()))
        .map(fence)
        .filter(|(token, _)| *token >= min_token)
        .collect();
    let mut mirrored = mirrored;
    mirrored.dedup();
    assert_eq!(
        mirrored, accepted,
        "{name}: status writes (left) vs accepted ticket writes (right)"
    );
}

/// `GET http://<addr><path>` with optional extra headers: (status, body).
pub async fn http_get(url: &str, headers: &[(&str, &str)]) -> Result<(u16, String), String> {
    install_crypto_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    let mut request = client.get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|e| e.to_string())?;
    Ok((status, body))
}
