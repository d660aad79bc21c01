//! What the controller tests share: a real redis-server, the provider stubs
//! (loaded with the real fixtures), the Kubernetes API emulator with the
//! checked-in CRD, a config file, and in-process controllers started and
//! stopped per test. Plus the invariant checks on the emulator's write
//! history that several tests apply.

#![allow(dead_code)]

pub mod process;

use assetscan_operator::config::Config;
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::Ticket;
use assetscan_operator::kubernetes::controller::{self, Context, ControllerSettings};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanSpec, Package, Target};
use assetscan_operator::pipeline::Pipeline;
use assetscan_operator::providers::{Providers, install_crypto_provider};
use assetscan_operator::store::{RedisTarget, TicketStore};
use assetscan_operator::telemetry::{LogFormat, Metrics};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::redis::{RedisOptions, RedisServer};
use assetscan_testkit::stubs::ProviderStubs;
#[allow(unused_imports)] // Not every test file that includes the kit waits.
pub use assetscan_testkit::wait::until;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;
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
        }
    }

    pub fn api(&self) -> Api<AssetScan> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// The test's own view of the ticket store (not used by any controller).
    pub async fn store(&self) -> TicketStore {
        TicketStore::connect(
            &RedisTarget::Standalone(self.redis.url()),
            self.config.store(),
        )
        .await
        .expect("store connects")
    }

    /// Starts a controller in this process with its own store connection,
    /// watchdog, metrics and shutdown token.
    pub async fn controller(&self, instance: &str) -> Running {
        self.controller_on(instance, &RedisTarget::Standalone(self.redis.url()))
            .await
    }

    /// [`Harness::controller`] against another Redis deployment (e.g. a
    /// Sentinel group) than the harness's own server.
    pub async fn controller_on(&self, instance: &str, target: &RedisTarget) -> Running {
        let ctx = self.context_on(instance, target).await;
        let task = tokio::spawn(controller::run(ctx.clone()));
        Running {
            metrics: ctx.metrics.clone(),
            shutdown: ctx.shutdown.clone(),
            ctx,
            task,
        }
    }

    /// What a controller in this process shares between reconciles (its own
    /// store connection, watchdog, metrics and shutdown token), without the
    /// controller loop: for tests that call `reconcile` or `error_policy`
    /// themselves.
    pub async fn context(&self, instance: &str) -> Arc<Context<Providers>> {
        self.context_on(instance, &RedisTarget::Standalone(self.redis.url()))
            .await
    }

    async fn context_on(&self, instance: &str, target: &RedisTarget) -> Arc<Context<Providers>> {
        let store = TicketStore::connect(target, self.config.store())
            .await
            .expect("controller store connects");
        let providers = Providers::from_config(&self.config.providers).expect("providers build");
        Arc::new(Context::new(
            self.client.clone(),
            Pipeline::new(store, providers, self.config.steps.clone()),
            Arc::new(Metrics::new()),
            ControllerSettings {
                concurrency: 8,
                shard: None,
                namespace: Some(NAMESPACE.into()),
                instance: instance.into(),
                progress_every: self.config.status.progress_every,
            },
            CancellationToken::new(),
        ))
    }

    pub async fn create(&self, scan: &AssetScan) -> AssetScan {
        self.api()
            .create(&PostParams::default(), scan)
            .await
            .unwrap_or_else(|e| panic!("create {}: {e}", scan.name_any()))
    }

    /// Polls the object until `done` holds, for up to `timeout`.
    pub async fn wait(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&AssetScan) -> bool,
    ) -> AssetScan {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let obj = self.api().get_opt(name).await.ok().flatten();
            if let Some(obj) = &obj
                && done(obj)
            {
                return obj.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {name} to be {what}; last seen: {:#?}",
                obj.map(|o| o.status)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Changes an annotation of the object: a watch event the controller
    /// reconciles at once, without a new generation (so without a new run).
    /// Used where a test needs a reconcile now rather than at a requeue
    /// time.
    pub async fn poke(&self, name: &str) {
        let patch = serde_json::json!({"metadata": {"annotations": {
            "test.assetscan.io/poke": assetscan_operator::domain::ticket::now_ms().to_string()
        }}});
        self.api()
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .unwrap_or_else(|e| panic!("poke {name}: {e}"));
    }

    /// Waits until the object's status shows a terminal phase of its current
    /// generation.
    pub async fn wait_terminal(&self, name: &str, timeout: Duration) -> AssetScan {
        self.wait(name, "terminal", timeout, |o| {
            o.status.as_ref().is_some_and(|s| {
                s.phase.is_some_and(|p| p.is_terminal())
                    && s.observed_generation == o.metadata.generation
            })
        })
        .await
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

    /// The value of one counter sample in the metrics text, 0 when absent.
    pub fn counter(&self, sample: &str) -> f64 {
        metric(&self.metrics.encode(), sample)
    }
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
/// `examples/config.yaml` (`secops-webhook`, `secops-wecom`, `secops-slack`).
pub fn config_yaml(stubs: &ProviderStubs, dir: &Path) -> String {
    let providers = stubs
        .write_providers_section(dir, "secops-")
        .expect("stub config")
        .replace(
            "online: {inventory:",
            "online: {tcp: {timeout: 1s}, inventory:",
        );
    format!(
        "redis: {{timeout: 1s}}\n\
         lock: {{ttl: {LOCK_TTL_MS}ms}}\n\
         tickets: {{retention: 1h, auditCap: 10000}}\n\
         status: {{progressEvery: 0s}}\n\
         steps:\n\
         \x20 onlineCheck: {{timeout: 3s, maxAttempts: 3, initialBackoff: 100ms, maxBackoff: 500ms}}\n\
         \x20 vulnQuery: {{timeout: 10s, maxAttempts: 3, initialBackoff: 100ms, maxBackoff: 500ms}}\n\
         \x20 threatIntel: {{timeout: 10s, maxAttempts: 3, initialBackoff: 100ms, maxBackoff: 500ms}}\n\
         \x20 notify: {{timeout: 5s, maxAttempts: 4, initialBackoff: 100ms, maxBackoff: 500ms}}\n\
         {providers}"
    )
}

/// The AssetScans of `examples/assetscan-*.yaml`, in file-name order.
pub fn examples() -> Vec<(String, AssetScan)> {
    assetscan_testkit::stubs::example_manifests()
        .expect("examples/")
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let scan: AssetScan =
                serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), scan)
        })
        .collect()
}

/// An AssetScan of `asset` checked through the inventory. With `high_risk`,
/// it has the Debian 10 packages the OSV stub maps to critical findings
/// and notifies `secops-webhook`; otherwise no packages (no findings).
pub fn scan(name: &str, asset: &str, high_risk: bool) -> AssetScan {
    let package = |name: &str, version: &str| Package {
        name: Some(name.into()),
        ecosystem: Some("Debian:10".into()),
        version: Some(version.into()),
        purl: None,
    };
    AssetScan::new(
        name,
        AssetScanSpec {
            asset_id: asset.into(),
            target: Target {
                inventory_ref: Some(asset.into()),
                ..Target::default()
            },
            software: if high_risk {
                vec![
                    package("openssh", "1:7.9p1-10+deb10u2"),
                    package("xz-utils", "5.2.4-1+deb10u1"),
                ]
            } else {
                vec![]
            },
            policy: Default::default(),
            notify: vec!["secops-webhook".into()],
            rescan_interval: None,
            suspend: false,
            report_history_limit: None,
        },
    )
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
    let store = harness.store().await;
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

/// A free TCP port on the loopback interface.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
