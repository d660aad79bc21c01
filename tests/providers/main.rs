//! The providers against the stubs, fed with the real fixtures
//! (testkit/fixtures, see its README; `ASSETSCAN_FIXTURES` overrides).
//! Where a test needs a variant of a fixture, it derives it and says so.

use assetscan_operator::domain::ticket::{
    Finding, RiskFacts, Severity, ThreatIntelFacts, VulnFacts,
};
use assetscan_operator::domain::{Origin, ScanRequest, Triage};
use assetscan_operator::domain::{Package, Policy, Target, assess, needs_threat_intel};
use assetscan_operator::pipeline::{Effects, Notification, Resend, Resolution};
use assetscan_operator::providers::intel::{
    EpssClient, EpssConfig, IntelError, KevCatalog, KevConfig, KevFeed, ThreatIntel,
    ThreatIntelConfig,
};
use assetscan_operator::providers::notify::{
    NotifyError, SlackConfig, SlackError, SlackNotifier, WeComConfig, WeComNotifier, WebhookConfig,
    WebhookNotifier,
};
use assetscan_operator::providers::online::{InventoryConfig, InventoryProbe};
use assetscan_operator::providers::vulns::{OsvClient, OsvConfig, VulnError};
use assetscan_operator::providers::{
    HttpError, HttpSettings, Providers, ProvidersConfig, SecretFrom,
};
use assetscan_testkit::stubs::fixtures::{Fixtures, OSV_RECORDS, json_files};
use assetscan_testkit::stubs::sink::signature_is_valid;
use assetscan_testkit::stubs::{
    EpssStub, Fault, InventoryStub, KevStub, OsvStub, ProviderStubs, SinkKeys, SlackStub,
    WeComStub, WebhookSink,
};
use assetscan_testkit::wait::until_some;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// A guard against hangs only: conditions are awaited, not timed.
const PATIENCE: Duration = Duration::from_secs(30);

fn fixture(path: &str) -> Vec<u8> {
    Fixtures::locate()
        .read(path)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn fixture_json(path: &str) -> Value {
    serde_json::from_slice(&fixture(path)).unwrap()
}

/// A secret source backed by a file in `dir`.
fn secret_file(dir: &Path, name: &str, value: &str) -> SecretFrom {
    let path = dir.join(name);
    std::fs::write(&path, value).unwrap();
    SecretFrom::File(path)
}

fn package(ecosystem: &str, name: &str, version: &str) -> Package {
    Package::coordinates(ecosystem, name, version).unwrap()
}

fn purl(purl: &str) -> Package {
    Package::purl(purl).unwrap()
}

/// Provider defaults, but this per-call timeout.
fn http_settings(timeout_ms: u64) -> HttpSettings {
    HttpSettings {
        timeout: Some(Duration::from_millis(timeout_ms)),
        ..HttpSettings::default()
    }
}

fn osv_config(stub: &OsvStub) -> OsvConfig {
    OsvConfig {
        base_url: stub.url(),
        http: http_settings(2_000),
        ..OsvConfig::default()
    }
}

fn finding<'a>(facts: &'a VulnFacts, id: &str) -> &'a Finding {
    facts
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("{id} missing"))
}

/// What OSV answers for `package`, with at most `max_findings` findings.
async fn bounded_query(stub: &OsvStub, max_findings: usize, package: Package) -> VulnFacts {
    let config = OsvConfig {
        max_findings,
        ..osv_config(stub)
    };
    let client = OsvClient::new(&config).unwrap();
    client.query(&[package], &Triage::default()).await.unwrap()
}

/// The 15 real records, all behind one package.
async fn osv_with_all_records() -> (OsvStub, Vec<String>) {
    let stub = OsvStub::start().await.unwrap();
    let records = Fixtures::locate().path(OSV_RECORDS);
    let count = stub.load_records_dir(&records).unwrap();
    assert_eq!(count, 15);
    let ids: Vec<String> = json_files(&records)
        .unwrap()
        .iter()
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    stub.set_package_vulns("Fixture", "everything", &refs);
    (stub, ids)
}

mod osv;

#[path = "../kit/mod.rs"]
mod kit;

/// The generic JSON endpoint, served by a throwaway axum route that
/// records what it was sent.
mod generic;

/// Faults on every provider call end in a typed error, never a panic.
mod faults;

mod online;

mod intel;

mod notify;

/// The receivers security teams run: a real Alertmanager, the CloudEvents
/// SDK, PagerDuty's and Adaptive Cards' published schemas.
mod receivers;

/// All providers from the config the test kit writes for its stubs (no
/// secret in their `Debug`), and a request of web-1 through the inventory
/// on the three configured channels.
struct Chain {
    stubs: ProviderStubs,
    providers: Providers,
    req: ScanRequest,
    _dir: tempfile::TempDir,
}

async fn chain() -> Chain {
    let stubs = ProviderStubs::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config: ProvidersConfig =
        assetscan_operator::yaml::from_str(&stubs.write_config(dir.path()).unwrap()).unwrap();
    let providers = Providers::from_config(&config).unwrap();
    let debug = format!("{providers:?}");
    for secret in [
        ProviderStubs::WEBHOOK_SECRET,
        ProviderStubs::WECOM_KEY,
        "XXXX",
        "/hook",
    ] {
        assert!(!debug.contains(secret), "{secret} in {debug}");
    }
    stubs.inventory.set_online("inv-17", true);
    let req = ScanRequest {
        target: Target::Inventory {
            id: "inv-17".into(),
        },
        software: vec![package("Ubuntu:22.04:LTS", "openssh", "1:8.9p1-3ubuntu0.6")],
        channels: vec!["webhook".into(), "wecom".into(), "slack".into()],
        ..kit::requests::request("web-1", "r1", "test")
    };
    Chain {
        stubs,
        providers,
        req,
        _dir: dir,
    }
}

/// The providers driven through the pipeline's `Effects` step by step, with
/// the policy's pure decisions in between: online, a high risk notified on
/// every channel; a Medium finding alone needs threat intel, which finds
/// the CVE unlisted.
#[tokio::test]
async fn the_whole_chain_through_effects() {
    let Chain {
        stubs,
        providers,
        mut req,
        ..
    } = chain().await;
    stubs
        .osv
        .set_package_vulns("Ubuntu:22.04:LTS", "openssh", &["UBUNTU-CVE-2024-6387"]);
    stubs
        .osv
        .set_package_vulns("Maven", "log4j-core", &["GHSA-34jh-p97f-mpxf"]);

    assert!(providers.check_online(&req).await.unwrap());
    let vulns = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap();
    assert_eq!(vulns.max_cvss, Some(8.1));
    assert!(
        !needs_threat_intel(&req.policy, &vulns),
        "8.1 >= 7.0 decides"
    );
    let risk = assess(&req.policy, &vulns, None);
    assert!(risk.high_risk);

    let notification = Notification {
        ticket_id: "web-1/r1".into(),
        asset: "web-1".into(),
        run: "r1".into(),
        fencing_token: 1,
        risk,
        vulnerabilities: vulns.into(),
        threat_intel: None,
        origin: None,
        resend: None,
    };
    let receipts = providers.notify(&req.channels, &notification).await;
    assert!(receipts.values().all(Result::is_ok), "{receipts:?}");
    assert_eq!(
        receipts.keys().collect::<Vec<_>>(),
        ["slack", "webhook", "wecom"]
    );
    assert_eq!(stubs.sink.effects(), 1);
    assert_eq!(stubs.wecom.messages().len(), 1);
    assert_eq!(stubs.slack.messages().len(), 1);

    // A Medium finding alone needs threat intel; the KEV stub knows the CVE is not listed.
    req.software = vec![package("Maven", "log4j-core", "1")];
    let medium = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap();
    assert!(needs_threat_intel(&req.policy, &medium));
    let intel = providers.threat_intel(&req, &medium).await.unwrap();
    assert_eq!(intel.catalog_version.as_deref(), Some("2025.08.25"));
    assert!(!assess(&req.policy, &medium, Some(&intel)).high_risk);
}

/// Step errors keep their retryability, per channel: an unknown channel is
/// permanent, Slack's 429 is retried after its `Retry-After`.
#[tokio::test]
async fn step_errors_keep_their_retryability_per_channel() {
    let Chain {
        stubs, providers, ..
    } = chain().await;
    let notification = notify::notification(vec![notify::xz()]);
    stubs.slack.rate_limit_next(1, 9);
    let results = providers
        .notify(&["slack".into(), "nope".into()], &notification)
        .await;
    let err = results["nope"].clone().unwrap_err();
    assert!(
        !err.retryable,
        "an unknown channel is permanent: {}",
        err.message
    );
    assert_eq!(err.message, "not configured");
    let err = results["slack"].clone().unwrap_err();
    assert!(err.retryable, "429 is retryable");
    stubs.slack.rate_limit_next(1, 9);
    let err = providers
        .notify(&["slack".into()], &notification)
        .await
        .remove("slack")
        .unwrap()
        .unwrap_err();
    assert!(err.retryable);
    assert_eq!(err.retry_after, Some(Duration::from_secs(9)));
}

/// A provider's words never reach the step's error (which the ticket and
/// the tenant-visible status keep): its class and code only.
#[tokio::test]
async fn a_providers_words_never_reach_the_step_error() {
    let Chain {
        stubs,
        providers,
        mut req,
        ..
    } = chain().await;
    let notification = notify::notification(vec![notify::xz()]);
    let words = "<@all> SECRET-PROVIDER-WORDS https://evil.example";
    stubs.osv.faults().fail_next(
        1,
        Fault::Reply {
            status: 500,
            headers: vec![],
            body: words.as_bytes().to_vec(),
        },
    );
    // Packages no run asked about yet: a package asked about within the
    // lookup window is answered without a request.
    req.software = vec![package("Maven", "log4j-core", "2")];
    let status = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap_err();
    stubs.osv.faults().fail_next(1, Fault::Malformed);
    req.software = vec![package("Maven", "log4j-core", "3")];
    let malformed = providers
        .query_vulnerabilities(&req, &Triage::default())
        .await
        .unwrap_err();
    stubs.wecom.errcode_next(1, 93000);
    stubs.slack.reject_next(1, 400, words);
    let mut sent = providers
        .notify(&["wecom".into(), "slack".into()], &notification)
        .await;
    let wecom = sent.remove("wecom").unwrap().unwrap_err();
    let slack = sent.remove("slack").unwrap().unwrap_err();
    for (error, expected) in [
        (&status, "answered HTTP 500"),
        (&malformed, "unexpected response from"),
        (&wecom, "wecom: the robot answered errcode 93000"),
        (
            &slack,
            "slack: the webhook answered HTTP 400 (unknown code)",
        ),
    ] {
        assert!(error.message.contains(expected), "{}", error.message);
        for quoted in [
            "SECRET-PROVIDER-WORDS",
            "Bad Gateway",
            "hint",
            "evil.example",
        ] {
            assert!(
                !error.message.contains(quoted),
                "{quoted}: {}",
                error.message
            );
        }
    }
}

/// An asset id the inventory does not know is a permanent answer (404).
#[tokio::test]
async fn an_unknown_inventory_id_is_permanent() {
    let Chain {
        stubs: _serving,
        providers,
        req,
        ..
    } = chain().await;
    let offline = providers
        .check_online(&ScanRequest {
            target: Target::Inventory {
                id: "unknown".into(),
            },
            ..req
        })
        .await;
    let err = offline.unwrap_err();
    assert!(!err.retryable, "404 from the inventory: {}", err.message);
}
