//! The pipeline in process, end to end: a real redis-server, the provider
//! stubs loaded with the real fixtures, the real providers. What the
//! pipeline promises, one test (or table of cases) each:
//! - the three paths (offline, clean, high risk with exactly one delivery);
//! - a crash after each status is resumed by a new runner from the ticket,
//!   and no confirmed step is repeated (the stubs' counters prove it);
//! - a takeover at `NOTIFYING` re-sends under the same idempotency key;
//! - a runner frozen past its lock's ttl makes no provider call on waking;
//! - bad provider replies end in `FAILED` with a clear `last_error`, after
//!   retries with backoff for retryable ones, at once for permanent ones;
//! - threat intel is called exactly as the policy says.
//!
//! The crashes are in process: the run's task is aborted right after the
//! ticket reached a status (nothing released: the lock expires by its ttl).
//! The same with real, killed and stopped processes is in `scan_cli.rs`.

#[path = "../kit/mod.rs"]
mod kit;

use assetscan_operator::cli::config::Config;
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ScanRequest;
use assetscan_operator::domain::ticket::{
    NotificationState, RiskFacts, Status, Step, ThreatIntelFacts, Ticket, VulnFacts,
};
use assetscan_operator::domain::{Package, Policy, ThreatIntelPolicy, Triage};
use assetscan_operator::pipeline::{
    ClaimRecord, Effects, Notification, Observer, Outcome, Pipeline, Resolution, StepError,
};
use assetscan_operator::providers::Providers;
use assetscan_operator::store::{RedisTarget, TicketStore};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::{Fault, ProviderStubs, StubServer};
use kit::tickets::{HIGH_RISK, OFFLINE, own_store, transitions};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const ASSET: &str = "web-01";
/// The lock ttl where a dead holder's lock must still be there when its
/// successor arrives, however slow the machine; the tests expire it by hand.
const LINGERING_TTL: &str = "30s";
const RUN: &str = "r1";

/// A package and the one real OSV record the stub answers for it.
#[derive(Clone, Copy, Debug)]
struct Pkg {
    ecosystem: &'static str,
    name: &'static str,
    version: &'static str,
    record: &'static str,
}

/// `ecosystem/name@version`, answered with `record`.
const fn pkg(coordinates: [&'static str; 3], record: &'static str) -> Pkg {
    let [ecosystem, name, version] = coordinates;
    Pkg {
        ecosystem,
        name,
        version,
        record,
    }
}

/// CVSS 10.0 (CVE-2024-3094, not in KEV).
const XZ: Pkg = pkg(
    ["Ubuntu:22.04:LTS", "xz-utils", "5.6.0-0.1"],
    "UBUNTU-CVE-2024-3094",
);
/// CVSS 8.1 (CVE-2024-6387, not in KEV).
const OPENSSH: Pkg = pkg(
    ["Ubuntu:22.04:LTS", "openssh", "1:8.9p1-3ubuntu0.6"],
    "UBUNTU-CVE-2024-6387",
);
/// CVSS 7.8, CVE-2023-4911 is in the KEV catalog.
const GLIBC: Pkg = pkg(
    ["Ubuntu:22.04:LTS", "glibc", "2.35-0ubuntu3.3"],
    "UBUNTU-CVE-2023-4911",
);
/// CVSS 4.4 (CVE-2024-37891, not in KEV).
const URLLIB3: Pkg = pkg(["PyPI", "urllib3", "2.2.1"], "GHSA-34jh-p97f-mpxf");
/// No CVSS vector (CVE-2024-24791, not in KEV).
const GO_STDLIB: Pkg = pkg(["Go", "stdlib", "1.22.4"], "GO-2024-2963");

/// Redis, the stubs and the operator's config file pointing at both.
struct Env {
    redis: RedisServer,
    stubs: ProviderStubs,
    config: Config,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn start(lock_ttl: &str) -> Env {
        let redis = RedisServer::start().unwrap();
        let stubs = ProviderStubs::start().await.unwrap();
        for p in [XZ, OPENSSH, GLIBC, URLLIB3, GO_STDLIB] {
            stubs
                .osv
                .set_package_vulns(p.ecosystem, p.name, &[p.record]);
        }
        stubs.inventory.set_online(ASSET, true);
        let dir = tempfile::tempdir().unwrap();
        let providers = stubs.write_providers_section(dir.path(), "").unwrap();
        // Small timeouts and backoffs, so that retries are quick to watch.
        let steps = kit::setup::steps_yaml([("1s", 3); 4], "400ms");
        let text = format!(
            "redis: {{url: \"{}\", timeout: 2s}}\nlock: {{ttl: {lock_ttl}}}\n\
             tickets: {{retention: 0s, auditCap: 10000}}\n{steps}{providers}",
            redis.url()
        );
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, text).unwrap();
        let config = Config::load(&path).unwrap();
        Env {
            redis,
            stubs,
            config,
            _dir: dir,
        }
    }

    /// A store of its own (connection and watchdog), as another process has.
    async fn store(&self) -> TicketStore {
        own_store(&self.redis, &self.config).await
    }

    /// Fresh providers: no record cache, no KEV catalog loaded yet.
    fn providers(&self) -> Providers {
        Providers::from_config(&self.config.providers).unwrap()
    }

    /// A runner as a new process would build it.
    async fn pipeline(&self) -> Pipeline<Providers> {
        self.pipeline_and_store().await.0
    }

    /// A pipeline, and its own store connection (its watchdog, its round
    /// trips).
    async fn pipeline_and_store(&self) -> (Pipeline<Providers>, TicketStore) {
        let store = self.store().await;
        let pipeline = Pipeline::new(store.clone(), self.providers(), self.config.steps.clone());
        (pipeline, store)
    }

    fn counters(&self) -> Counters {
        self.stubs.counters()
    }

    /// Makes the asset's lock expire now, as Redis does once a dead
    /// holder's ttl ran out: for the tests about what a successor does, not
    /// about when.
    async fn expire_lock(&self) {
        let lock = self.store().await.keys(&asset()).lock();
        kit::setup::expire_lock(&self.redis, &lock);
    }
}

use assetscan_testkit::stubs::StubCounters as Counters;

fn asset() -> AssetId {
    AssetId::new(ASSET).unwrap()
}

fn package(p: Pkg) -> Package {
    Package::coordinates(p.ecosystem, p.name, p.version).unwrap()
}

fn request(holder: &str, software: &[Pkg], policy: Policy) -> ScanRequest {
    ScanRequest {
        software: software.iter().copied().map(package).collect(),
        policy,
        channels: vec!["webhook".into()],
        ..kit::requests::request(ASSET, RUN, holder)
    }
}

fn policy(threat_intel: ThreatIntelPolicy, cvss_threshold: f64) -> Policy {
    Policy {
        cvss_threshold,
        threat_intel,
        epss_threshold: 0.5,
        min_coverage: None,
    }
}

/// Where a runner "crashes": right after the ticket it matches is recorded.
type CrashAt = Box<dyn Fn(&Ticket) -> bool + Send + Sync>;

/// Records every ticket it is shown, with the time; optionally "crashes"
/// (never returns) right after the ticket matched `crash`.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(Instant, Ticket)>>,
    crash: Option<CrashAt>,
    crashed: tokio::sync::Notify,
}

impl Recorder {
    fn crashing_at(at: impl Fn(&Ticket) -> bool + Send + Sync + 'static) -> Recorder {
        Recorder {
            crash: Some(Box::new(at)),
            ..Recorder::default()
        }
    }

    fn tickets(&self) -> Vec<(Instant, Ticket)> {
        self.seen.lock().unwrap().clone()
    }
}

impl Observer for Recorder {
    /// No AssetScan to record it in: the claimed ticket is recorded as seen.
    async fn record_claim(&self, ticket: &Ticket) -> ClaimRecord {
        self.on_ticket(ticket).await;
        ClaimRecord::NotKept
    }

    async fn on_ticket(&self, ticket: &Ticket) {
        self.seen
            .lock()
            .unwrap()
            .push((Instant::now(), ticket.clone()));
        if self.crash.as_ref().is_some_and(|crash| crash(ticket)) {
            self.crashed.notify_one();
            std::future::pending::<()>().await;
        }
    }
}

/// The providers, with a twist.
struct Twisted {
    inner: Providers,
    twist: Twist,
}

enum Twist {
    /// After a successful delivery the "process" dies before it can record
    /// `NOTIFIED`; the delivery is signalled.
    DiesAfterDelivery(Arc<tokio::sync::Notify>),
    /// The vulnerability query takes two round trips, and the whole process
    /// freezes mid-query: see [`Freeze`].
    FreezesMidStep(Freeze),
}

/// A freeze (a GC pause, a frozen VM) while the second round trip's reply
/// is awaited, until the test thaws it. The reply comes in during the
/// freeze, through a channel rather than a socket so that the order of
/// wake-ups is fixed; the query then goes on with a third round trip.
struct Freeze {
    waiting: Arc<tokio::sync::Notify>,
    reply: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
    thaw: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl Freeze {
    async fn freeze(&self) {
        let reply = self.reply.lock().unwrap().take();
        let thaw = self.thaw.lock().unwrap().take();
        // Everything on this runtime (the runner, its watchdog, its HTTP
        // connections) stands still from the next yield on, until the thaw.
        tokio::spawn(async move {
            if let Some(thaw) = thaw {
                let _ = thaw.recv();
            }
        });
        self.waiting.notify_one();
        if let Some(reply) = reply {
            let _ = reply.await;
        }
    }
}

impl Effects for Twisted {
    async fn check_online(&self, req: &ScanRequest) -> Result<bool, StepError> {
        self.inner.check_online(req).await
    }

    async fn query_vulnerabilities(
        &self,
        req: &ScanRequest,
        triage: &Triage,
    ) -> Result<VulnFacts, StepError> {
        let found = self.inner.query_vulnerabilities(req, triage).await;
        let Twist::FreezesMidStep(freeze) = &self.twist else {
            return found;
        };
        found?;
        freeze.freeze().await;
        self.inner.query_vulnerabilities(req, triage).await
    }

    async fn threat_intel(
        &self,
        req: &ScanRequest,
        vulns: &VulnFacts,
    ) -> Result<ThreatIntelFacts, StepError> {
        self.inner.threat_intel(req, vulns).await
    }

    async fn notify(
        &self,
        channels: &[String],
        notification: &Notification,
    ) -> BTreeMap<String, Result<String, StepError>> {
        let results = self.inner.notify(channels, notification).await;
        let Twist::DiesAfterDelivery(delivered) = &self.twist else {
            return results;
        };
        assert!(results.values().all(Result::is_ok), "{results:?}");
        delivered.notify_one();
        std::future::pending().await
    }
    async fn resolve(
        &self,
        channels: &[String],
        resolution: &Resolution,
    ) -> BTreeMap<String, Result<String, StepError>> {
        self.inner.resolve(channels, resolution).await
    }
}

/// Runs `req` in its own task with its own store and providers until the
/// ticket matches `at`, then aborts the task: a crash right after that write,
/// without release. Returns the last ticket the crashed runner saw.
async fn crash_at(
    env: &Env,
    req: ScanRequest,
    at: impl Fn(&Ticket) -> bool + Send + Sync + 'static,
) -> Ticket {
    let pipeline = env.pipeline().await;
    let recorder = Arc::new(Recorder::crashing_at(at));
    let observer = Arc::clone(&recorder);
    let task = tokio::spawn(async move {
        pipeline
            .run(&req, &*observer, &CancellationToken::new())
            .await
            .map(|outcome| format!("{outcome:?}"))
    });
    if tokio::time::timeout(Duration::from_secs(60), recorder.crashed.notified())
        .await
        .is_err()
    {
        task.abort();
        panic!("crash point never reached; seen {:#?}", recorder.tickets());
    }
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    recorder.tickets().pop().unwrap().1
}

/// Runs until the run is over. Another holder's lock is waited out, as a
/// successor does (the frozen-runner test is about exactly that).
async fn run_to_end<E: Effects>(
    pipeline: &Pipeline<E>,
    req: &ScanRequest,
    observer: &impl Observer,
) -> Ticket {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match pipeline
            .run(req, observer, &CancellationToken::new())
            .await
            .unwrap()
        {
            Outcome::Terminal(ticket) => return ticket,
            Outcome::Locked { retry_after, .. } if Instant::now() < deadline => {
                tokio::time::sleep(retry_after + Duration::from_millis(20)).await;
            }
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}

/// The accepted transitions of the asset's audit stream, in order.
async fn path(store: &TicketStore) -> Vec<(String, String)> {
    store
        .audit(&asset(), 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.op() == "advance" && e.accepted())
        .map(|e| {
            (
                e.get("from").unwrap().to_owned(),
                e.get("to").unwrap().to_owned(),
            )
        })
        .collect()
}

mod paths;

mod resume;

/// Runs `req` on an executor that dies right after its first delivery (the
/// receiver has it, the receipt is never written) and returns the last
/// ticket it saw: `NOTIFYING`, with the intent recorded.
async fn dies_after_delivery(env: &Env, req: ScanRequest) -> Ticket {
    let delivered = Arc::new(tokio::sync::Notify::new());
    let a = Pipeline::new(
        env.store().await,
        Twisted {
            inner: env.providers(),
            twist: Twist::DiesAfterDelivery(Arc::clone(&delivered)),
        },
        env.config.steps.clone(),
    );
    let recorder = Arc::new(Recorder::default());
    let observer = Arc::clone(&recorder);
    let task = tokio::spawn(async move {
        let _ = a.run(&req, &*observer, &CancellationToken::new()).await;
    });
    tokio::time::timeout(Duration::from_secs(5), delivered.notified())
        .await
        .expect("A delivers");
    task.abort();
    let _ = task.await;
    recorder.tickets().pop().unwrap().1
}

/// A takeover at `NOTIFYING` re-sends to the chat channels too: there it is
/// a second message, marked as a re-send with the time of the first
/// attempt (the intent's), while the first message carries no mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_messages_resent_by_a_takeover_are_marked_with_the_first_attempt() {
    let env = Env::start(LINGERING_TTL).await;
    let chat = |holder: &str| {
        let mut req = request(holder, &[XZ], Policy::default());
        req.channels = vec!["webhook".into(), "wecom".into(), "slack".into()];
        req
    };
    let a_ticket = dies_after_delivery(&env, chat("A")).await;
    let first_ms = a_ticket.facts.notification.as_ref().unwrap().attempted_at;
    let first_ms = first_ms.expect("the intent records the first attempt's time");
    let first = k8s_openapi::jiff::Timestamp::from_millisecond(first_ms as i64).unwrap();
    let mark = format!("re-sent: may repeat the message first attempted at {first:.0}");

    env.expire_lock().await;
    let b = env.pipeline().await;
    let done = run_to_end(&b, &chat("B"), &()).await;
    assert_eq!(done.status, Status::Finished);

    let slack: Vec<String> = env
        .stubs
        .slack
        .messages()
        .iter()
        .map(|m| m.to_string())
        .collect();
    let wecom = env.stubs.wecom.messages();
    assert_eq!(
        (slack.len(), wecom.len()),
        (2, 2),
        "one message each, then the re-send"
    );
    for (channel, [first_message, resent]) in [
        ("slack", [&slack[0], &slack[1]]),
        ("wecom", [&wecom[0], &wecom[1]]),
    ] {
        assert!(
            !first_message.contains("re-sent"),
            "{channel}: {first_message}"
        );
        assert!(resent.contains(&mark), "{channel}: {resent} lacks {mark}");
        assert!(resent.contains("web-01/r1"), "{channel}: {resent}");
    }
    // The webhook's repeat stays the same body under the same key.
    let deliveries = env.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 2);
    assert!(!String::from_utf8_lossy(&deliveries[1].body).contains("re-sent"));
}

mod stall;

mod bad_replies;

/// A confirmed high risk is never given up for a passing outage of a
/// channel, and a channel that confirmed is not sent to again.
mod notification_retries;

/// The claim must be recorded (the controller: in the CR status) before any
/// provider call, so that every token handed out is known outside Redis.
mod claim;

mod threat_intel;
