//! An AssetScan's life under the real controller (emulator + redis-server +
//! provider stubs), where a test needs the controller in this process or
//! the emulator's write history: deletion fences a run in progress,
//! `rescanInterval` schedules the next run, a spec edit never abandons a
//! confirmed risk, and a finished run leaves one report. The lifecycle
//! itself (create, spec edit, rescan annotation, suspend, deletion, report
//! pruning and collection, a stalled executor) is the end-to-end suite's,
//! tests/e2e, which runs on the emulator and on a real cluster.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::controller;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport};
use assetscan_operator::store::StoreError;
use controller_kit::*;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

async fn runs(h: &Harness, asset: &str) -> BTreeSet<String> {
    let runs = h.store().await.runs(&asset_id(asset)).await.unwrap();
    runs.into_iter().collect()
}

fn fence_value(h: &Harness, asset: &str) -> Option<u64> {
    get(&h.redis, &h.keys(asset).fence()).map(|fence| fence.parse().unwrap())
}

async fn patch_spec(h: &Harness, name: &str, spec: serde_json::Value) -> AssetScan {
    h.merge(name, json!({ "spec": spec })).await
}

/// How many whole seconds after a run of `obj` ended its next one is due:
/// its rescan interval and its share of the spread.
fn due_after(h: &Harness, obj: &AssetScan) -> i64 {
    let spread = h.config.scan_starts.rescan_spread;
    let after = controller::rescan_after(obj, spread).expect("rescans");
    after.as_secs() as i64
}

/// Moves `nextScanTime` (time travel for the rescan schedule; the same
/// `(fencingToken, revision)`, so the fence allows it).
async fn set_next_scan(h: &Harness, name: &str, at: Timestamp) {
    let at = Timestamp::from_second(at.as_second()).unwrap();
    h.merge_status(name, json!({"nextScanTime": at.to_string()}))
        .await;
}

/// Deleting an AssetScan whose run is in progress under another live
/// executor: the cleanup does not wait for that executor. It retires the
/// run at once: fails it under a new, greater token (recorded in the audit
/// stream under the cleanup's holder id) and removes its ticket, leaving
/// the object's tombstone. The old executor's late write finds no ticket,
/// its late acquire is refused, and nothing is re-created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_fences_a_run_in_progress_before_deleting_its_ticket() {
    let h = Harness::start().await;
    let name = "fence-del-01";
    let created = h.create(&h.online(scan(name))).await;
    let asset = created.spec.asset_id.as_str();
    // The run the controller will drive (scan 0 of generation 1) is already
    // in progress under another executor, whose watchdog renews its lock.
    let run = controller::run_id(&created, 0);
    let owner = controller::owner_id(&created);
    let id = asset_id(asset);
    let other_store = h.store().await;
    let other_holder = format!("replica-old#0badc0de:{NAMESPACE}/{name}");
    let other_run = claim(&other_store, &id, &run)
        .owner(&owner)
        .holder(&other_holder);
    let mut other = other_run.acquire().await;
    other.walk(&[Status::AssetOnline]).await;
    let other_token = other.token;

    let ctl = h.controller("ctl-a").await;
    h.wait(name, "finalized", Duration::from_secs(10), |o| {
        o.finalizers().iter().any(|f| f == controller::FINALIZER)
    })
    .await;
    until(
        "the controller found the run locked",
        Duration::from_secs(10),
        async || ctl.counter("assetscan_lock_contention_total") >= 1.0,
    )
    .await;

    h.api()
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete");
    // The cleanup does not wait for the lock (renewed all along): the
    // object goes.
    h.wait_gone(name).await;
    assert_eq!(runs(&h, asset).await, BTreeSet::new(), "tickets removed");
    let store = h.store().await;

    // The audit: the cleanup retired the run under its own holder id with a
    // greater token, as FAILED from where it stood.
    let audit = store.audit(&id, 1000).await.unwrap();
    let ticket_key = store.keys(&id).ticket(&run);
    let retired = audit
        .iter()
        .find(|e| e.op() == "retire" && e.get("ticket") == Some(ticket_key.as_str()))
        .unwrap_or_else(|| panic!("the run was not retired: {audit:#?}"));
    let ctl_holder = retired.get("holder").unwrap().to_owned();
    assert_holder_id(&ctl_holder, "ctl-a", name);
    let ctl_token = retired.token().unwrap();
    assert!(
        ctl_token > other_token,
        "a new token fences the old executor: {ctl_token} > {other_token}"
    );
    assert_eq!(
        (retired.get("from"), retired.get("status")),
        (Some("ASSET_ONLINE"), Some("FAILED"))
    );
    assert!(
        !audit
            .iter()
            .any(|e| e.op() == "acquire" && e.accepted() && e.get("holder") != Some(&other_holder)),
        "the cleanup claimed nothing: {audit:#?}"
    );
    assert_eq!(fence_value(&h, asset), Some(ctl_token), "the fence stays");

    // The old executor's late write cannot land, and it cannot start the
    // run again.
    let late = other.refused(Status::VulnCheckDone).await;
    assert!(
        matches!(late, StoreError::TicketNotFound { .. }),
        "{late:?}"
    );
    other.release().await;
    let again = claim(&other_store, &id, &run)
        .owner(&owner)
        .holder(&other_holder)
        .try_acquire()
        .await;
    assert!(
        matches!(again, Err(StoreError::RunRetired { .. })),
        "{:?}",
        again.map(|a| a.writer.ticket)
    );
    assert_eq!(runs(&h, asset).await, BTreeSet::new(), "nothing recreated");
    ctl.stop().await;
}

/// `rescanInterval` sets `nextScanTime` an interval (and the object's
/// share of the spread) after the run ended and the reconcile requeues for
/// then; when it is due, the next scan of the same generation runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescan_interval_schedules_the_next_run() {
    let h = Harness::start().await;
    let (ctl, first) = h
        .run_to_end("ctl-a", scan("rescan-01").rescan_every("1m"))
        .await;
    let asset = first.spec.asset_id.as_str();
    let s = status(&first).clone();
    let ended = s.last_scan_time.clone().expect("lastScanTime").0;
    let next = s.next_scan_time.clone().expect("nextScanTime").0;
    let due = due_after(&h, &first);
    assert!((60..=66).contains(&due), "{due}s");
    assert!((due..=due + 1).contains(&(next.as_second() - ended.as_second())));
    assert!(s.run.as_deref().unwrap().ends_with("-g1-s0"));

    // The reconcile of the finished object requeues for nextScanTime: the
    // delay is nextScanTime less the moment the reconcile decided, which
    // lies between the call and its return (give or take the 1 ms the
    // delay's printed form may round off). Until the watch has delivered
    // the run's last status write to this controller's cache, a reconcile
    // answers with the delivery wait instead: ask again once it has.
    let (called, after, returned) = loop {
        let called = Timestamp::now();
        let action = controller::reconcile(Arc::new(first.clone()), ctl.ctx.clone())
            .await
            .expect("reconcile");
        let returned = Timestamp::now();
        let after = requeue_after(&action).unwrap_or_else(|| panic!("no requeue: {action:?}"));
        if after != controller::DELIVERY_WAIT {
            break (called, after, returned);
        }
        assert!(
            returned.duration_since(ended) < SignedDuration::from_secs(30),
            "the watch never delivered the run's last status write"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let rounding = Duration::from_millis(1);
    let earliest = returned.duration_until(next).unsigned_abs();
    let latest = called.duration_until(next).unsigned_abs();
    assert!(
        after + rounding >= earliest && after <= latest + rounding,
        "requeued after {after:?}, due in {earliest:?}..{latest:?}"
    );
    check_status_history(&h, "rescan-01", &first);

    // Time travel: the rescan is due in 2 s. The next scan runs then.
    set_next_scan(
        &h,
        "rescan-01",
        Timestamp::now() + SignedDuration::from_secs(2),
    )
    .await;
    let second = h
        .wait("rescan-01", "rescanned", Duration::from_secs(30), |o| {
            o.status.as_ref().is_some_and(|s| {
                s.run.as_deref().is_some_and(|r| r.ends_with("-g1-s1"))
                    && s.phase == Some(Status::Finished)
            })
        })
        .await;
    let s2 = status(&second).clone();
    assert_eq!(s2.observed_generation, Some(1));
    assert!(s2.fencing_token > s.fencing_token);
    assert_ne!(s2.ticket_id, s.ticket_id);
    let ended2 = s2.last_scan_time.clone().unwrap().0;
    assert!(ended2 >= ended);
    let due2 = s2.next_scan_time.clone().unwrap().0.as_second() - ended2.as_second();
    assert!((due..=due + 1).contains(&due2), "the same share each time");
    assert_eq!(runs(&h, asset).await.len(), 2);
    ctl.stop().await;
}

/// A spec edit right after a run confirmed a high risk, while the status
/// still shows the step before (the executor died between the ticket write
/// and its mirror): the earlier run's ticket, not its lagging status,
/// decides that the run is finished first, so its alert is sent before the
/// new generation runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_edit_does_not_abandon_a_risk_the_status_does_not_show_yet() {
    let h = Harness::start().await;
    // ctl-a's notification is held in flight, then ctl-a is killed.
    let (a, notifying) = h
        .high_risk_held("ctl-a", "lag-01", Held::Notification)
        .await;
    a.kill().await;
    let store = h.store().await;
    let id = asset_id(&notifying.spec.asset_id);
    remove_lock(&h.redis, &store.keys(&id).lock());
    // The status as if the risk's mirror had been lost: the step before,
    // under the same (token, revision), which the fence accepts.
    let s = status(&notifying).clone();
    h.merge_status(
        "lag-01",
        json!({
            "phase": "VULN_CHECK_DONE", "highRisk": null, "notification": null,
            "fencingToken": s.fencing_token, "revision": s.revision
        }),
    )
    .await;
    let earlier = s.run.clone().unwrap();
    // The spec changes: generation 2, nothing installed (clean).
    let changed = patch_spec(&h, "lag-01", json!({"software": []})).await;
    assert_eq!(changed.metadata.generation, Some(2));
    h.stubs.sink.faults().release();

    let b = h.controller("ctl-b").await;
    let later = earlier.replace("-g1-", "-g2-");
    let done = h
        .wait("lag-01", "generation 2 finished", PATIENCE, |o| {
            run_ended(o, &later)
        })
        .await;
    let ticket = store.get_ticket(&id, &earlier).await.unwrap().unwrap();
    assert_eq!(
        ticket.status,
        Status::Finished,
        "the earlier run was driven to its end"
    );
    assert!(
        ticket
            .facts
            .notification
            .as_ref()
            .is_some_and(|n| !n.receipt.is_empty()),
        "its alert was sent: {:?}",
        ticket.facts.notification
    );
    assert_eq!(h.stubs.sink.effects(), 1, "one alert, one effect");
    assert_eq!(status(&done).observed_generation, Some(2));
    b.stop().await;
}

/// An executor of generation 1 stalls past its lease with its run at
/// `VULN_CHECK_DONE` (the status shows it so); the spec changes and another
/// replica claims generation 2's run. Claiming it ends the earlier run in
/// the same step, so when the stalled executor wakes, its `HIGH_RISK_FOUND`
/// is refused: it cannot confirm a risk that nobody would then notify, were
/// it to die right after (it stops on the refusal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_earlier_run_cannot_confirm_a_risk_after_the_next_generation_is_claimed() {
    let h = Harness::start().await;
    let created = h.create(&h.online(scan("stall-01").high_risk())).await;
    let asset = created.spec.asset_id.as_str();
    let earlier = controller::run_id(&created, 0);
    let store = h.store().await;
    let id = asset_id(asset);
    // The stalled executor: it claimed run g1, found the asset online and
    // its packages, mirrored that, and then stopped being scheduled.
    let mut stalled = claim(&store, &id, &earlier)
        .owner(&controller::owner_id(&created))
        .holder("stalled")
        .acquire()
        .await;
    let ticket = stalled.walk(high_risk_to(Status::VulnCheckDone)).await;
    let stalled = stalled.stall();
    h.merge_status(
        "stall-01",
        json!({
            "phase": "VULN_CHECK_DONE", "run": earlier,
            "ticketId": format!("{asset}/{earlier}"),
            "fencingToken": ticket.fencing_token, "revision": ticket.revision,
            "observedGeneration": 1
        }),
    )
    .await;
    remove_lock(&h.redis, &store.keys(&id).lock());
    let changed = patch_spec(&h, "stall-01", json!({"software": []})).await;
    assert_eq!(changed.metadata.generation, Some(2));

    let b = h.controller("ctl-b").await;
    let later = controller::run_id(&changed, 0);
    h.wait("stall-01", "generation 2 finished", PATIENCE, |o| {
        run_ended(o, &later)
    })
    .await;
    let ended = store.get_ticket(&id, &earlier).await.unwrap().unwrap();
    assert_eq!(ended.status, Status::Failed, "the earlier run was ended");

    let woke = stalled.refused(Status::HighRiskFound).await;
    assert!(
        matches!(woke, StoreError::StaleToken { .. }),
        "the stalled executor's risk is refused: {woke:?}"
    );
    assert_eq!(h.stubs.sink.effects(), 0, "generation 2 is clean");
    b.stop().await;
}

fn reports_api(h: &Harness) -> kube::Api<AssetScanReport> {
    kube::Api::namespaced(h.client.clone(), NAMESPACE)
}

/// The names of `obj`'s reports, oldest run first.
async fn reports_of(h: &Harness, obj: &AssetScan) -> Vec<String> {
    let uid = obj.metadata.uid.clone().unwrap();
    let mut names: Vec<String> = reports_api(h)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        })
        .map(|r| r.name_any())
        .collect();
    names.sort();
    names
}

/// A finished high-risk run leaves one report with what it found and who
/// was told, named from the run, owned by its AssetScan; writing it again
/// (a retry, two replicas at once) is harmless and leaves one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_leaves_exactly_one_report_even_when_replicas_race() {
    let h = Harness::start().await;
    let reported = h.online(scan("report-01").high_risk());
    let asset = reported.spec.asset_id.as_str();
    let [a, b] = h.replicas(["ctl-a", "ctl-b"]).await;
    h.create(&reported).await;
    let done = h
        .wait("report-01", "finished with its report", PATIENCE, |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.phase == Some(Status::Finished) && s.latest_report.is_some())
        })
        .await;
    let s = status(&done).clone();
    let name = s.latest_report.clone().unwrap();
    assert_eq!(name, "report-01-g1-s0");
    let report = reports_api(&h).get(&name).await.unwrap();
    let r = &report.spec;
    assert_eq!(
        (r.asset_id.as_str(), r.scan.as_str(), Some(r.run.as_str())),
        (asset, "report-01", s.run.as_deref())
    );
    assert_eq!(Some(r.ticket_id.as_str()), s.ticket_id.as_deref());
    assert_eq!(
        (Some(r.fencing_token), r.phase),
        (s.fencing_token, Status::Finished)
    );
    assert_eq!(r.verdict, "HighRisk");
    assert!(!r.reasons.is_empty());
    let findings = r.findings.as_ref().expect("findings");
    assert!(findings.total > 0 && !findings.items.is_empty());
    assert_eq!(
        findings.omitted as usize,
        findings.total as usize - findings.items.len()
    );
    let notified = r.notification.as_ref().expect("notification");
    assert!(
        notified.receipts.contains_key("secops-webhook"),
        "{notified:?}"
    );
    assert!(r.started_at.0 <= r.ended_at.0);
    let owner = &report.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        (
            "AssetScan",
            done.metadata.uid.as_deref().unwrap(),
            Some(true)
        )
    );

    // As if the status write that named it had been lost: both replicas
    // reconcile the finished object at once (on its watch event, and once
    // more here) and write the report again. A reconcile decides from its
    // replica's watch cache, which may not hold the edited copy yet: the
    // status naming the report again is what proves the write.
    let forgot = h
        .merge_status("report-01", json!({"latestReport": null}))
        .await;
    let (ra, rb) = tokio::join!(
        controller::reconcile(Arc::new(forgot.clone()), a.ctx.clone()),
        controller::reconcile(Arc::new(forgot.clone()), b.ctx.clone()),
    );
    ra.expect("reconcile a");
    rb.expect("reconcile b");
    let again = h
        .wait("report-01", "naming its report again", PATIENCE, |o| {
            o.status.as_ref().is_some_and(|s| s.latest_report.is_some())
        })
        .await;
    assert_eq!(status(&again).latest_report.as_deref(), Some(name.as_str()));
    assert_eq!(reports_of(&h, &done).await, std::slice::from_ref(&name));
    let unchanged = reports_api(&h).get(&name).await.unwrap();
    assert_eq!(unchanged.spec, report.spec, "written once, never changed");
    a.stop().await;
    b.stop().await;
}

/// The size of `object` as the API server serves it (JSON, `managedFields`
/// included): what etcd holds for a custom resource, and an upper bound of
/// what it holds for an Event (protobuf).
fn stored_bytes(object: &impl serde::Serialize) -> usize {
    serde_json::to_vec(object).expect("serialise").len()
}

/// What the operator keeps in etcd for one asset stays under 6 KB with the
/// defaults, whatever the number of findings (docs/scaling.md, "What the
/// operator keeps in etcd"): the status and its `managedFields`, the label
/// and the finalizer, and the report; the run's Event, about 1 KB, on top
/// until it expires (the API server's `--event-ttl`). Three hundred
/// critical findings, a notification sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assets_bytes_in_etcd_stay_bounded_whatever_the_findings() {
    use assetscan_operator::kubernetes::crd::Package;

    let h = Harness::start().await;
    let ids: Vec<String> = (0..300).map(|i| format!("SYN-{i:04}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let record = json!({
            "id": id,
            "modified": "2024-05-29T23:34:56Z",
            "aliases": [format!("CVE-2024-{:05}", 3094 + i)],
            "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H"}],
            "affected": [{"package": {"name": "bigpkg", "ecosystem": "Debian:10"}}],
        });
        h.stubs
            .osv
            .insert_record(serde_json::to_vec(&record).unwrap())
            .unwrap();
    }
    let listed: Vec<&str> = ids.iter().map(String::as_str).collect();
    h.stubs
        .osv
        .set_package_vulns("Debian:10", "bigpkg", &listed);
    let mut obj = h.online(scan("crowded-01"));
    obj.spec.software = vec![Package {
        name: Some("bigpkg".into()),
        ecosystem: Some("Debian:10".into()),
        version: Some("1.0".into()),
        purl: None,
    }];
    let created = stored_bytes(&h.create(&obj).await);
    let ctl = h.controller("ctl-a").await;
    let done = h.wait_terminal("crowded-01", PATIENCE).await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.high_risk, Some(true));
    assert_eq!(status.vulnerabilities.as_ref().unwrap().total, 300);
    let event = until_some("the run's Event", PATIENCE, async || {
        let events = events_about(&h.client, NAMESPACE, "crowded-01").await;
        events.into_iter().next()
    })
    .await;
    ctl.stop().await;
    let reports: kube::Api<AssetScanReport> = kube::Api::namespaced(h.client.clone(), NAMESPACE);
    let report = reports
        .get(status.latest_report.as_deref().unwrap())
        .await
        .unwrap();
    let findings = report.spec.findings.as_ref().unwrap();
    assert_eq!(findings.items.len() + findings.omitted as usize, 300);
    assert!(!findings.items.is_empty(), "the most severe is listed");
    let stored = h.api().get("crowded-01").await.unwrap();
    let (object, report, event) = (
        stored_bytes(&stored) - created,
        stored_bytes(&report),
        stored_bytes(&event),
    );
    assert!(
        object + report <= 6000 && event <= 1024,
        "object +{object} B, report {report} B, Event {event} B"
    );
}
