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

mod kit;

use assetscan_operator::cli::config::Config;
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ScanRequest;
use assetscan_operator::domain::ticket::{
    NotificationState, RiskFacts, Status, Step, ThreatIntelFacts, Ticket, VulnFacts,
};
use assetscan_operator::domain::{
    Package, Policy, Target, ThreatIntelPolicy, Triage, TriageRequest,
};
use assetscan_operator::pipeline::{
    ClaimRecord, Effects, Notification, Observer, Outcome, Pipeline, StepError,
};
use assetscan_operator::providers::Providers;
use assetscan_operator::store::{RedisTarget, TicketStore};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::{Fault, ProviderStubs, StubServer};
use kit::tickets::{HIGH_RISK, OFFLINE, transitions};
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
        TicketStore::connect(
            &RedisTarget::Standalone(self.redis.url()),
            self.config.store(),
        )
        .await
        .unwrap()
    }

    /// Fresh providers: no record cache, no KEV catalog loaded yet.
    fn providers(&self) -> Providers {
        Providers::from_config(&self.config.providers).unwrap()
    }

    /// A runner as a new process would build it.
    async fn pipeline(&self) -> Pipeline<Providers> {
        Pipeline::new(
            self.store().await,
            self.providers(),
            self.config.steps.clone(),
        )
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
        asset: asset(),
        run: RUN.into(),
        target: Target::Inventory { id: ASSET.into() },
        software: software.iter().copied().map(package).collect(),
        sbom: None,
        policy,
        channels: vec!["webhook".into()],
        token_floor: 0,
        holder: holder.into(),
        owner: None,
        supersedes: None,
        expect_open: false,
        origin: None,
        triage: TriageRequest::default(),
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

mod paths {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_offline_asset_finishes_without_a_vulnerability_query() {
        let env = Env::start("5s").await;
        env.stubs.inventory.set_online(ASSET, false);
        let req = request("A", &[XZ], Policy::default());
        let recorder = Recorder::default();
        let ticket = run_to_end(&env.pipeline().await, &req, &recorder).await;

        assert_eq!(ticket.status, Status::Finished);
        assert_eq!(ticket.facts.online, Some(false));
        assert_eq!(ticket.completed_steps, [Step::OnlineCheck]);
        assert_eq!(ticket.facts.vulnerabilities, None);
        assert_eq!(
            env.counters(),
            Counters {
                inventory: 1,
                ..Counters::default()
            }
        );
        let store = env.store().await;
        assert_eq!(path(&store).await, transitions(&OFFLINE));
        let statuses: Vec<Status> = recorder.tickets().iter().map(|(_, t)| t.status).collect();
        assert_eq!(
            statuses,
            [Status::Init, Status::AssetOffline, Status::Finished]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_online_asset_without_high_risk_finishes_without_notifying() {
        let env = Env::start("5s").await;
        // CVSS 4.4, not in KEV, no EPSS score: intel is asked and finds nothing.
        let req = request("A", &[URLLIB3], Policy::default());
        let ticket = run_to_end(&env.pipeline().await, &req, &()).await;

        assert_eq!(ticket.status, Status::Finished);
        assert_eq!(ticket.facts.online, Some(true));
        let vulns = ticket.facts.vulnerabilities.as_ref().unwrap();
        assert_eq!(vulns.total, 1);
        assert_eq!(vulns.max_cvss, Some(4.4));
        assert_eq!(
            ticket.facts.risk,
            Some(RiskFacts {
                high_risk: false,
                reasons: vec![],
                confirmed_at: None,
            })
        );
        assert_eq!(ticket.facts.notification, None);
        assert_eq!(ticket.last_error, None);
        let c = env.counters();
        assert_eq!((c.deliveries, c.effects), (0, 0), "nobody is told");
        assert_eq!((c.inventory, c.querybatch, c.records), (1, 1, 1));
        let clean = [Status::AssetOnline, Status::VulnCheckDone, Status::Finished];
        assert_eq!(path(&env.store().await).await, transitions(&clean));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn high_risk_is_notified_exactly_once_then_finished() {
        let env = Env::start("5s").await;
        let req = request("A", &[XZ], Policy::default());
        let ticket = run_to_end(&env.pipeline().await, &req, &()).await;

        assert_eq!(ticket.status, Status::Finished);
        let risk = ticket.facts.risk.as_ref().unwrap();
        assert!(risk.high_risk);
        assert_eq!(
            risk.reasons,
            ["UBUNTU-CVE-2024-3094 (CVE-2024-3094) CVSS 10.0 >= 7.0"]
        );
        let notification = ticket.facts.notification.as_ref().unwrap();
        assert_eq!(notification.idempotency_key, "web-01/r1");
        assert_eq!(notification.state, NotificationState::Sent);
        assert!(notification.sent_at.is_some());
        assert!(notification.receipt["webhook"].starts_with("HTTP 200"));
        assert_eq!(
            ticket.completed_steps,
            [Step::OnlineCheck, Step::VulnQuery, Step::Notify]
        );

        let deliveries = env.stubs.sink.deliveries();
        assert_eq!(deliveries.len(), 1);
        assert_eq!(env.stubs.sink.effects(), 1);
        assert_eq!(env.stubs.sink.rejected(), 0, "signed and keyed");
        let d = &deliveries[0];
        assert_eq!(d.header("Idempotency-Key"), Some("web-01/r1"));
        let token = ticket.fencing_token.to_string();
        assert_eq!(d.header("X-AssetScan-Fencing-Token"), Some(token.as_str()));
        assert_eq!(d.json()["ticket_id"], "web-01/r1");
        assert_eq!(d.json()["risk"]["high_risk"], true);
        // CVSS alone decides: no threat intel.
        assert_eq!((env.counters().kev, env.counters().epss), (0, 0));

        assert_eq!(path(&env.store().await).await, transitions(&HIGH_RISK));
        // One acquire, one release, nothing rejected.
        let audit = env.store().await.audit(&asset(), 1000).await.unwrap();
        assert!(audit.iter().all(|e| e.accepted()), "{audit:#?}");
        let ops: Vec<&str> = audit.iter().map(|e| e.op()).collect();
        assert_eq!(ops.first(), Some(&"acquire"));
        assert_eq!(ops.last(), Some(&"release"));
    }
}

mod resume {
    use super::*;

    type CrashPoint = (&'static str, fn(&Ticket) -> bool);

    /// After every status the run can be at, in turn.
    const CRASH_POINTS: &[CrashPoint] = &[
        ("INIT (claimed)", |t| t.status == Status::Init),
        ("ASSET_ONLINE", |t| t.status == Status::AssetOnline),
        // Threat intel is recorded with the verdict (HIGH_RISK_FOUND): no
        // status lies between them.
        ("VULN_CHECK_DONE (vulnerabilities)", |t| {
            t.status == Status::VulnCheckDone && !t.has_completed(Step::ThreatIntel)
        }),
        ("HIGH_RISK_FOUND", |t| t.status == Status::HighRiskFound),
        ("NOTIFYING", |t| t.status == Status::Notifying),
        ("NOTIFIED", |t| t.status == Status::Notified),
    ];

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crash_after_each_status_is_resumed_without_repeating_a_confirmed_step() {
        for (name, at) in CRASH_POINTS {
            // glibc: CVSS 7.8 < 9.0, so threat intel runs; KEV lists
            // CVE-2023-4911, so the asset is high risk: every status is visited.
            let env = Env::start(LINGERING_TTL).await;
            let policy = policy(ThreatIntelPolicy::WhenNeeded, 9.0);
            // Built before the crash: building providers takes longer than
            // the lock's ttl on a loaded machine.
            let b = env.pipeline().await;
            let crashed = crash_at(&env, request("A", &[GLIBC], policy), *at).await;
            assert!(at(&crashed), "{name}");

            let req = request("B", &[GLIBC], policy);
            // The crashed runner did not release: its lock holds until the ttl.
            match b.run(&req, &(), &CancellationToken::new()).await.unwrap() {
                Outcome::Locked { holder, .. } => assert_eq!(holder, "A", "{name}"),
                other => panic!("{name}: expected Locked, got {other:?}"),
            }
            env.expire_lock().await;
            let done = run_to_end(&b, &req, &()).await;

            assert_eq!(done.status, Status::Finished, "{name}");
            assert!(done.fencing_token > crashed.fencing_token, "{name}");
            assert_eq!(done.holder.as_deref(), Some("B"), "{name}");
            assert_eq!(
                done.completed_steps,
                [
                    Step::OnlineCheck,
                    Step::VulnQuery,
                    Step::ThreatIntel,
                    Step::Notify
                ],
                "{name}"
            );
            assert_eq!(
                done.attempts,
                BTreeMap::from([
                    (Step::OnlineCheck, 1),
                    (Step::VulnQuery, 1),
                    (Step::ThreatIntel, 1),
                    (Step::Notify, 1)
                ]),
                "{name}"
            );
            let risk = done.facts.risk.as_ref().unwrap();
            assert!(risk.high_risk, "{name}");
            assert!(
                risk.reasons[0].contains("CVE-2023-4911 is listed as known exploited"),
                "{name}: {risk:?}"
            );
            // Every provider was called once over both runners: nothing
            // confirmed was done again (fresh providers, so no cache hides it).
            assert_eq!(
                env.counters(),
                Counters {
                    inventory: 1,
                    querybatch: 1,
                    records: 1,
                    kev: 1,
                    epss: 1,
                    deliveries: 1,
                    effects: 1,
                },
                "{name}"
            );
            // Each transition was written once, A's part then B's (threat
            // intel is recorded with the verdict it leads to).
            let store = env.store().await;
            assert_eq!(path(&store).await, transitions(&HIGH_RISK), "{name}");
            let audit = store.audit(&asset(), 1000).await.unwrap();
            let acquirers: Vec<&str> = audit
                .iter()
                .filter(|e| e.op() == "acquire")
                .filter_map(|e| e.get("holder"))
                .collect();
            assert_eq!(acquirers, ["A", "B"], "{name}");
            assert!(audit.iter().all(|e| e.accepted()), "{name}: {audit:#?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_takeover_at_notifying_resends_under_the_same_idempotency_key() {
        let env = Env::start(LINGERING_TTL).await;
        let a_ticket =
            super::dies_after_delivery(&env, request("A", &[XZ], Policy::default())).await;
        assert_eq!(a_ticket.status, Status::Notifying);
        let sending = a_ticket.facts.notification.as_ref().unwrap();
        assert_eq!(sending.state, NotificationState::Sending);
        assert_eq!(sending.idempotency_key, "web-01/r1");
        assert_eq!(env.stubs.sink.deliveries().len(), 1);

        env.expire_lock().await;
        let b = env.pipeline().await;
        let done = run_to_end(&b, &request("B", &[XZ], Policy::default()), &()).await;
        assert_eq!(done.status, Status::Finished);
        assert!(done.fencing_token > a_ticket.fencing_token);
        assert_eq!(
            done.facts.notification.as_ref().unwrap().state,
            NotificationState::Sent
        );

        // At least once on the wire, once in effect: two raw deliveries, one
        // key, the same message, each under its sender's token.
        let deliveries = env.stubs.sink.deliveries();
        assert_eq!(deliveries.len(), 2);
        assert_eq!(env.stubs.sink.effects(), 1);
        assert!(deliveries[0].new_effect && !deliveries[1].new_effect);
        for d in &deliveries {
            assert_eq!(d.header("Idempotency-Key"), Some("web-01/r1"));
        }
        let tokens: Vec<String> = deliveries
            .iter()
            .map(|d| d.header("X-AssetScan-Fencing-Token").unwrap().to_owned())
            .collect();
        assert_eq!(
            tokens,
            [
                a_ticket.fencing_token.to_string(),
                done.fencing_token.to_string()
            ]
        );
        let strip = |d: &assetscan_testkit::stubs::Delivery| {
            let mut body = d.json();
            body["fencing_token"] = serde_json::Value::Null;
            body
        };
        assert_eq!(strip(&deliveries[0]), strip(&deliveries[1]));
        // Nothing before the notification was done again.
        let c = env.counters();
        assert_eq!((c.inventory, c.querybatch, c.records), (1, 1, 1));

        // NOTIFIED and FINISHED were written by B's token, once.
        let audit = env.store().await.audit(&asset(), 1000).await.unwrap();
        let notified: Vec<_> = audit
            .iter()
            .filter(|e| e.op() == "advance" && e.get("to") == Some("NOTIFIED"))
            .collect();
        assert_eq!(notified.len(), 1);
        assert_eq!(notified[0].token(), Some(done.fencing_token));
        assert!(notified[0].accepted());
    }
}

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

mod stall {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runner_frozen_past_its_ttl_makes_no_provider_call_when_it_wakes() {
        let env = Env::start("400ms").await;
        let waiting = Arc::new(tokio::sync::Notify::new());
        let (reply, reply_rx) = tokio::sync::oneshot::channel();
        let (thaw, thaw_rx) = std::sync::mpsc::channel();
        // A runs in a process of its own: its own thread and runtime.
        let a = {
            let (config, url, waiting) =
                (env.config.clone(), env.redis.url(), Arc::clone(&waiting));
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    let store = TicketStore::connect(&RedisTarget::Standalone(url), config.store())
                        .await
                        .unwrap();
                    let effects = Twisted {
                        inner: Providers::from_config(&config.providers).unwrap(),
                        twist: Twist::FreezesMidStep(Freeze {
                            waiting,
                            reply: Mutex::new(Some(reply_rx)),
                            thaw: Mutex::new(Some(thaw_rx)),
                        }),
                    };
                    // The step's own timeout is not what stops A here.
                    let mut steps = config.steps.clone();
                    steps.vuln_query.timeout = Duration::from_secs(600);
                    let pipeline = Pipeline::new(store, effects, steps);
                    let req = request("A", &[XZ], Policy::default());
                    let outcome = pipeline.run(&req, &(), &CancellationToken::new()).await;
                    format!("{:?}", outcome.unwrap())
                })
            })
        };
        tokio::time::timeout(Duration::from_secs(5), waiting.notified())
            .await
            .expect("A reaches its second round trip");

        // A's lock expires unrenewed (Redis' own ttl: A's frozen clock is the
        // point); B takes the run over and finishes it.
        let b = env.pipeline().await;
        let done = run_to_end(&b, &request("B", &[XZ], Policy::default()), &()).await;
        assert_eq!(done.status, Status::Finished);
        let before = env.counters();
        assert_eq!((before.deliveries, before.effects), (1, 1));
        // The reply A waits for arrives while A is still frozen; then A
        // wakes up.
        reply.send(()).unwrap();
        thaw.send(()).unwrap();

        let outcome = tokio::task::spawn_blocking(move || a.join().unwrap())
            .await
            .unwrap();
        assert!(
            outcome.starts_with("LockLost") || outcome.starts_with("Superseded"),
            "{outcome}"
        );
        // Awake, A sent nothing more to any provider, and wrote nothing.
        assert_eq!(env.counters(), before, "A's outcome: {outcome}");
        let store = env.store().await;
        assert_eq!(store.get_ticket(&asset(), RUN).await.unwrap(), Some(done));
    }
}

mod bad_replies {
    use super::*;

    /// Which stub misbehaves.
    #[derive(Clone, Copy, Debug)]
    enum Culprit {
        Inventory,
        Osv,
        Kev,
        Epss,
        Sink,
    }

    impl Culprit {
        fn server(self, stubs: &ProviderStubs) -> &StubServer {
            match self {
                Culprit::Inventory => &stubs.inventory,
                Culprit::Osv => &stubs.osv,
                Culprit::Kev => &stubs.kev,
                Culprit::Epss => &stubs.epss,
                Culprit::Sink => &stubs.sink,
            }
        }
    }

    struct Case {
        name: &'static str,
        culprit: Culprit,
        fault: Fault,
        step: Step,
        /// What `last_error.message` must contain.
        message: &'static str,
        /// The status the run was at when the step failed.
        at: Status,
    }

    /// urllib3 (CVSS 4.4) so that threat intel runs, xz (10.0) so that a
    /// notification is sent.
    fn software(case: &Case) -> &'static [Pkg] {
        match case.step {
            Step::ThreatIntel => &[URLLIB3],
            _ => &[XZ],
        }
    }

    /// Runs `case` on a fresh environment and checks the common promises:
    /// FAILED with a clear `last_error` after `attempts` attempts, nothing
    /// confirmed before the failing step repeated, no panic.
    async fn check(case: &Case, attempts: u32) -> Vec<(Instant, Ticket)> {
        let env = Env::start("5s").await;
        case.culprit
            .server(&env.stubs)
            .faults()
            .always(case.fault.clone());
        let recorder = Recorder::default();
        let req = request("A", software(case), Policy::default());
        let ticket = run_to_end(&env.pipeline().await, &req, &recorder).await;
        let name = case.name;

        assert_eq!(ticket.status, Status::Failed, "{name}: {ticket:#?}");
        let error = ticket.last_error.as_ref().expect("last_error");
        assert_eq!(error.step, case.step, "{name}");
        assert_eq!(error.attempt, attempts, "{name}");
        assert!(
            error.message.contains(case.message),
            "{name}: {:?} lacks {:?}",
            error.message,
            case.message
        );
        assert!(error.at > 0, "{name}");
        assert_eq!(ticket.attempts[&case.step], attempts, "{name}");
        assert!(!ticket.has_completed(case.step), "{name}");
        // The misbehaving stub was called once per attempt, no more.
        let calls = case.culprit.server(&env.stubs).total_calls();
        assert_eq!(calls, u64::from(attempts), "{name}");
        let c = env.counters();
        if case.step != Step::OnlineCheck {
            assert_eq!(c.inventory, 1, "{name}: online check once");
        }
        if case.step != Step::OnlineCheck && case.step != Step::VulnQuery {
            assert_eq!(c.querybatch, 1, "{name}: vulnerability query once");
        }
        if case.step != Step::Notify {
            assert_eq!(c.effects, 0, "{name}: nothing notified");
        }
        // The run failed from the status it was at, nothing in between.
        let path = path(&env.store().await).await;
        assert_eq!(
            path.last(),
            Some(&(case.at.to_string(), "FAILED".to_owned())),
            "{name}: {path:?}"
        );
        recorder.tickets()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn permanent_errors_fail_the_run_at_once() {
        let cases = [
            Case {
                name: "inventory answers a body that is not JSON",
                culprit: Culprit::Inventory,
                fault: Fault::Malformed,
                step: Step::OnlineCheck,
                message: "not JSON",
                at: Status::Init,
            },
            Case {
                name: "inventory answers 404",
                culprit: Culprit::Inventory,
                fault: Fault::Status(404),
                step: Step::OnlineCheck,
                message: "HTTP 404",
                at: Status::Init,
            },
            Case {
                name: "OSV answers JSON of the wrong shape",
                culprit: Culprit::Osv,
                fault: Fault::WrongShape,
                step: Step::VulnQuery,
                message: "wrong shape",
                at: Status::AssetOnline,
            },
            Case {
                name: "OSV answers 400",
                culprit: Culprit::Osv,
                fault: Fault::Status(400),
                step: Step::VulnQuery,
                message: "HTTP 400",
                at: Status::AssetOnline,
            },
            Case {
                name: "OSV streams a 10 MB body",
                culprit: Culprit::Osv,
                fault: Fault::Oversized(10 * 1024 * 1024),
                step: Step::VulnQuery,
                message: "larger than the 4194304 byte cap",
                at: Status::AssetOnline,
            },
            Case {
                name: "EPSS answers a body that is not JSON",
                culprit: Culprit::Epss,
                fault: Fault::Malformed,
                step: Step::ThreatIntel,
                message: "not JSON",
                at: Status::VulnCheckDone,
            },
            Case {
                name: "the webhook answers 403",
                culprit: Culprit::Sink,
                fault: Fault::Status(403),
                step: Step::Notify,
                message: "HTTP 403",
                at: Status::Notifying,
            },
        ];
        for case in &cases {
            let seen = check(case, 1).await;
            // No retry was recorded before FAILED.
            assert!(
                seen.iter()
                    .all(|(_, t)| t.last_error.is_none() || t.status == Status::Failed),
                "{}",
                case.name
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn retryable_errors_are_retried_with_backoff_then_fail_the_run() {
        let cases = [
            Case {
                name: "inventory answers 503",
                culprit: Culprit::Inventory,
                fault: Fault::Status(503),
                step: Step::OnlineCheck,
                message: "HTTP 503",
                at: Status::Init,
            },
            Case {
                name: "OSV answers 502",
                culprit: Culprit::Osv,
                fault: Fault::Status(502),
                step: Step::VulnQuery,
                message: "HTTP 502",
                at: Status::AssetOnline,
            },
            Case {
                name: "OSV never answers",
                culprit: Culprit::Osv,
                fault: Fault::Hang,
                step: Step::VulnQuery,
                message: "vuln_query timed out after 1s",
                at: Status::AssetOnline,
            },
            Case {
                name: "the KEV feed answers 500",
                culprit: Culprit::Kev,
                fault: Fault::Status(500),
                step: Step::ThreatIntel,
                message: "known-exploited catalog unavailable",
                at: Status::VulnCheckDone,
            },
        ];
        for case in &cases {
            let name = case.name;
            let seen = check(case, 3).await;
            // Each failed attempt was recorded before the next one, at the
            // same status, with the attempt counter.
            let retries: Vec<&(Instant, Ticket)> = seen
                .iter()
                .filter(|(_, t)| t.last_error.is_some())
                .collect();
            assert_eq!(retries.len(), 3, "{name}: {seen:#?}");
            for (i, (_, t)) in retries.iter().enumerate() {
                let attempt = i as u32 + 1;
                let error = t.last_error.as_ref().unwrap();
                assert_eq!((error.step, error.attempt), (case.step, attempt), "{name}");
                assert_eq!(t.attempts[&case.step], attempt, "{name}");
                let expected = if attempt < 3 { case.at } else { Status::Failed };
                assert_eq!(t.status, expected, "{name}");
            }
            // Backoff: 100 ms then 200 ms, jittered down to half at most.
            let gap = |i: usize| retries[i + 1].0 - retries[i].0;
            assert!(gap(0) >= Duration::from_millis(50), "{name}: {:?}", gap(0));
            assert!(gap(1) >= Duration::from_millis(100), "{name}: {:?}", gap(1));
        }
    }
}

/// A confirmed high risk is never given up for a passing outage of a
/// channel, and a channel that confirmed is not sent to again.
mod notification_retries {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_channel_defers_the_run_and_only_it_is_retried() {
        let env = Env::start("5s").await;
        env.stubs.sink.faults().always(Fault::Status(500));
        let mut req = request("A", &[XZ], Policy::default());
        req.channels = vec!["webhook".into(), "wecom".into()];
        let pipeline = env.pipeline().await;
        let outcome = pipeline
            .run(&req, &(), &CancellationToken::new())
            .await
            .unwrap();
        let Outcome::Deferred {
            ticket,
            retry_after,
        } = outcome
        else {
            panic!("expected Deferred, got {outcome:?}");
        };
        assert_eq!(ticket.status, Status::Notifying);
        assert_eq!(retry_after, Duration::from_millis(400), "maxBackoff");
        assert_eq!(
            ticket.attempts[&Step::Notify],
            3,
            "maxAttempts in this pass"
        );
        let error = ticket.last_error.as_ref().unwrap();
        assert!(error.message.contains("channel webhook"), "{error:?}");
        let notification = ticket.facts.notification.as_ref().unwrap();
        assert_eq!(notification.state, NotificationState::Sending);
        assert_eq!(
            notification.receipt.keys().collect::<Vec<_>>(),
            ["wecom"],
            "WeCom confirmed and is recorded"
        );
        assert_eq!(env.stubs.wecom.messages().len(), 1, "WeCom told once");
        assert_eq!(env.stubs.sink.total_calls(), 3);
        assert_eq!(env.store().await.watchdog().held(), 0);

        // The receiver recovers; the next pass sends to the webhook only.
        env.stubs.sink.faults().clear();
        let done = run_to_end(&pipeline, &req, &()).await;
        assert_eq!(done.status, Status::Finished);
        let notification = done.facts.notification.as_ref().unwrap();
        assert_eq!(notification.state, NotificationState::Sent);
        assert_eq!(
            notification.receipt.keys().collect::<Vec<_>>(),
            ["webhook", "wecom"]
        );
        assert_eq!(env.stubs.wecom.messages().len(), 1, "WeCom not told twice");
        assert_eq!(env.stubs.sink.effects(), 1);
        assert_eq!(
            done.attempts[&Step::Notify],
            4,
            "attempts add up across passes"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_permanent_channel_error_fails_the_run() {
        let env = Env::start("5s").await;
        let mut req = request("A", &[XZ], Policy::default());
        req.channels = vec!["nope".into()];
        let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
        assert_eq!(ticket.status, Status::Failed);
        let error = ticket.last_error.as_ref().unwrap();
        assert_eq!((error.step, error.attempt), (Step::Notify, 1));
        assert!(
            error.message.contains("channel nope: not configured"),
            "{error:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn high_risk_without_channels_is_recorded_as_skipped() {
        let env = Env::start("5s").await;
        let mut req = request("A", &[XZ], Policy::default());
        req.channels.clear();
        let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
        assert_eq!(ticket.status, Status::Finished);
        let notification = ticket.facts.notification.as_ref().unwrap();
        assert_eq!(notification.state, NotificationState::Skipped);
        assert_eq!(notification.sent_at, None, "nobody was told");
        assert_eq!(env.stubs.sink.total_calls(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn missing_threat_intel_does_not_hide_a_cvss_high_risk() {
        let env = Env::start("5s").await;
        env.stubs.kev.faults().always(Fault::Status(500));
        let policy = Policy {
            threat_intel: ThreatIntelPolicy::Always,
            ..Policy::default()
        };
        let ticket = run_to_end(&env.pipeline().await, &request("A", &[XZ], policy), &()).await;
        assert_eq!(ticket.status, Status::Finished);
        assert!(ticket.facts.risk.as_ref().unwrap().high_risk);
        assert_eq!(ticket.facts.threat_intel, None);
        assert_eq!(env.stubs.sink.effects(), 1, "the alert went out");
        assert_eq!(
            env.stubs.kev.total_calls(),
            3,
            "intel was tried maxAttempts times"
        );
    }
}

/// The claim must be recorded (the controller: in the CR status) before any
/// provider call, so that every token handed out is known outside Redis.
mod claim {
    use super::*;

    struct RefusesClaims;

    impl Observer for RefusesClaims {
        async fn on_ticket(&self, _ticket: &Ticket) {}

        async fn record_claim(&self, _ticket: &Ticket) -> ClaimRecord {
            ClaimRecord::Refused
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unrecorded_claim_stops_the_run_before_any_provider_call() {
        let env = Env::start("5s").await;
        let pipeline = env.pipeline().await;
        let req = request("A", &[XZ], Policy::default());
        let outcome = pipeline
            .run(&req, &RefusesClaims, &CancellationToken::new())
            .await
            .unwrap();
        let Outcome::ClaimUnrecorded(ticket) = outcome else {
            panic!("expected ClaimUnrecorded, got {outcome:?}");
        };
        assert_eq!(ticket.status, Status::Init);
        let c = env.counters();
        assert_eq!(
            (c.inventory, c.querybatch, c.deliveries),
            (0, 0, 0),
            "no provider call"
        );
        assert_eq!(pipeline.store().watchdog().held(), 0);
        // The lock was released: another runner gets in at once.
        let done = run_to_end(&pipeline, &request("B", &[XZ], Policy::default()), &()).await;
        assert_eq!(done.status, Status::Finished);
        assert!(done.fencing_token > ticket.fencing_token);
    }

    /// A caller that has seen the run open (the operator) claims without
    /// reading the ticket first: the same run in one round trip fewer. Once
    /// the run has ended, that claim answers with the ticket as found; it
    /// takes no lock, writes nothing, and the observer is shown the ticket.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_seen_open_is_claimed_without_a_read_and_the_claim_answers_once_it_ended() {
        // A ttl far longer than the test: no renewal falls in a count.
        let env = Env::start("60s").await;
        let pipeline = env.pipeline().await;
        let trips = || pipeline.store().round_trips();
        let unread = |run: &str| ScanRequest {
            run: run.into(),
            expect_open: true,
            ..request("A", &[XZ], Policy::default())
        };

        // The first run loads the scripts into Redis: not counted.
        let read = |run: &str| ScanRequest {
            run: run.into(),
            ..request("A", &[XZ], Policy::default())
        };
        run_to_end(&pipeline, &read("r0"), &()).await;
        let before = trips();
        let read_first = run_to_end(&pipeline, &read("r1"), &()).await;
        let with_read = trips() - before;
        let before = trips();
        let claimed_at_once = run_to_end(&pipeline, &unread("r2"), &()).await;
        let without_read = trips() - before;
        assert_eq!(read_first.status, Status::Finished);
        assert_eq!(claimed_at_once.status, Status::Finished);
        assert_eq!(without_read + 1, with_read);
        assert_eq!(
            env.stubs.sink.deliveries().len(),
            3,
            "each run notified once"
        );

        let store = env.store().await;
        let audit = store.audit(&asset(), 1000).await.unwrap();
        let recorder = Recorder::default();
        let before = trips();
        let outcome = pipeline
            .run(&unread("r2"), &recorder, &CancellationToken::new())
            .await
            .unwrap();
        let Outcome::Terminal(again) = outcome else {
            panic!("expected Terminal, got {outcome:?}");
        };
        assert_eq!(again, claimed_at_once);
        assert_eq!(trips() - before, 1, "the claim alone");
        assert_eq!(
            store.audit(&asset(), 1000).await.unwrap(),
            audit,
            "nothing written"
        );
        let holder: Option<String> = env
            .redis
            .query(redis::cmd("GET").arg(store.keys(&asset()).lock()))
            .unwrap();
        assert_eq!(holder, None, "no lock taken");
        assert_eq!(pipeline.store().watchdog().held(), 0);
        let seen: Vec<Ticket> = recorder.tickets().into_iter().map(|(_, t)| t).collect();
        assert_eq!(seen, [claimed_at_once]);
    }
}

mod threat_intel {
    use super::*;

    struct Case {
        name: &'static str,
        software: &'static [Pkg],
        policy: ThreatIntelPolicy,
        cvss_threshold: f64,
        /// Whether KEV and EPSS are each called once (else never).
        intel: bool,
        high_risk: bool,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn intel_calls_follow_the_policy_exactly() {
        use ThreatIntelPolicy::*;
        let cases = [
            Case {
                name: "WhenNeeded, every finding >= threshold",
                software: &[XZ, OPENSSH],
                policy: WhenNeeded,
                cvss_threshold: 7.0,
                intel: false,
                high_risk: true,
            },
            Case {
                name: "WhenNeeded, one finding >= threshold decides alone",
                software: &[XZ, URLLIB3],
                policy: WhenNeeded,
                cvss_threshold: 7.0,
                intel: false,
                high_risk: true,
            },
            Case {
                name: "WhenNeeded, findings below threshold or unscored",
                software: &[URLLIB3, GO_STDLIB],
                policy: WhenNeeded,
                cvss_threshold: 7.0,
                intel: true,
                high_risk: false,
            },
            Case {
                name: "WhenNeeded, below threshold but known exploited",
                software: &[GLIBC],
                policy: WhenNeeded,
                cvss_threshold: 9.0,
                intel: true,
                high_risk: true,
            },
            Case {
                name: "WhenNeeded, no findings",
                software: &[],
                policy: WhenNeeded,
                cvss_threshold: 7.0,
                intel: false,
                high_risk: false,
            },
            Case {
                name: "Always, findings >= threshold",
                software: &[XZ],
                policy: Always,
                cvss_threshold: 7.0,
                intel: true,
                high_risk: true,
            },
            Case {
                name: "Always, findings below threshold",
                software: &[URLLIB3],
                policy: Always,
                cvss_threshold: 7.0,
                intel: true,
                high_risk: false,
            },
            Case {
                name: "Always, no findings",
                software: &[],
                policy: Always,
                cvss_threshold: 7.0,
                intel: false,
                high_risk: false,
            },
            Case {
                name: "Never, below threshold and known exploited",
                software: &[GLIBC],
                policy: Never,
                cvss_threshold: 9.0,
                intel: false,
                high_risk: false,
            },
            Case {
                name: "Never, findings >= threshold",
                software: &[XZ, URLLIB3, GO_STDLIB],
                policy: Never,
                cvss_threshold: 7.0,
                intel: false,
                high_risk: true,
            },
        ];
        for case in &cases {
            let name = case.name;
            let env = Env::start("5s").await;
            let req = request("A", case.software, policy(case.policy, case.cvss_threshold));
            let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
            assert_eq!(ticket.status, Status::Finished, "{name}");

            let c = env.counters();
            let calls = u64::from(case.intel);
            assert_eq!((c.kev, c.epss), (calls, calls), "{name}");
            assert_eq!(
                ticket.has_completed(Step::ThreatIntel),
                case.intel,
                "{name}"
            );
            assert_eq!(ticket.facts.threat_intel.is_some(), case.intel, "{name}");
            let risk = ticket.facts.risk.as_ref().unwrap();
            assert_eq!(risk.high_risk, case.high_risk, "{name}: {risk:?}");
            assert_eq!(c.effects, usize::from(case.high_risk), "{name}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_epss_score_over_threshold_makes_high_risk() {
        let env = Env::start("5s").await;
        // Derived: the stub gets an EPSS score for urllib3's CVE (the
        // fixtures have none for the OSV records' CVEs).
        env.stubs
            .epss
            .set_score("CVE-2024-37891", "0.910000000", "0.990000000", "2025-08-25");
        let req = request("A", &[URLLIB3], Policy::default());
        let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
        assert_eq!(ticket.status, Status::Finished);
        let intel = ticket.facts.threat_intel.as_ref().unwrap();
        assert_eq!(intel.epss.get("CVE-2024-37891"), Some(&0.91));
        assert_eq!(intel.known_exploited, Vec::<String>::new());
        assert_eq!(intel.catalog_version.as_deref(), Some("2025.08.25"));
        let risk = ticket.facts.risk.as_ref().unwrap();
        assert!(risk.high_risk);
        assert_eq!(risk.reasons, ["CVE-2024-37891 EPSS 0.910 >= 0.500"]);
        assert_eq!(env.stubs.epss.cve_params(), ["CVE-2024-37891"]);
        assert_eq!(env.counters().effects, 1);
    }
}
