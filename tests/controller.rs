//! The operator end to end: the real controller (kube-runtime, finalizer,
//! fenced status mirror, events) against the Kubernetes API emulator, a real
//! redis-server and the provider stubs with real data.
//!
//! This file: the example AssetScans to their terminal phases, two
//! controllers on the same objects, the status fence, and what the status
//! and Events say of a rescan the minimum interval holds back. Lifecycle (spec
//! changes, suspend, deletion, rescans) is in `controller_lifecycle.rs`,
//! outages and API faults in `controller_faults.rs`, the `run` process and
//! its HTTP endpoints in `controller_process.rs`.

mod controller_kit;

use assetscan_operator::domain::RESCAN_ANNOTATION;
use assetscan_operator::domain::ticket::{NotificationState, Status, Ticket};
use assetscan_operator::duration;
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::controller::{StatusMirror, rescan_after};
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::pipeline::{ClaimRecord, Observer};
use assetscan_operator::telemetry::Metrics;
use controller_kit::*;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// `(status, reason)` of a condition.
fn cond(obj: &AssetScan, type_: ConditionType) -> (String, String) {
    let c = obj
        .status
        .as_ref()
        .and_then(|s| type_.find(&s.conditions))
        .unwrap_or_else(|| panic!("{}: condition {type_:?} missing", obj.name_any()));
    (c.status.clone(), c.reason.clone())
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

/// The events.k8s.io Events about one object: (type, reason, note).
async fn events_of(harness: &Harness, name: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(harness.client.clone(), NAMESPACE);
    api.list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            assert_eq!(
                e.reporting_controller.as_deref(),
                Some("assetscan-operator")
            );
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// `events.scanComplete`: a run that ends without a high risk is announced
/// too, as a Normal Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_runs_are_announced_when_asked() {
    let mut h = Harness::start().await;
    h.config.events.scan_complete = true;
    let (ctl, _) = h.run_to_end("ctl-a", scan("clean-01")).await;
    let events = until_some("the ScanComplete Event", PATIENCE, async || {
        let events = events_of(&h, "clean-01").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(
        events
            .iter()
            .map(|(t, r, _)| (t.as_str(), r.as_str()))
            .collect::<Vec<_>>(),
        [("Normal", "ScanComplete")],
        "{events:#?}"
    );
    ctl.stop().await;
}

/// The printer columns of every AssetScan, as `kubectl get` shows them
/// (server-side Table): name → column → cell.
async fn table(harness: &Harness) -> BTreeMap<String, BTreeMap<String, Value>> {
    let url = format!(
        "{}/apis/assetscan.io/v1alpha1/namespaces/{NAMESPACE}/assetscans",
        harness.emu.url()
    );
    let (code, body) = http_get(
        &url,
        &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
    )
    .await
    .expect("table request");
    assert_eq!(code, 200, "{body}");
    let table: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<String> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let cells = row["cells"].as_array().unwrap();
            let by_column: BTreeMap<String, Value> =
                columns.iter().cloned().zip(cells.iter().cloned()).collect();
            (cells[0].as_str().unwrap().to_owned(), by_column)
        })
        .collect()
}

/// The example AssetScans, applied as they are, end in their terminal
/// phases with the documented status, conditions, printer columns and
/// events; one notification effect per high-risk asset; every ticket
/// transition mirrored, none twice, none backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn examples_reach_their_terminal_phase_with_documented_status() {
    let h = Harness::start().await;
    let examples = examples();
    let names: BTreeSet<&str> = examples.iter().map(|(file, _)| file.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "assetscan-clean.yaml",
            "assetscan-debian-openssl.yaml",
            "assetscan-offline.yaml",
            "assetscan-wecom.yaml",
        ])
    );
    // What the inventory says: only the lab printer is offline.
    for (file, scan) in &examples {
        let id = scan
            .spec
            .target
            .inventory_ref
            .as_deref()
            .expect("inventoryRef");
        h.stubs
            .inventory
            .set_online(id, file != "assetscan-offline.yaml");
    }
    let ctl = h.controller("ctl-a").await;
    for (_, scan) in &examples {
        h.create(scan).await;
    }
    let mut done = BTreeMap::new();
    for (file, scan) in &examples {
        let obj = h
            .wait_terminal(&scan.name_any(), Duration::from_secs(60))
            .await;
        done.insert(file.as_str(), obj);
    }

    // Common to every example.
    for (file, obj) in &done {
        let s = obj.status.as_ref().unwrap();
        let ticket = h.mirrored_ticket(obj).await;
        assert_eq!(s.phase, Some(Status::Finished), "{file}");
        assert_eq!(ticket.status, Status::Finished, "{file}");
        let run = s.run.clone().unwrap();
        assert!(
            run.ends_with("-g1-s0"),
            "{file}: first scan of generation 1: {run}"
        );
        assert_eq!(
            s.ticket_id.as_deref(),
            Some(format!("{}/{run}", obj.spec.asset_id).as_str())
        );
        assert_eq!(s.ticket_id.as_deref(), Some(ticket.id.as_str()));
        assert!(s.fencing_token.unwrap() >= 1 && s.revision.unwrap() >= 2);
        assert_eq!(s.observed_generation, obj.metadata.generation);
        assert_eq!(s.observed_generation, Some(1));
        assert!(s.last_scan_time.is_some(), "{file}: lastScanTime");
        assert!(s.last_error.is_none(), "{file}: {:?}", s.last_error);
        assert_eq!(
            cond(obj, ConditionType::Ready),
            pair("True", "ScanComplete")
        );
        assert_eq!(
            cond(obj, ConditionType::Reconciling),
            pair("False", "ScanComplete")
        );
        assert_eq!(
            cond(obj, ConditionType::Stalled),
            pair("False", "ScanComplete")
        );
        assert_eq!(s.conditions.len(), 4, "{file}: {:?}", s.conditions);
        for c in &s.conditions {
            assert_eq!(c.observed_generation, Some(1), "{file}: {c:?}");
        }
        assert_eq!(
            obj.finalizers(),
            ["assetscan.io/tickets".to_owned()],
            "{file}"
        );
        // nextScanTime: an interval and the object's share of the spread
        // after the run ended, only with rescans.
        match rescan_after(obj, h.config.scan_starts.rescan_spread) {
            Some(after) => {
                let every = obj.spec.rescan_interval.as_deref().unwrap();
                let every = duration::parse(every, duration::SPEC_UNITS).unwrap();
                assert!(after >= every && after <= every + every / 10, "{file}");
                let ended = s.last_scan_time.as_ref().unwrap().0;
                let next = s.next_scan_time.as_ref().expect("nextScanTime").0;
                let due = next.as_second() - ended.as_second();
                let after = after.as_secs() as i64;
                assert!(
                    due == after || due == after + 1,
                    "{file}: nextScanTime = lastScanTime + {after}s (whole seconds), not {due}s"
                );
            }
            None => assert_eq!(s.next_scan_time, None, "{file}"),
        }
        check_status_history(&h, &obj.name_any(), obj);
        check_every_transition_mirrored(&h, obj).await;
    }

    // The Debian web host: critical findings, alert to the webhook.
    let web = &done["assetscan-debian-openssl.yaml"];
    let s = web.status.as_ref().unwrap();
    assert_eq!(
        s.completed_steps,
        ["online_check", "vuln_query", "notify"],
        "CVSS decides: no threat intel"
    );
    let v = s.vulnerabilities.as_ref().unwrap();
    assert_eq!(
        (v.total, v.critical, v.high, v.medium, v.low, v.unknown),
        (4, 1, 2, 1, 0, 0)
    );
    assert_eq!(v.max_cvss, Some(10.0));
    assert_eq!(v.known_exploited, None, "threat intel not consulted");
    assert_eq!(
        v.top_ids.first().map(String::as_str),
        Some("UBUNTU-CVE-2024-3094")
    );
    assert_eq!(s.high_risk, Some(true));
    let n = s.notification.as_ref().unwrap();
    assert_eq!(n.state, NotificationState::Sent);
    assert_eq!(Some(&n.idempotency_key), s.ticket_id.as_ref());
    assert!(n.sent_at.is_some());
    assert_eq!(
        cond(web, ConditionType::HighRisk),
        pair("True", "HighRiskFound")
    );

    // The Java service: known exploited per KEV, alert to WeCom.
    let billing = &done["assetscan-wecom.yaml"];
    let s = billing.status.as_ref().unwrap();
    assert_eq!(
        s.completed_steps,
        ["online_check", "vuln_query", "threat_intel", "notify"],
        "threatIntel: Always"
    );
    let v = s.vulnerabilities.as_ref().unwrap();
    assert_eq!((v.total, v.critical), (1, 1));
    assert_eq!(v.known_exploited, Some(1), "CVE-2021-44228 is in KEV");
    assert_eq!(s.high_risk, Some(true));
    assert_eq!(
        s.notification.as_ref().map(|n| n.state),
        Some(NotificationState::Sent)
    );
    assert_eq!(
        cond(billing, ConditionType::HighRisk),
        pair("True", "HighRiskFound")
    );

    // The build runner: low and medium findings, intel consulted, no alert.
    let runner = &done["assetscan-clean.yaml"];
    let s = runner.status.as_ref().unwrap();
    assert_eq!(
        s.completed_steps,
        ["online_check", "vuln_query", "threat_intel"]
    );
    let v = s.vulnerabilities.as_ref().unwrap();
    assert_eq!(
        (v.total, v.critical, v.high, v.medium, v.low),
        (2, 0, 0, 1, 1)
    );
    assert_eq!(v.known_exploited, Some(0));
    assert_eq!(s.high_risk, Some(false));
    assert_eq!(s.notification, None);
    assert_eq!(
        cond(runner, ConditionType::HighRisk),
        pair("False", "NoHighRisk")
    );

    // The lab printer: offline, nothing else asked.
    let printer = &done["assetscan-offline.yaml"];
    let s = printer.status.as_ref().unwrap();
    assert_eq!(s.completed_steps, ["online_check"]);
    assert_eq!((&s.vulnerabilities, s.high_risk), (&None, None));
    assert_eq!(s.notification, None);
    assert_eq!(
        cond(printer, ConditionType::HighRisk),
        pair("Unknown", "AssetOffline")
    );
    assert!(
        ConditionType::Ready
            .find(&s.conditions)
            .unwrap()
            .message
            .contains("offline")
    );

    // One notification effect per high-risk asset, under its ticket id.
    let web_key = web.status.as_ref().unwrap().ticket_id.clone().unwrap();
    let billing_key = billing.status.as_ref().unwrap().ticket_id.clone().unwrap();
    assert_eq!(h.stubs.sink.effects(), 1, "webhook: web-01 only");
    assert_eq!(h.delivered_keys(), BTreeSet::from([web_key.clone()]));
    assert_eq!(h.stubs.sink.rejected(), 0, "signed and keyed");
    let wecom = h.stubs.wecom.messages();
    assert_eq!(wecom.len(), 1, "WeCom: billing-api only: {wecom:?}");
    assert!(wecom[0].contains(&billing_key), "{}", wecom[0]);

    // Printer columns.
    let rows = table(&h).await;
    let row = &rows["web-01"];
    assert_eq!(row["Asset"], "web-01.prod.example.com");
    assert_eq!(row["Phase"], "FINISHED");
    assert_eq!(row["High-Risk"], true);
    assert_eq!(row["Notified"], "sent");
    assert_eq!(
        row["Token"],
        json!(web.status.as_ref().unwrap().fencing_token)
    );
    assert_eq!(rows["lab-printer-07"]["Phase"], "FINISHED");
    assert_eq!(rows["build-runner-03"]["High-Risk"], false);

    // Events: at most one per run, at its end: a warning for a high risk;
    // none for a clean or offline end by default (`events.scanComplete`),
    // nor for the steps (the status and the report show those).
    let events = events_of(&h, "web-01").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let (type_, reason, note) = &events[0];
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("Warning", "HighRiskFound")
    );
    assert!(note.contains(" is FINISHED "), "{note}");
    let printer_events = events_of(&h, "lab-printer-07").await;
    assert!(printer_events.is_empty(), "{printer_events:#?}");

    assert!(ctl.counter("assetscan_reconciles_total{result=\"finished\"}") >= 4.0);
    assert_eq!(ctl.counter("assetscan_stale_writes_rejected_total"), 0.0);
    ctl.stop().await;
}

/// Two controllers at once on the same objects: every asset is scanned
/// to the end, each high-risk asset has one notification effect, and no
/// object's status ever goes backwards in (fencingToken, revision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_process_every_asset_once_in_effect() {
    let h = Harness::start().await;
    // Vulnerability queries are held: every run stays in flight, its lock
    // taken, until both replicas have met at a lock.
    h.stubs.osv.faults().hold();
    let scans: Vec<_> = (0..6)
        .map(|i| {
            let host = scan(&format!("host-{i:02}"));
            h.online(if i % 2 == 0 { host.high_risk() } else { host })
        })
        .collect();
    let a = h.controller("replica-a").await;
    let b = h.controller("replica-b").await;
    for scan in &scans {
        h.create(scan).await;
    }
    let contention = || {
        a.counter("assetscan_lock_contention_total") + b.counter("assetscan_lock_contention_total")
    };
    until("the replicas met at a lock", PATIENCE, async || {
        contention() >= 1.0
    })
    .await;
    h.stubs.osv.faults().release();
    let mut high_risk_keys = BTreeSet::new();
    for scan in &scans {
        let obj = h.wait_terminal(&scan.name_any(), PATIENCE).await;
        let s = obj.status.as_ref().unwrap();
        assert_eq!(s.phase, Some(Status::Finished), "{}", obj.name_any());
        h.mirrored_ticket(&obj).await;
        if s.high_risk == Some(true) {
            assert_eq!(
                s.notification.as_ref().map(|n| n.state),
                Some(NotificationState::Sent)
            );
            high_risk_keys.insert(s.ticket_id.clone().unwrap());
        } else {
            assert_eq!(s.notification, None);
        }
        // Never backwards, whoever wrote.
        let writes = h.status_writes(&obj.name_any());
        for pair in writes.windows(2) {
            assert!(
                fence(&pair[1]) >= fence(&pair[0]),
                "{}: {:?} -> {:?}",
                obj.name_any(),
                fence(&pair[0]),
                fence(&pair[1])
            );
        }
        assert_eq!(
            writes.last().unwrap(),
            &serde_json::to_value(s).unwrap(),
            "{}: the last write is the stored status",
            obj.name_any()
        );
    }
    assert_eq!(high_risk_keys.len(), 3);
    assert_eq!(
        h.delivered_keys(),
        high_risk_keys,
        "one key per high-risk asset"
    );
    assert_eq!(h.stubs.sink.effects(), 3);

    // Both replicas reconciled the objects (which of them ran which asset
    // is up to the race).
    assert!(a.reconciles() >= 1.0 && b.reconciles() >= 1.0);
    // Every acquisition of every asset is in the audit: no two holders of
    // one asset ever overlapped in a claim of the same token.
    let store = h.store().await;
    for scan in &scans {
        let asset = asset_id(&scan.spec.asset_id);
        let tokens: Vec<u64> = store
            .audit(&asset, 1000)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.op() == "acquire" && e.accepted())
            .filter_map(|e| e.token())
            .collect();
        let mut sorted = tokens.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            tokens,
            sorted,
            "{}: tokens drawn in order, never twice",
            scan.name_any()
        );
    }
    a.stop().await;
    b.stop().await;
}

/// Lock holder ids are unique per process (`<instance>#<random>:…`): a
/// replacement started with the same instance name (the same pod name)
/// while the old process still runs cannot re-enter the old process's lock.
/// It finds the asset locked, and takes the run over only after the old
/// process let go, under a holder id of its own and a greater token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_with_the_same_instance_name_cannot_enter_the_old_lock() {
    let mut h = Harness::start().await;
    // No membership: the replacement reconciles the object whichever
    // replica it prefers; the lock alone keeps the two apart.
    h.config.scan_starts.membership_ttl = Duration::ZERO;
    let name = "same-name-01";
    // The old process's run stays in the (held) vulnerability query,
    // holding the asset's lock.
    h.stubs.osv.faults().hold();
    let (old, online) = h
        .run_until("assetscan-0", scan(name).high_risk(), Status::AssetOnline)
        .await;
    let id = asset_id(&online.spec.asset_id);
    let store = h.store().await;
    let claims = async || -> Vec<(String, u64)> {
        store
            .audit(&id, 1000)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.op() == "acquire" && e.accepted())
            .map(|e| (e.get("holder").unwrap().to_owned(), e.token().unwrap()))
            .collect()
    };
    let first = claims().await;
    assert_eq!(first.len(), 1, "{first:?}");
    let (old_holder, old_token) = first[0].clone();

    // The replacement, same instance name, while the old process runs.
    let new = h.controller("assetscan-0").await;
    until(
        "the replacement found the asset locked",
        PATIENCE,
        async || new.counter("assetscan_lock_contention_total") >= 1.0,
    )
    .await;
    assert_eq!(
        claims().await,
        first,
        "no second acquire while the old process holds the lock"
    );
    let lock = get(&h.redis, &store.keys(&id).lock());
    assert_eq!(lock.as_deref(), Some(old_holder.as_str()));

    // The old process stops (its run releases the lock): the replacement
    // takes the run over.
    h.stubs.osv.faults().release();
    let old_contention = old.counter("assetscan_lock_contention_total");
    old.stop().await;
    let done = h.wait_terminal(name, PATIENCE).await;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Status::Finished));

    let audit = store.audit(&id, 1000).await.unwrap();
    let holders: BTreeSet<String> = claims()
        .await
        .into_iter()
        .map(|(holder, _)| holder)
        .collect();
    assert_eq!(holders.len(), 2, "two holder ids: {holders:?}");
    for holder in &holders {
        assert_holder_id(holder, "assetscan-0", name);
    }
    // Replaying the audit: every claim found the lock free (or its own),
    // every release was by the holder.
    let mut holding: Option<&str> = None;
    for e in &audit {
        match (e.op(), e.accepted()) {
            ("acquire", true) if !matches!(e.get("status"), Some("FINISHED" | "FAILED")) => {
                let holder = e.get("holder").unwrap();
                assert!(
                    holding.is_none_or(|h| h == holder),
                    "{holder} acquired while {holding:?} held the lock: {audit:#?}"
                );
                holding = Some(holder);
            }
            ("release", true) => {
                assert_eq!(holding, e.get("holder"), "{audit:#?}");
                holding = None;
            }
            _ => {}
        }
    }
    let new_claims: Vec<u64> = claims()
        .await
        .into_iter()
        .filter(|(holder, _)| *holder != old_holder)
        .map(|(_, t)| t)
        .collect();
    assert!(
        !new_claims.is_empty() && new_claims.iter().all(|t| *t > old_token),
        "the replacement's tokens {new_claims:?} follow {old_token}"
    );
    assert_eq!(
        done.status.as_ref().unwrap().fencing_token,
        new_claims.last().map(|t| *t as i64)
    );
    assert_eq!(old_contention, 0.0, "the old process never waited");
    assert_eq!(h.stubs.sink.effects(), 1, "one notification effect");
    check_status_history(&h, name, &done);
    new.stop().await;
}

/// An executor outside any controller (a zombie, a late one), with its
/// own metrics and Event recorder.
struct Executor {
    api: Api<AssetScan>,
    recorder: Recorder,
    metrics: Metrics,
}

impl Executor {
    fn new(h: &Harness, instance: &str) -> Executor {
        let reporter = Reporter {
            controller: "assetscan-operator".into(),
            instance: Some(instance.into()),
        };
        Executor {
            api: h.api(),
            recorder: Recorder::new(h.client.clone(), reporter),
            metrics: Metrics::new(),
        }
    }

    /// Its status mirror over `view`, the object as it read it.
    fn mirror<'a>(&'a self, view: &'a AssetScan) -> StatusMirror<'a> {
        StatusMirror::new(self.api.clone(), view, &self.recorder, &self.metrics, None)
    }

    fn stale_writes(&self) -> f64 {
        metric(
            &self.metrics.encode(),
            "assetscan_stale_writes_rejected_total",
        )
    }
}

/// `done` as an executor read it when its run began: with the status of
/// the claim.
fn as_at_the_claim(h: &Harness, done: &AssetScan) -> AssetScan {
    let claim = h.status_writes(&done.name_any())[0].clone();
    let mut view = done.clone();
    view.status = Some(serde_json::from_value(claim).unwrap());
    assert_eq!(phase(&view), Some(Status::Init));
    view
}

/// The AssetScan `name` (asset `<name>.dc1.example.com`, high risk) after
/// one replica ran it to its end and stopped.
async fn finished_by_one_replica(name: &str) -> (Harness, AssetScan) {
    let h = Harness::start().await;
    let (a, done) = h.run_to_end("replica-a", scan(name).high_risk()).await;
    a.stop().await;
    (h, done)
}

/// PATCH requests on `/status` seen by the emulator since `mark` (counted
/// with a zero-delay fault rule that matches every one of them).
fn count_status_patches(h: &Harness) -> impl Fn() -> usize + '_ {
    h.emu
        .faults()
        .delay("PATCH", "/status", 1_000_000, Duration::ZERO);
    let before = h.emu.faults().fired().len();
    move || {
        h.emu
            .faults()
            .fired()
            .iter()
            .skip(before)
            .filter(|f| f.method == "PATCH" && f.path.contains("/status"))
            .count()
    }
}

/// A status write that lowers (fencingToken, revision) is refused by the
/// CRD's own rule (422, as the API server would), the StatusMirror counts it
/// as a stale write, reports it once, and does not send it again; a
/// controller that finds a newer status stored sends nothing at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_going_backwards_is_refused_by_the_crd_and_not_retried() {
    let (h, done) = finished_by_one_replica("fence-01").await;
    let stored = status(&done);
    let (token, revision) = (stored.fencing_token.unwrap(), stored.revision.unwrap());
    assert!(revision >= 3);

    // The API server's verdict on raw writes.
    let api = h.api();
    for (t, r) in [(token, revision - 1), (token - 1, revision + 10)] {
        let lower = json!({"fencingToken": t, "revision": r, "phase": "ASSET_OFFLINE"});
        let err = h
            .try_merge_status("fence-01", lower)
            .await
            .expect_err("a lower (token, revision) is refused");
        match err {
            kube::Error::Api(e) => {
                assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
                // Known as the fence by its structured cause, as the
                // operator's status writer knows it.
                assert!(
                    assetscan_operator::kubernetes::crd::is_fence_refusal(&e),
                    "{e:?}"
                );
            }
            other => panic!("expected 422, got {other}"),
        }
    }
    // Equal is accepted (a stall condition, a rescan time under the same
    // ticket revision).
    h.try_merge_status(
        "fence-01",
        json!({"fencingToken": token, "revision": revision}),
    )
    .await
    .expect("same (token, revision) is accepted");

    // A zombie's mirror: it read the object when the run began (the claim's
    // status) and now mirrors its stale ticket: ASSET_OFFLINE, revision 2.
    let patches = count_status_patches(&h);
    let zombie_view = as_at_the_claim(&h, &done);
    let mut stale: Ticket = h.ticket_of(&done).await;
    stale.status = Status::AssetOffline;
    stale.revision = 2;
    stale.facts = Default::default();
    stale.completed_steps = vec![assetscan_operator::domain::ticket::Step::OnlineCheck];
    let zombie = Executor::new(&h, "zombie");
    let mirror = zombie.mirror(&zombie_view);
    mirror.on_ticket(&stale).await;
    assert_eq!(patches(), 1, "one attempt, refused");
    assert_eq!(zombie.stale_writes(), 1.0);
    // Again, and once more through the Terminal path's re-mirror: nothing is
    // sent, nothing counted twice.
    mirror.on_ticket(&stale).await;
    mirror.on_ticket(&stale).await;
    assert_eq!(patches(), 1, "no retry of a refused status");
    assert_eq!(zombie.stale_writes(), 1.0);
    let now = api.get("fence-01").await.unwrap();
    assert_eq!(now.status, done.status, "the newer status stands");
    let warnings: Vec<_> = events_of(&h, "fence-01")
        .await
        .into_iter()
        .filter(|(_, r, _)| r == "StaleStatusRejected")
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");

    // A controller that finds a newer executor's claim in the status (token
    // + 5) while its ticket is older: it does not even try to write.
    h.merge_status(
        "fence-01",
        json!({"fencingToken": token + 5, "revision": 1, "phase": "INIT"}),
    )
    .await;
    let patches = count_status_patches(&h);
    let b = h.controller("replica-b").await;
    let finished = || b.counter("assetscan_reconciles_total{result=\"finished\"}");
    until("replica-b's first reconcile ended", PATIENCE, async || {
        finished() >= 1.0
    })
    .await;
    assert_eq!(b.counter("assetscan_stale_writes_rejected_total"), 1.0);
    // A second reconcile, and nothing else: with no status write sent there
    // is no watch event of its own to loop on. Each reconcile refuses its
    // stale status locally, once.
    h.poke("fence-01").await;
    until("replica-b's second reconcile ended", PATIENCE, async || {
        finished() >= 2.0
    })
    .await;
    assert_eq!(patches(), 0, "no status write was even sent");
    assert_eq!(b.reconciles(), 2.0, "no reconcile loop");
    assert_eq!(b.counter("assetscan_stale_writes_rejected_total"), 2.0);
    let now = api.get("fence-01").await.unwrap();
    assert_eq!(now.status.unwrap().fencing_token, Some(token + 5));
    b.stop().await;
}

/// A claim is recorded only over the object as read before the acquire.
/// After Redis lost its data, an executor that read the object while the run
/// was in progress (status: its claim, token t) draws token t + 1 for the
/// same run. Retried over a refreshed status, that claim would be accepted
/// (t + 1 is above everything stored) and turn the recorded `FINISHED` back
/// into `INIT`, or hand the token to a second executor: it is refused
/// instead, and the run stops before any provider call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_over_a_status_changed_since_the_read_is_not_recorded() {
    let (h, done) = finished_by_one_replica("reclaim-01").await;
    assert_eq!(phase(&done), Some(Status::Finished));
    let token = status(&done).fencing_token.unwrap();

    // The late executor's view: the object as it was at the claim.
    let mut late_view = as_at_the_claim(&h, &done);
    late_view.metadata.resource_version = Some("1".into());
    // Its claim after the data loss: the same run, floor t, token t + 1.
    let mut reclaimed: Ticket = h.ticket_of(&done).await;
    reclaimed.status = Status::Init;
    reclaimed.fencing_token = token as u64 + 1;
    reclaimed.revision = 1;
    reclaimed.facts = Default::default();
    reclaimed.completed_steps = vec![];

    let late = Executor::new(&h, "late");
    let patches = count_status_patches(&h);
    assert!(
        late.mirror(&late_view).record_claim(&reclaimed).await == ClaimRecord::Refused,
        "a claim over a changed object is not recorded"
    );
    assert_eq!(patches(), 1, "one conditional attempt, not retried");
    // An executor that read the recorded end claims nothing: not even sent.
    assert_eq!(
        late.mirror(&done).record_claim(&reclaimed).await,
        ClaimRecord::Refused
    );
    assert_eq!(patches(), 1, "the claim of an ended run is not sent");
    let now = h.api().get("reclaim-01").await.unwrap();
    assert_eq!(now.status, done.status, "the recorded end stands");
}

/// A replica dies while it sends a notification (its lock is neither
/// released nor renewed): the other replica finds the asset locked, and
/// takes the run over once the lock expired, with a larger token, re-sends under the same idempotency
/// key (one effect), and the status never goes backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_dying_mid_notification_is_taken_over() {
    let h = Harness::start().await;
    // replica-a's notification is held in flight.
    h.stubs.sink.faults().hold();
    let takeover = scan("takeover-01").high_risk();
    let (a, notifying) = h.run_until("replica-a", takeover, Status::Notifying).await;
    let before = status(&notifying).clone();
    let id = asset_id(&notifying.spec.asset_id);
    let lock = h.keys(id.as_str()).lock();
    let a_holder = get(&h.redis, &lock).expect("replica-a holds the lock");
    a.kill().await;
    h.stubs.sink.faults().release();
    // The dead replica's lock outlives replica-b's first look (as with a
    // longer ttl), so that replica-b surely meets it; its expiry is then
    // forced rather than waited for.
    hold_lock(&h.redis, &lock, &a_holder);

    let b = h.controller("replica-b").await;
    until("replica-b found the asset locked", PATIENCE, async || {
        b.counter("assetscan_lock_contention_total") >= 1.0
    })
    .await;
    expire_lock(&h.redis, &lock);
    // replica-b's retry was planned at the lock's remaining ttl: a watch
    // event makes it look again now.
    h.poke("takeover-01").await;
    let done = h.wait_terminal("takeover-01", PATIENCE).await;
    assert_finished_and_notified_after(&done, &before);
    assert_eq!(h.stubs.sink.effects(), 1, "one effect");
    assert!(
        h.stubs
            .sink
            .deliveries()
            .iter()
            .all(|d| d.header("idempotency-key") == before.ticket_id.as_deref()),
        "every delivery under the run's key"
    );
    // replica-b claimed the run where replica-a left it.
    let claims: Vec<(String, String)> = h
        .store()
        .await
        .audit(&id, 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.op() == "acquire" && e.accepted())
        .map(|e| {
            (
                e.get("holder")
                    .unwrap()
                    .split(['#', ':'])
                    .next()
                    .unwrap()
                    .to_owned(),
                e.get("status").unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        claims.last(),
        Some(&("replica-b".to_owned(), "NOTIFYING".to_owned())),
        "{claims:?}"
    );
    check_status_history(&h, "takeover-01", &done);
    b.stop().await;
}

/// An executor working from an outdated copy of the object (a lagging watch,
/// a stall) mirrors its ticket again. Its patch must not mix into the newer
/// status stored meanwhile: it is computed against a resourceVersion that is
/// no longer current, and it carries its own token, so it is refused rather
/// than merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_working_from_an_outdated_copy_cannot_mix_into_a_newer_status() {
    let (h, done) = finished_by_one_replica("mix-01").await;
    let token = status(&done).fencing_token.unwrap();

    // A newer executor's run is stored now.
    h.merge_status(
        "mix-01",
        json!({"fencingToken": token + 1, "revision": 1, "run": "newer-run", "phase": "ASSET_ONLINE"}),
    )
    .await;

    // The zombie still holds `done` and mirrors its ticket one revision on.
    let mut ticket = h.ticket_of(&done).await;
    ticket.revision += 1;
    let zombie = Executor::new(&h, "zombie");
    zombie.mirror(&done).on_ticket(&ticket).await;

    let now = h.api().get_status("mix-01").await.unwrap().status.unwrap();
    assert_eq!(
        (
            now.fencing_token,
            now.revision,
            now.run.as_deref(),
            now.phase
        ),
        (
            Some(token + 1),
            Some(1),
            Some("newer-run"),
            Some(Status::AssetOnline)
        ),
        "the newer status is untouched"
    );
    assert_eq!(zombie.stale_writes(), 1.0);
}

/// Two replicas add the finalizer to a new object at once: the first patch
/// to arrive is held back until the other one landed, so its JSON patch's
/// `test` fails (422). That is a race another replica won, not a failure:
/// counted apart, no reconcile failure, and the scan finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalizer_race_another_replica_won_is_no_failure() {
    let mut h = Harness::start().await;
    // No membership: both replicas reconcile the new object (with one, the
    // replica it does not prefer leaves it alone: tests/shares.rs).
    h.config.scan_starts.membership_ttl = Duration::ZERO;
    let race = h.online(scan("race-01"));
    let faults = h.emu.faults();
    faults.delay(
        "PATCH",
        "/assetscans/race-01?",
        1,
        Duration::from_millis(1500),
    );
    let a = h.controller("replica-a").await;
    let b = h.controller("replica-b").await;
    h.create(&race).await;
    let races = || {
        a.counter("assetscan_finalizer_races_total") + b.counter("assetscan_finalizer_races_total")
    };
    until(
        "one replica lost the finalizer race",
        PATIENCE,
        async || races() >= 1.0,
    )
    .await;
    let done = h.wait_terminal("race-01", PATIENCE).await;
    assert_eq!(done.status.unwrap().phase, Some(Status::Finished));
    assert_eq!(done.metadata.finalizers.unwrap().len(), 1);
    for replica in [&a, &b] {
        assert_eq!(
            replica.counter("assetscan_reconcile_failures_total{reason=\"Finalizer\"}"),
            0.0,
            "a race is not a failure"
        );
    }
    a.stop().await;
    b.stop().await;
}

/// With the default progress interval, a scan that takes less than it costs
/// the API server five writes: the finalizer, the claim's status, the
/// confirmed high risk's status (written at once, whatever the interval),
/// the end's status (with the report's name) and one Event; the run's report
/// is one more, counted apart. No write for the other steps in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_scan_costs_five_api_writes_and_its_report() {
    use assetscan_testkit::emulator::Verb;
    let mut h = Harness::start().await;
    h.config.status =
        assetscan_operator::kubernetes::controller::settings::StatusSection::default();
    let quiet = h.online(scan("quiet-01").high_risk());
    let ctl = h.controller("ctl-a").await;
    let before = h.emu.requests();
    h.create(&quiet).await;
    // Waiting on the emulator's record and the operator's metrics, not on
    // GETs: the operator's own requests are the ones counted.
    until(
        "the end and its report written, and the object reconciled since",
        PATIENCE,
        async || {
            let ended = h
                .status_writes("quiet-01")
                .iter()
                .any(|s| s["phase"] == "FINISHED" && s["latestReport"].is_string());
            ended && ctl.counter("assetscan_reconciles_total{result=\"up_to_date\"}") >= 1.0
        },
    )
    .await;
    let after = h.emu.requests();
    assert_eq!(
        after.count("assetscans", Verb::Get) - before.count("assetscans", Verb::Get),
        1,
        "every decision from the watch cache, but the one that starts the run: from the object as stored"
    );
    let done = h.wait_terminal("quiet-01", PATIENCE).await;
    let writes = |resource: &str| {
        [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete]
            .iter()
            .map(|verb| after.count(resource, *verb) - before.count(resource, *verb))
            .sum::<u64>()
    };
    // The test's own create of the AssetScan is not the operator's.
    let object = writes("assetscans") - 1;
    let (status, events, reports) = (
        writes("assetscans/status"),
        writes("events"),
        writes("assetscanreports"),
    );
    assert_eq!(
        (object, status, events, reports),
        (1, 3, 1, 1),
        "finalizer, claim + confirmed risk + end, one Event; the report apart"
    );
    let phases: Vec<String> = h
        .status_writes("quiet-01")
        .iter()
        .filter_map(|s| s["phase"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(phases, ["INIT", "HIGH_RISK_FOUND", "FINISHED"]);
    assert_eq!(
        done.status
            .as_ref()
            .and_then(|s| s.notification.as_ref())
            .map(|n| n.state),
        Some(NotificationState::Sent)
    );
    ctl.stop().await;
}

/// The `RescanPending` condition of an object, as the API server holds it
/// in a status write: `(status, reason, message)`.
fn rescan_pending_in(status: &Value) -> Option<(String, String, String)> {
    let conditions = status["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "RescanPending")?;
    let text = |field: &str| c[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), text("message")))
}

/// The `RescanDeferred` Events about `name`, each with how many times it
/// was seen (its series count; 1 without a series).
async fn deferral_events(h: &Harness, name: &str) -> Vec<(String, i32)> {
    let api: Api<Event> = Api::namespaced(h.client.clone(), NAMESPACE);
    let list = api.list(&ListParams::default()).await.expect("list events");
    (list.items.into_iter())
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reason.as_deref() == Some("RescanDeferred"))
        .map(|e| {
            assert_eq!(e.type_.as_deref(), Some("Normal"));
            let seen = e.series.as_ref().map_or(1, |s| s.count);
            (e.note.unwrap_or_default(), seen)
        })
        .collect()
}

/// When a rescan asked `interval` after the run of `first` (finished) may
/// start, by the rule of `scanStarts.rescanMinInterval`: that long after
/// the run's end as the status records it (`lastScanTime`).
fn allowed_after(first: &AssetScan, interval: Duration) -> k8s_openapi::jiff::Timestamp {
    let ended = status(first)
        .last_scan_time
        .as_ref()
        .expect("lastScanTime")
        .0;
    let interval = k8s_openapi::jiff::SignedDuration::try_from(interval).expect("interval");
    ended.checked_add(interval).expect("a time")
}

/// Reconciles of `ctl` that have finished, whatever their outcome.
fn reconciles_done(ctl: &Running) -> f64 {
    metric(
        &ctl.metrics.encode(),
        "assetscan_reconcile_duration_seconds_count",
    )
}

/// Issue 46: a rescan the annotation asks for right after a run is held
/// back by `scanStarts.rescanMinInterval` (an hour here), and says so: the
/// status shows `RescanPending=True` (`RescanDeferred`) with the start as
/// an RFC 3339 time, the run's end plus the interval, and one Normal
/// Event says the same. Reconciles while it waits (three pokes) write no
/// status and publish no other Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_rescan_says_when_it_starts_in_one_write_and_one_event() {
    use assetscan_testkit::emulator::Verb;
    let mut h = Harness::start().await;
    let interval = Duration::from_secs(3600);
    h.config.scan_starts.rescan_min_interval = interval;
    let (ctl, first) = h.run_to_end("ctl-a", scan("deferred-01").notify(&[])).await;
    let starts_at = allowed_after(&first, interval);
    let writes_before = h.status_writes("deferred-01").len();
    let before = h.emu.requests();
    h.annotate("deferred-01", json!({ RESCAN_ANNOTATION: "t1" }))
        .await;
    let pending = h
        .wait("deferred-01", "RescanPending", PATIENCE, |o| {
            condition(o, ConditionType::RescanPending).is_some()
        })
        .await;
    let (on, reason, message) = condition(&pending, ConditionType::RescanPending).unwrap();
    assert_eq!((on.as_str(), reason.as_str()), ("True", "RescanDeferred"));
    assert!(
        message.contains(&format!("starts at {starts_at}:")),
        "expected a start at {starts_at}: {message}"
    );
    // Held back: still the first run, the request not handled yet.
    assert_eq!(status(&pending).run, status(&first).run);
    assert_eq!(status(&pending).last_handled_rescan, None);
    until_some("the RescanDeferred Event", PATIENCE, async || {
        let events = deferral_events(&h, "deferred-01").await;
        (!events.is_empty()).then_some(())
    })
    .await;

    // More reconciles while it waits, each seen to its end.
    for _ in 0..3 {
        let done = reconciles_done(&ctl);
        h.poke("deferred-01").await;
        until("the poke's reconcile", PATIENCE, async || {
            reconciles_done(&ctl) > done
        })
        .await;
    }
    let events = deferral_events(&h, "deferred-01").await;
    assert_eq!(events, [(message.clone(), 1)], "one Event, published once");
    let after = h.emu.requests();
    let writes = |resource: &str| {
        [Verb::Create, Verb::Update, Verb::Patch]
            .iter()
            .map(|verb| after.count(resource, *verb) - before.count(resource, *verb))
            .sum::<u64>()
    };
    assert_eq!(
        (writes("assetscans/status"), writes("events")),
        (1, 1),
        "the condition's write and its Event; nothing per reconcile"
    );
    let statuses = h.status_writes("deferred-01");
    assert_eq!(statuses.len(), writes_before + 1);
    let last = statuses.last().unwrap();
    assert_eq!(
        rescan_pending_in(last).map(|(_, _, m)| m),
        Some(message),
        "{last:#}"
    );
    check_status_history(
        &h,
        "deferred-01",
        &h.api().get("deferred-01").await.unwrap(),
    );
    ctl.stop().await;
}

/// The deferred run starts once the minimum interval (5 s here) has
/// passed since the last run ended, and its claim ends `RescanPending` in
/// the claim's own write: the write before the claim says when the run
/// starts, the claim and every write after it say nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_of_a_deferred_rescan_s_run_clears_its_condition() {
    let mut h = Harness::start().await;
    let interval = Duration::from_secs(5);
    h.config.scan_starts.rescan_min_interval = interval;
    let (ctl, first) = h.run_to_end("ctl-a", scan("deferred-02").notify(&[])).await;
    let starts_at = allowed_after(&first, interval);
    h.annotate("deferred-02", json!({ RESCAN_ANNOTATION: "t1" }))
        .await;
    let second = h
        .wait("deferred-02", "the rescan's end", PATIENCE, |o| {
            is_terminal(o) && status(o).last_handled_rescan.as_deref() == Some("t1")
        })
        .await;
    assert_eq!(condition(&second, ConditionType::RescanPending), None);
    let started = h.ticket_of(&second).await.created_at;
    assert!(
        started >= u64::try_from(starts_at.as_millisecond()).unwrap(),
        "the run started at {started} ms, before {starts_at}"
    );

    let writes = h.status_writes("deferred-02");
    let claim = (writes.iter())
        .position(|s| s["lastHandledRescan"] == "t1")
        .expect("the claim of the rescan's run");
    let said = rescan_pending_in(&writes[claim - 1]);
    let (on, reason, message) = said.unwrap_or_else(|| panic!("{:#}", writes[claim - 1]));
    assert_eq!((on.as_str(), reason.as_str()), ("True", "RescanDeferred"));
    assert!(
        message.contains(&format!("starts at {starts_at}:")),
        "{message}"
    );
    for write in &writes[claim..] {
        assert_eq!(rescan_pending_in(write), None, "{write:#}");
    }
    let events = deferral_events(&h, "deferred-02").await;
    assert_eq!(events, [(message, 1)]);
    check_status_history(&h, "deferred-02", &second);
    ctl.stop().await;
}
