//! `assetscan-operator scan` and `ticket` as real processes, against a real
//! redis-server and the provider stubs (real fixtures): exit codes, the
//! `ticket show|history|list` output, and the process-level failures the
//! fencing exists for: a scan killed with SIGKILL and run again, a takeover at
//! `NOTIFYING`, and a scan stopped (SIGSTOP) past its lock's ttl that wakes
//! up after another one took the run over.
//!
//! The signal tests need the `failpoints` feature (for `nix`, and for the
//! `stop-before-write` drill in the binary); `make test` enables it.

#[path = "../kit/mod.rs"]
mod kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{Status, Ticket};
use assetscan_operator::store::{RedisTarget, StoreConfig, TicketStore};
use assetscan_testkit::redis::{RedisServer, SentinelGroup};
use assetscan_testkit::stubs::ProviderStubs;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;
use tokio::process::Command;

/// `scan`'s exit codes: the documented contract, spelled out here so that a
/// change to them fails this test.
mod exit {
    pub const CLEAN: u8 = 0;
    pub const HIGH_RISK: u8 = 3;
    pub const FAILED: u8 = 4;
    pub const LOCKED: u8 = 5;
    pub const INTERRUPTED: u8 = 6;
    pub const COVERAGE_LOW: u8 = 8;
}
const RUN: &str = "r1";
/// How long a test waits for the event it is about before it fails: a
/// guard against hangs, not a measure.
const PATIENCE: Duration = Duration::from_secs(60);
/// The lock ttl where a stopped holder's lock must run out during the test
/// (renewed every 200 ms, so such takeovers are quick).
const QUICK_TTL_MS: u64 = 600;
/// The lock ttl where a dead holder's lock must still be there when its
/// successor arrives, however slow the machine; the tests expire it by hand.
const LINGERING_TTL_MS: u64 = 30_000;

/// CVSS 10.0 (UBUNTU-CVE-2024-3094): high risk on CVSS alone.
const XZ: &str = "Ubuntu:22.04:LTS/xz-utils@5.6.0-0.1";
/// CVSS 7.8, CVE-2023-4911 is in the KEV catalog: with `--cvss-threshold 9`
/// threat intel runs and makes it high risk.
const GLIBC: &str = "Ubuntu:22.04:LTS/glibc@2.35-0ubuntu3.3";
/// CVSS 4.4, not in KEV: clean.
const URLLIB3: &str = "PyPI/urllib3@2.2.1";

/// Redis, the stubs, and a config file pointing at both.
struct Env {
    redis: RedisServer,
    stubs: ProviderStubs,
    /// The config file, and the logs of background scans.
    #[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
    dir: tempfile::TempDir,
    config: PathBuf,
    store: TicketStore,
}

impl Env {
    async fn start() -> Env {
        Env::with_lock_ttl(QUICK_TTL_MS).await
    }

    async fn with_lock_ttl(lock_ttl_ms: u64) -> Env {
        let redis = RedisServer::start().unwrap();
        let stubs = ProviderStubs::start().await.unwrap();
        let osv = &stubs.osv;
        osv.set_package_vulns("Ubuntu:22.04:LTS", "xz-utils", &["UBUNTU-CVE-2024-3094"]);
        osv.set_package_vulns("Ubuntu:22.04:LTS", "glibc", &["UBUNTU-CVE-2023-4911"]);
        osv.set_package_vulns("PyPI", "urllib3", &["GHSA-34jh-p97f-mpxf"]);
        let dir = tempfile::tempdir().unwrap();
        let providers = stubs.write_providers_section(dir.path(), "").unwrap();
        let steps = kit::setup::steps_yaml([("5s", 3); 4], "400ms");
        let text = format!(
            "redis: {{timeout: 2s}}\nlock: {{ttl: {lock_ttl_ms}ms}}\n\
             tickets: {{retention: 0s, auditCap: 10000}}\n\
             {steps}{providers}"
        );
        let config = dir.path().join("config.yaml");
        std::fs::write(&config, text).unwrap();
        let store = TicketStore::connect(
            &RedisTarget::Standalone(redis.url()),
            StoreConfig {
                lock_ttl: Duration::from_millis(lock_ttl_ms),
                ..StoreConfig::default()
            },
        )
        .await
        .unwrap();
        Env {
            redis,
            stubs,
            dir,
            config,
            store,
        }
    }

    /// `assetscan-operator <sub…> --config … --redis-url …`, with a clean
    /// environment (no inherited settings, no drill).
    fn command(&self, sub: &[&str]) -> Command {
        let mut cmd = kit::setup::cli(&self.config, sub);
        cmd.args(["--redis-url", &self.redis.url()]);
        cmd
    }

    /// `scan` of `asset` (online check through the inventory) as `holder`.
    fn scan(&self, asset: &str, holder: &str, extra: &[&str]) -> Command {
        let mut cmd = self.command(&["scan"]);
        cmd.args(["--asset", asset, "--inventory", asset, "--run", RUN])
            .args(["--holder", holder])
            .args(extra);
        cmd
    }

    async fn ticket(&self, asset: &str) -> Option<Ticket> {
        self.store
            .get_ticket(&AssetId::new(asset).unwrap(), RUN)
            .await
            .unwrap()
    }

    fn counters(&self) -> Counters {
        self.stubs.counters()
    }
}

use assetscan_testkit::stubs::StubCounters as Counters;

fn code(out: &Output) -> u8 {
    out.status.code().expect("exited, not killed") as u8
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The ticket `scan` printed on stdout.
fn printed_ticket(out: &Output) -> Ticket {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: stdout {:?} stderr {}", stdout(out), stderr(out)))
}

/// Runs `scan` and checks its exit code; returns its output.
async fn scan_expecting(env: &Env, asset: &str, extra: &[&str], expected: u8) -> Output {
    let out = env.scan(asset, "cli", extra).output().await.unwrap();
    assert_eq!(
        code(&out),
        expected,
        "{asset}: stdout {} stderr {}",
        stdout(&out),
        stderr(&out)
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_exit_codes_say_clean_high_risk_failed_and_locked() {
    let env = Env::start().await;
    let inventory = &env.stubs.inventory;

    // 0: offline.
    inventory.set_online("db-01", false);
    let out = scan_expecting(&env, "db-01", &["--package", XZ], exit::CLEAN).await;
    let ticket = printed_ticket(&out);
    assert_eq!(
        (ticket.status, ticket.facts.online),
        (Status::Finished, Some(false))
    );

    // 0: online, nothing high risk.
    inventory.set_online("app-01", true);
    let out = scan_expecting(
        &env,
        "app-01",
        &["--package", URLLIB3, "--notify", "webhook"],
        exit::CLEAN,
    )
    .await;
    let ticket = printed_ticket(&out);
    assert_eq!(ticket.status, Status::Finished);
    assert!(!ticket.facts.risk.unwrap().high_risk);
    assert_eq!(env.stubs.sink.deliveries().len(), 0);

    // 3: high risk, notified.
    inventory.set_online("web-01", true);
    let args = ["--package", XZ, "--notify", "webhook"];
    let out = scan_expecting(&env, "web-01", &args, exit::HIGH_RISK).await;
    let ticket = printed_ticket(&out);
    assert_eq!(ticket.status, Status::Finished);
    assert_eq!(env.stubs.sink.effects(), 1);
    // The same run again: already over, same answer, no provider call.
    let before = env.counters();
    let again = scan_expecting(&env, "web-01", &args, exit::HIGH_RISK).await;
    assert_eq!(printed_ticket(&again), ticket);
    assert_eq!(env.counters(), before);

    // 4: failed. The inventory does not know the asset (404): permanent.
    let out = scan_expecting(&env, "ghost-01", &["--package", XZ], exit::FAILED).await;
    let ticket = printed_ticket(&out);
    assert_eq!(ticket.status, Status::Failed);
    let error = ticket.last_error.unwrap();
    assert_eq!((error.step.as_str(), error.attempt), ("online_check", 1));
    assert!(error.message.contains("HTTP 404"), "{}", error.message);

    // 5: locked by another holder. Nothing is called, nothing printed.
    inventory.set_online("busy-01", true);
    let busy = kit::tickets::asset_id("busy-01");
    let other_run = kit::tickets::claim(&env.store, &busy, "other-run");
    let held = other_run.holder("someone-else").acquire().await;
    let before = env.counters();
    let out = scan_expecting(&env, "busy-01", &["--package", XZ], exit::LOCKED).await;
    assert!(
        stderr(&out).contains("locked by someone-else"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
    assert_eq!(env.counters(), before);
    assert_eq!(
        env.ticket("busy-01").await,
        None,
        "no ticket for the refused run"
    );
    held.release().await;
    scan_expecting(&env, "busy-01", &["--package", XZ], exit::HIGH_RISK).await;

    // `ticket list` shows every run with its status.
    let out = env.command(&["ticket", "list"]).output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let list = stdout(&out);
    for (asset, run, status) in [
        ("db-01", RUN, "FINISHED"),
        ("app-01", RUN, "FINISHED"),
        ("web-01", RUN, "FINISHED"),
        ("ghost-01", RUN, "FAILED"),
        ("busy-01", "other-run", "INIT"),
        ("busy-01", RUN, "FINISHED"),
    ] {
        assert!(
            list.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.get(..3) == Some(&[asset, run, status][..])
            }),
            "{asset} {run} {status} missing from\n{list}"
        );
    }
    let out = env
        .command(&["ticket", "list", "--asset", "busy-01"])
        .output()
        .await
        .unwrap();
    assert_eq!(stdout(&out).lines().count(), 3, "{}", stdout(&out));
}

/// `scan --sbom FILE` reads a real SBOM through the AssetScan's code (the
/// Debian binaries asked under their source packages), `--vex FILE` clears
/// what it states, and a run that asks about too little is not clean:
/// `--min-coverage` turns its exit code to `COVERAGE_LOW`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reads_an_sbom_and_a_vex_file_and_says_when_coverage_is_low() {
    let env = Env::start().await;
    for asset in ["pg-01", "pg-02", "pg-03", "pg-04"] {
        env.stubs.inventory.set_online(asset, true);
    }
    // osv-scanner's postgres-stretch.cdx.xml (Syft 0.73, Debian 9): its
    // libssl1.1 is a binary of `openssl`, under which Debian's advisories
    // are filed; the stub serves the fixtures' OpenSSL record there.
    env.stubs
        .osv
        .set_package_vulns("Debian:9", "openssl", &["CVE-2018-5407"]);
    let sbom = assetscan_testkit::stubs::Fixtures::locate()
        .path("sbom/osv-scanner-postgres-stretch.cdx-1.4.xml");
    let sbom = sbom.to_str().unwrap();
    // CVE-2018-5407 scores 4.7: high from 4.0.
    let judged = ["--sbom", sbom, "--cvss-threshold", "4.0"];
    let out = scan_expecting(&env, "pg-01", &judged, exit::HIGH_RISK).await;
    let ticket = printed_ticket(&out);
    let vulns = ticket.facts.vulnerabilities.clone().unwrap();
    assert!(
        vulns
            .findings
            .iter()
            .any(|f| f.package.starts_with("Debian:9/openssl@")),
        "{vulns:?}"
    );
    let coverage = vulns.coverage.clone().unwrap();
    assert_eq!((coverage.listed, coverage.asked), (137, 135));
    let sbom_fact = ticket.facts.sbom.unwrap();
    assert_eq!(sbom_fact.format.as_deref(), Some("CycloneDX 1.4 XML"));

    // A VEX file that states the package not affected clears the finding.
    let dir = tempfile::tempdir().unwrap();
    let vex = dir.path().join("pg.vex.json");
    std::fs::write(
        &vex,
        serde_json::to_vec(&serde_json::json!({
            "@context": "https://openvex.dev/ns/v0.2.0",
            "@id": "https://example.com/vex/pg-01",
            "author": "security@example.com",
            "timestamp": "2026-12-01T00:00:00Z",
            "version": 1,
            "statements": [{
                "vulnerability": {"name": "CVE-2018-5407"},
                "products": [{"@id": "pkg:oci/postgres", "subcomponents": [
                    {"@id": "pkg:deb/debian/libssl1.1"}
                ]}],
                "status": "not_affected",
                "justification": "vulnerable_code_not_in_execute_path"
            }]
        }))
        .unwrap(),
    )
    .unwrap();
    let with_vex = [&judged[..], &["--vex", vex.to_str().unwrap()]].concat();
    let out = scan_expecting(&env, "pg-02", &with_vex, exit::CLEAN).await;
    let ticket = printed_ticket(&out);
    let triage = ticket
        .facts
        .vulnerabilities
        .and_then(|v| v.triage.clone())
        .unwrap();
    assert_eq!(triage.suppressed_total, 1);
    assert_eq!(triage.suppressed[0].triage.by, "VEX vex-1/pg.vex.json #1");

    // 135 of 137 asked is 98 %: below a minimum of 99, the clean run is not.
    let strict = [&with_vex[..], &["--min-coverage", "99"]].concat();
    scan_expecting(&env, "pg-03", &strict, exit::COVERAGE_LOW).await;
    // A purl given on the command line takes the same path as the SBOM's.
    let purl =
        "pkg:deb/debian/libssl1.1@1.1.0l-1~deb9u1?arch=amd64&upstream=openssl&distro=debian-9";
    let out = scan_expecting(
        &env,
        "pg-04",
        &["--purl", purl, "--cvss-threshold", "4.0"],
        exit::HIGH_RISK,
    )
    .await;
    let found = printed_ticket(&out).facts.vulnerabilities.unwrap();
    assert_eq!(
        found.findings[0].package,
        "Debian:9/openssl@1.1.0l-1~deb9u1"
    );
}

/// `sbom FILE…` prints what a run would ask about, a row per document,
/// without Redis or a provider: the same reader and mapping as a run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sbom_prints_what_a_run_would_ask_about() {
    let fixtures = assetscan_testkit::stubs::Fixtures::locate();
    let debian = fixtures.path("sbom/osv-scanner-postgres-stretch.cdx-1.4.xml");
    let rhel = fixtures.path("sbom/sbomer-rhel-9.2-image.cdx-1.5.json");
    let out = Command::new(env!("CARGO_BIN_EXE_assetscan-operator"))
        .arg("sbom")
        .args([&debian, &rhel])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    for row in [
        "| osv-scanner-postgres-stretch.cdx-1.4.xml | CycloneDX 1.4 XML | 137 | 135 | 98% | Debian 132, Go 3 | noPurl 1, noAdvisorySource 1 |",
        "| sbomer-rhel-9.2-image.cdx-1.5.json | CycloneDX 1.5 JSON | 192 | 32 | 16% | PyPI 9, npm 23 | noPurl 1, unknownRelease 159 |",
    ] {
        assert!(table.lines().any(|l| l == row), "{row}\nnot in\n{table}");
    }
    let missing = Command::new(env!("CARGO_BIN_EXE_assetscan-operator"))
        .args(["sbom", "/nonexistent.cdx.json"])
        .output()
        .await
        .unwrap();
    assert_eq!(code(&missing), 1, "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("/nonexistent.cdx.json"),
        "{}",
        stderr(&missing)
    );
}

/// With the identity bridge off, an AssetScan's ticket and history are
/// in its namespace's keys only: `ticket show` and `ticket history` find
/// them with `--namespace`, and not in the legacy layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_show_and_history_read_a_namespace_with_the_bridge_off() {
    let env = Env::start().await;
    let isolated = StoreConfig {
        identity_bridge: false.into(),
        ..StoreConfig::default()
    };
    let store = TicketStore::connect(&RedisTarget::Standalone(env.redis.url()), isolated)
        .await
        .unwrap()
        .scoped("team-a")
        .unwrap();
    let asset = AssetId::new("web-01").unwrap();
    let held = store
        .acquire(&asset, RUN, "team-a-holder#1", 6)
        .await
        .unwrap();
    store.release(&asset, &held.lease).await.unwrap();

    // The operator's own config, with the bridge off.
    let text = std::fs::read_to_string(&env.config).unwrap();
    let config = env.dir.path().join("isolated.yaml");
    let isolated_text = text.replacen("redis: {", "redis: {identityBridge: false, ", 1);
    std::fs::write(&config, isolated_text).unwrap();
    let command = |sub: &[&str]| {
        let mut cmd = kit::setup::cli(&config, sub);
        cmd.args(["--redis-url", &env.redis.url()]);
        cmd
    };
    let show = ["ticket", "show", "--asset", "web-01", "--run", RUN];
    let out = command(&show)
        .args(["--namespace", "team-a"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("\"fencing_token\": 7"),
        "{}",
        stdout(&out)
    );
    let out = command(&show).output().await.unwrap();
    assert!(
        !out.status.success(),
        "not in the legacy layout: {}",
        stdout(&out)
    );
    let history = [
        "ticket",
        "history",
        "--asset",
        "web-01",
        "--namespace",
        "team-a",
    ];
    let out = command(&history).output().await.unwrap();
    assert!(stdout(&out).contains("team-a-holder#1"), "{}", stdout(&out));
}

#[cfg(feature = "failpoints")]
/// One Redis node lost must not stop the alerts: `scan` behind Sentinel,
/// after the master of a 1 master + 1 replica group was SIGKILLed (the
/// replica promoted, with no replica of its own), notifies a high risk and
/// warns that the notification is not replicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_notifies_behind_sentinel_after_the_master_is_killed() {
    let env = Env::start().await;
    let mut group = tokio::task::block_in_place(SentinelGroup::start).expect("sentinel group");
    tokio::task::block_in_place(|| group.kill_master()).expect("the sentinels fail over");
    env.stubs.inventory.set_online("web-09", true);
    let mut cmd = kit::setup::cli(&env.config, &["scan"]);
    cmd.args(["--redis-url", &group.target_spec()])
        .args(["--asset", "web-09", "--inventory", "web-09", "--run", RUN])
        .args(["--holder", "cli", "--package", XZ, "--notify", "webhook"]);
    let out = cmd.output().await.unwrap();
    assert_eq!(code(&out), exit::HIGH_RISK, "{}", stderr(&out));
    assert_eq!(printed_ticket(&out).status, Status::Finished);
    assert_eq!(env.stubs.sink.effects(), 1);
    assert!(
        stderr(&out).contains("notifications are not replicated"),
        "{}",
        stderr(&out)
    );
}

mod signals;
