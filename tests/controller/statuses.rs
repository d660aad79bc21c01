//! What the status says: clean runs announced when asked, the examples' terminal phases and status.

use super::*;

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
    let (ctl, done) = examples_run_to_their_end(&h).await;
    for (file, obj) in &done {
        every_example_ends_so(&h, file, obj).await;
    }
    let web = &done["assetscan-debian-openssl.yaml"];
    let billing = &done["assetscan-wecom.yaml"];
    the_debian_web_host_alerts_on_cvss(web);
    the_java_service_alerts_on_kev(billing);
    the_build_runner_is_clean(&done["assetscan-clean.yaml"]);
    the_lab_printer_is_offline(&done["assetscan-offline.yaml"]);
    one_effect_per_high_risk_asset(&h, web, billing);
    the_printer_columns_show_the_status(&h, web).await;
    one_event_per_run_at_most(&h).await;
    assert!(ctl.counter("assetscan_reconciles_total{result=\"finished\"}") >= 4.0);
    assert_eq!(ctl.counter("assetscan_stale_writes_rejected_total"), 0.0);
    ctl.stop().await;
}

/// The examples applied as they are (the inventory says only the lab
/// printer is offline), each waited for to its end: by file.
async fn examples_run_to_their_end(h: &Harness) -> (Running, BTreeMap<String, AssetScan>) {
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
        done.insert(file.clone(), obj);
    }
    (ctl, done)
}

/// Common to every example.
async fn every_example_ends_so(h: &Harness, file: &str, obj: &AssetScan) {
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
    check_status_history(h, &obj.name_any(), obj);
    check_every_transition_mirrored(h, obj).await;
}

/// The Debian web host: critical findings, alert to the webhook.
fn the_debian_web_host_alerts_on_cvss(web: &AssetScan) {
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
}

/// The Java service: known exploited per KEV, alert to WeCom.
fn the_java_service_alerts_on_kev(billing: &AssetScan) {
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
}

/// The build runner: low and medium findings, intel consulted, no alert.
fn the_build_runner_is_clean(runner: &AssetScan) {
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
}

/// The lab printer: offline, nothing else asked.
fn the_lab_printer_is_offline(printer: &AssetScan) {
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
}

/// One notification effect per high-risk asset, under its ticket id.
fn one_effect_per_high_risk_asset(h: &Harness, web: &AssetScan, billing: &AssetScan) {
    let web_key = web.status.as_ref().unwrap().ticket_id.clone().unwrap();
    let billing_key = billing.status.as_ref().unwrap().ticket_id.clone().unwrap();
    assert_eq!(h.stubs.sink.effects(), 1, "webhook: web-01 only");
    assert_eq!(h.delivered_keys(), BTreeSet::from([web_key.clone()]));
    assert_eq!(h.stubs.sink.rejected(), 0, "signed and keyed");
    let wecom = h.stubs.wecom.messages();
    assert_eq!(wecom.len(), 1, "WeCom: billing-api only: {wecom:?}");
    assert!(wecom[0].contains(&billing_key), "{}", wecom[0]);
}

/// The printer columns, as `kubectl get` shows them.
async fn the_printer_columns_show_the_status(h: &Harness, web: &AssetScan) {
    let rows = table(h).await;
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
}

/// Events: at most one per run, at its end: a warning for a high risk;
/// none for a clean or offline end by default (`events.scanComplete`),
/// nor for the steps (the status and the report show those).
async fn one_event_per_run_at_most(h: &Harness) {
    let events = events_of(h, "web-01").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let (type_, reason, note) = &events[0];
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("Warning", "HighRiskFound")
    );
    assert!(note.contains(" is FINISHED "), "{note}");
    let printer_events = events_of(h, "lab-printer-07").await;
    assert!(printer_events.is_empty(), "{printer_events:#?}");
}
