//! What a scan costs the API server, and rescans held back by the minimum interval.

use super::*;

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
    (events_about(&h.client, NAMESPACE, name).await.into_iter())
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

/// The deferred run starts once the minimum interval (15 s here) has
/// passed since the last run ended, and its claim ends `RescanPending` in
/// the claim's own write: the write before the claim says when the run
/// starts, the claim and every write after it say nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_of_a_deferred_rescan_s_run_clears_its_condition() {
    let mut h = Harness::start().await;
    // Long enough that the annotation lands inside it on a loaded machine:
    // the test shows a deferral only if the request comes before its end.
    let interval = Duration::from_secs(15);
    h.config.scan_starts.rescan_min_interval = interval;
    let (ctl, first) = h.run_to_end("ctl-a", scan("deferred-02").notify(&[])).await;
    let starts_at = allowed_after(&first, interval);
    h.annotate("deferred-02", json!({ RESCAN_ANNOTATION: "t1" }))
        .await;
    assert!(
        k8s_openapi::jiff::Timestamp::now() < starts_at,
        "the annotation came after the interval had passed ({starts_at}): nothing to defer"
    );
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
