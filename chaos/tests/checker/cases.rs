//! The checker on the recorded baseline: it passes; each invariant is caught alone by its injected violation; the cases around them (two key families, two namespaces, data losses, the strict check, notification times).

use super::*;

#[test]
fn the_recorded_history_passes() {
    let report = check(&baseline());
    assert_eq!(report.violations, vec![]);
    assert_eq!(report.stale_writes_rejected, 1);
    assert_eq!(
        report.duplicates.into_iter().collect::<Vec<_>>(),
        vec![(DuplicateCause::TakeoverAtNotifying, 2)]
    );
}

/// C's retirement as the bridge records it: its legacy copy, then its
/// namespaced copy, alike; the checker takes them as one write.
fn retired_in_both_families(copy: &str) -> History {
    let mut h = baseline();
    let mut second = record(&mut h, C, 2).clone();
    assert_eq!(second.op(), "retire");
    second.fields.insert("ticket".into(), copy.to_owned());
    let at = h
        .audit
        .iter()
        .position(|r| r.identity.asset == C)
        .expect("C")
        + 3;
    h.audit.insert(at, second);
    h
}

#[test]
fn a_run_retired_in_both_key_families_is_one_retirement() {
    let h = retired_in_both_families(&format!("asc:n:default:{{{C}}}:ticket:{RUN_C}"));
    assert_eq!(check(&h).violations, vec![]);
}

#[test]
fn the_same_copy_retired_twice_is_a_write_after_its_end() {
    let h = retired_in_both_families(&format!("asc:{{{C}}}:ticket:{RUN_C}"));
    let found = invariants(&check(&h));
    assert!(found.contains(&Invariant::Terminal), "{found:?}");
}

/// The baseline with an AssetScan of A's assetId in a second namespace,
/// offline, its run recorded under that namespace's keys (the bridge off)
/// from token 1 on: A's legacy stream had drawn tokens 1 and 2.
fn a_in_a_second_namespace() -> History {
    const RUN_D: &str = "dddd4444-g1-s0";
    let mut h = baseline();
    let mut d = Stream::new(A, RUN_D);
    d.namespace = Some("upgrade-b");
    d.acquire(1, "INIT", 1, "replica-2#3")
        .advance(1, "INIT", "ASSET_OFFLINE", 2)
        .advance(1, "ASSET_OFFLINE", "FINISHED", 3);
    h.audit.extend(d.records);
    let finished = status(RUN_D, A, "FINISHED", 1, 3);
    h.objects.push(ObjectHistory {
        name: "upgrade-b/chaos-a".into(),
        namespace: "upgrade-b".into(),
        asset: A.into(),
        kind: Kind::Offline,
        deleted: false,
        status_writes: writes(vec![
            status(RUN_D, A, "INIT", 1, 1),
            status(RUN_D, A, "ASSET_OFFLINE", 1, 2),
            finished.clone(),
        ]),
        last: Some(stored(&["secops-webhook"], &finished)),
    });
    h
}

#[test]
fn two_namespaces_sharing_an_asset_id_are_two_fences() {
    // Its token 1 is not a token of A's legacy stream drawn again, its
    // status is backed by its own stream, and A's alert is not its own.
    let h = a_in_a_second_namespace();
    assert_eq!(check(&h).violations, vec![]);
}

#[test]
fn within_one_namespace_a_token_drawn_again_is_still_caught() {
    let mut h = a_in_a_second_namespace();
    let mut again = Stream::new(A, "eeee5555-g1-s0");
    again.namespace = Some("upgrade-b");
    again
        .acquire(1, "INIT", 1, "replica-0#4")
        .advance(1, "INIT", "ASSET_ONLINE", 2);
    h.audit.extend(again.records);
    let found = invariants(&check(&h));
    assert!(found.contains(&Invariant::Claims), "{found:?}");
}

/// The baseline with one violation injected.
type Injection = fn() -> History;

/// One violation injected into the baseline per invariant, each named by
/// what it does; [`each_invariant_is_caught_alone_by_its_injected_violation`]
/// runs them all.
const INJECTED: &[(Invariant, Injection)] = &[
    (Invariant::Converged, an_object_left_short_of_its_generation),
    (Invariant::DeletedGone, a_deleted_object_with_a_ticket_left),
    (Invariant::Revisions, a_revision_that_does_not_grow),
    (
        Invariant::Transitions,
        a_write_from_where_the_ticket_did_not_stand,
    ),
    (Invariant::Terminal, a_write_after_the_end),
    (Invariant::TicketTokens, a_write_under_an_older_token),
    (
        Invariant::Claims,
        a_token_drawn_twice_for_an_asset_and_acted_on,
    ),
    (Invariant::StatusFence, a_status_going_backwards),
    (
        Invariant::StatusFence,
        an_observed_generation_going_backwards,
    ),
    (Invariant::StatusMirror, a_status_no_accepted_write_backs),
    (Invariant::Verdict, a_wrong_verdict),
    (Invariant::OneKeyPerRun, a_second_key_for_one_run),
    (Invariant::Notified, a_high_risk_left_sending),
    (Invariant::Notified, a_high_risk_not_sent_everywhere),
    (Invariant::Notified, an_alert_for_nothing),
    (
        Invariant::Notified,
        a_send_by_an_executor_that_never_recorded_the_key,
    ),
    (Invariant::Duplicates, a_duplicate_without_a_cause),
    (
        Invariant::NotifiedInTime,
        a_notification_one_ms_over_its_bound,
    ),
    (Invariant::Processes, a_replica_that_exits),
    (Invariant::Processes, a_replica_that_panics),
    (
        Invariant::EveryAlertDelivered,
        a_high_risk_run_failed_by_its_receiver,
    ),
];

/// Every invariant the checker knows, the strict one included, has an
/// injected violation, and each injection is caught by its invariant and
/// no other (`check` for the invariants of a chaos run, `check_strict` for
/// those only the upgrade test asks).
#[test]
fn each_invariant_is_caught_alone_by_its_injected_violation() {
    for invariant in Invariant::STRICT {
        let injected: Vec<_> = INJECTED.iter().filter(|(i, _)| *i == invariant).collect();
        assert!(
            !injected.is_empty(),
            "no violation of {invariant:?} is injected"
        );
        for (_, inject) in injected {
            let history = inject();
            let found = if Invariant::ALL.contains(&invariant) {
                invariants(&check(&history))
            } else {
                assert_eq!(check(&history).violations, vec![], "{invariant:?}");
                strictly(&history)
            };
            assert_eq!(found, BTreeSet::from([invariant]), "{invariant:?}");
        }
    }
}

fn an_object_left_short_of_its_generation() -> History {
    let mut h = baseline();
    let b = object(&mut h, B);
    if let Some(last) = &mut b.last {
        last["metadata"]["generation"] = json!(2);
    }
    h
}

fn a_deleted_object_with_a_ticket_left() -> History {
    let mut h = baseline();
    h.leftover_keys.push(format!("asc:{{{C}}}:ticket:{RUN_C}"));
    h
}

fn a_revision_that_does_not_grow() -> History {
    with_field(A, 2, "revision", "2")
}

fn a_write_from_where_the_ticket_did_not_stand() -> History {
    with_field(A, 2, "from", "INIT")
}

fn a_write_after_the_end() -> History {
    let mut h = baseline();
    let mut late = record(&mut h, A, 5).clone();
    late.fields.insert("token".into(), "3".into());
    late.fields.insert("status".into(), "FINISHED".into());
    late.fields.insert("revision".into(), "9".into());
    h.audit.insert(10, late);
    h
}

fn a_write_under_an_older_token() -> History {
    with_field(A, 2, "token", "0")
}

#[test]
fn a_run_that_ended_before_a_data_loss_and_runs_again_is_caught() {
    let mut h = baseline();
    let b = object(&mut h, B);
    b.status_writes[1].status["phase"] = json!("FINISHED");
    record(&mut h, B, 1)
        .fields
        .insert("to".into(), "FINISHED".into());
    let report = check(&h);
    assert!(
        report.violations.iter().any(
            |v| v.invariant == Invariant::Terminal && v.detail.contains("before the data loss")
        ),
        "{:#?}",
        report.violations
    );
}

/// A claim of `RUN_A`'s generation 2 under token 2, which the asset's first
/// run already drew (Redis lost the fence and handed the number out again),
/// inserted right after `A`'s records; with `acts`, an accepted write under
/// it follows.
fn draw_token_two_again(h: &mut History, acts: bool) {
    let claimed = record(h, A, 5).clone();
    let mut again = claimed.clone();
    again.fields.insert(
        "ticket".into(),
        format!("asc:{{{A}}}:ticket:aaaa1111-g2-s0"),
    );
    again.fields.insert("status".into(), "INIT".into());
    again.fields.insert("revision".into(), "1".into());
    let mut write = again.clone();
    for (field, value) in [
        ("op", "advance"),
        ("from", "INIT"),
        ("to", "ASSET_ONLINE"),
        ("revision", "2"),
    ] {
        write.fields.insert(field.into(), value.into());
    }
    write.fields.remove("status");
    write.fields.remove("holder");
    h.audit.insert(10, again);
    if acts {
        h.audit.insert(11, write);
    }
}

fn a_token_drawn_twice_for_an_asset_and_acted_on() -> History {
    let mut h = baseline();
    draw_token_two_again(&mut h, true);
    h
}

/// The promise is that no two claims of one number both act, not that
/// Redis never hands one out again (it may, after losing its data): a
/// claim that is never recorded and never writes is no violation.
#[test]
fn a_token_drawn_again_by_a_claim_that_never_acts_is_no_violation() {
    let mut h = baseline();
    draw_token_two_again(&mut h, false);
    let report = check(&h);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
}

/// The same for one ticket: `B`'s run, recreated after the data loss, is
/// claimed under the token its first claim had; caught only once a write
/// under it is accepted.
#[test]
fn a_ticket_claimed_again_under_its_old_token_is_caught_once_it_acts() {
    for acts in [false, true] {
        let mut h = baseline();
        let epoch_one: Vec<usize> = h
            .audit
            .iter()
            .enumerate()
            .filter(|(_, r)| r.identity.asset == B && r.epoch == 1)
            .map(|(i, _)| i)
            .collect();
        let keep = if acts { epoch_one.len() } else { 1 };
        for (n, i) in epoch_one.iter().enumerate().rev() {
            if n >= keep {
                h.audit.remove(*i);
            } else {
                h.audit[*i].fields.insert("token".into(), "1".into());
            }
        }
        let report = check(&h);
        let tokens = report
            .violations
            .iter()
            .any(|v| v.invariant == Invariant::TicketTokens);
        assert_eq!(tokens, acts, "acts: {acts}: {:#?}", report.violations);
    }
}

fn a_status_going_backwards() -> History {
    let mut h = baseline();
    object(&mut h, A).status_writes.swap(1, 2);
    h
}

fn an_observed_generation_going_backwards() -> History {
    let mut h = baseline();
    object(&mut h, B).status_writes[3].status["observedGeneration"] = json!(0);
    h
}

fn a_status_no_accepted_write_backs() -> History {
    let mut h = baseline();
    object(&mut h, A).status_writes[1].status["revision"] = json!(3);
    h
}

fn a_wrong_verdict() -> History {
    let mut h = baseline();
    let b = object(&mut h, B);
    if let Some(last) = &mut b.last {
        last["status"]["highRisk"] = json!(false);
    }
    h
}

fn a_second_key_for_one_run() -> History {
    let mut h = baseline();
    h.deliveries[2].key = Some("a.dc1.example.com/another-run".into());
    h
}

fn a_high_risk_left_sending() -> History {
    let mut h = baseline();
    if let Some(last) = &mut object(&mut h, A).last {
        last["status"]["notification"]["state"] = json!("sending");
    }
    h
}

fn a_high_risk_not_sent_everywhere() -> History {
    let mut h = baseline();
    h.deliveries.retain(|d| d.channel == Channel::Webhook);
    h
}

fn an_alert_for_nothing() -> History {
    let mut h = baseline();
    h.deliveries.push(Delivery {
        channel: Channel::Webhook,
        key: Some(key(B, RUN_B)),
        ticket: Some(key(B, RUN_B)),
        token: Some(2),
    });
    h
}

/// The invariants `check_strict` finds in `history`.
fn strictly(history: &History) -> BTreeSet<Invariant> {
    invariants(&check_strict(history))
}

/// A's last run FAILED (a receiver refused it): a chaos run's faults may
/// do that, so `check` finds nothing; the upgrade test's check does.
fn a_high_risk_run_failed_by_its_receiver() -> History {
    let mut h = baseline();
    if let Some(last) = &mut object(&mut h, A).last {
        last["status"]["phase"] = json!("FAILED");
        last["status"]["lastError"] = json!({"step": "notify", "message": "HTTP 401"});
    }
    h
}

#[test]
fn a_failed_high_risk_run_is_a_lost_alert_to_the_strict_check_only() {
    assert_eq!(check_strict(&baseline()).violations, vec![]);
    let h = a_high_risk_run_failed_by_its_receiver();
    let report = check_strict(&h);
    assert!(
        report.violations[0].detail.contains("HTTP 401"),
        "{report:?}"
    );

    let mut h = baseline();
    if let Some(last) = &mut object(&mut h, A).last {
        last["status"]["phase"] = json!("NOTIFYING");
    }
    assert!(strictly(&h).contains(&Invariant::EveryAlertDelivered));

    // FINISHED, but the webhook's deliveries were refused (none accepted).
    let mut h = baseline();
    h.deliveries.retain(|d| d.channel == Channel::WeCom);
    assert_eq!(
        strictly(&h),
        BTreeSet::from([Invariant::Notified, Invariant::EveryAlertDelivered])
    );
}

fn a_duplicate_without_a_cause() -> History {
    let mut h = baseline();
    let again = h.deliveries[2].clone();
    h.deliveries.push(again);
    h
}

/// Token 3 never claimed the run: whoever sent under it had not written
/// NOTIFYING (and the key) first.
fn a_send_by_an_executor_that_never_recorded_the_key() -> History {
    let mut h = baseline();
    let mut forged = h.deliveries[2].clone();
    forged.token = Some(3);
    h.deliveries.push(forged);
    h
}

#[test]
fn a_send_by_an_executor_that_never_recorded_the_key_is_named() {
    let h = a_send_by_an_executor_that_never_recorded_the_key();
    let report = fails_only(&h, Invariant::Notified);
    assert!(
        report.violations[0]
            .detail
            .contains("never held the run at NOTIFYING"),
        "{:#?}",
        report.violations
    );
}

fn a_replica_that_exits() -> History {
    let mut h = baseline();
    h.processes[1].ended = Ended::ByItself("exit status: 101".into());
    h
}

fn a_replica_that_panics() -> History {
    let mut h = baseline();
    h.processes[0].panics = vec!["thread 'tokio-runtime-worker' panicked at src/x.rs:1:1".into()];
    h
}

/// The baseline with A's `NOTIFIED` write made `ms` after its confirmation
/// (A's 4th record, at 1 003 ms; taken over once in between: two passes).
fn a_notified_after(ms: u64) -> History {
    with_field(A, 6, "at", &(1_003 + ms).to_string())
}

/// Two passes are A's bound: a millisecond over it.
fn a_notification_one_ms_over_its_bound() -> History {
    a_notified_after(2 * PASS_MS + 1)
}

#[test]
fn a_notification_later_than_its_bound_is_caught() {
    let report = check(&baseline());
    let times = &report.notification_times;
    assert_eq!(times.observations.len(), 1, "{times:?}");
    let a = &times.observations[0];
    assert_eq!(
        (a.ticket.as_str(), a.ms, a.passes),
        (key(A, RUN_A).as_str(), 3, 2)
    );
    assert_eq!(a.bound_ms, 2 * PASS_MS);

    // Two passes: at the bound passes, a millisecond later does not.
    assert_eq!(check(&a_notified_after(2 * PASS_MS)).violations, vec![]);
    let report = fails_only(
        &a_notification_one_ms_over_its_bound(),
        Invariant::NotifiedInTime,
    );
    assert!(
        report.violations[0]
            .detail
            .contains("over its bound of 68000 ms (2 passes, 0 outages)"),
        "{:#?}",
        report.violations
    );
    assert_eq!(report.notification_times.over_bound(), 1);

    // An outage during the wait adds twice its length and a second; one
    // before or after it adds nothing, one partly within it only that part.
    let outage = |from_ms, to_ms| Outage {
        cause: OutageCause::ApiServer,
        from_ms,
        to_ms,
    };
    let late = 2 * PASS_MS + 2 * 10_000 + 1_000;
    let mut h = a_notified_after(late);
    h.timing.outages = vec![outage(1_500, 11_500), outage(100_000, 110_000)];
    assert_eq!(check(&h).violations, vec![]);
    h.timing.outages = vec![outage(0, 500), outage(2_000_000, 2_010_000)];
    fails_only(&h, Invariant::NotifiedInTime);
    let mut h = a_notified_after(2 * PASS_MS + 2 * 500 + 1_000);
    h.timing.outages = vec![outage(0, 1_503)];
    assert_eq!(check(&h).violations, vec![]);
    let mut h = a_notified_after(2 * PASS_MS + 2 * 500 + 1_001);
    h.timing.outages = vec![outage(0, 1_503)];
    fails_only(&h, Invariant::NotifiedInTime);

    // A history recorded before the bound's settings were is measured,
    // not checked.
    let mut h = a_notified_after(10 * PASS_MS);
    h.timing = Timing::default();
    assert_eq!(check(&h).violations, vec![]);
    assert_eq!(
        check(&h).notification_times.observations[0].ms,
        10 * PASS_MS
    );

    // A time the checker cannot read is not taken for a short one.
    let mut h = baseline();
    record(&mut h, A, 6).fields.remove("at");
    fails_only(&h, Invariant::NotifiedInTime);
}

#[test]
fn a_run_confirmed_again_after_a_data_loss_is_measured_from_its_new_confirmation() {
    let mut a = Stream::new(A, RUN_A);
    a.acquire(1, "INIT", 1, "replica-0#1")
        .advance(1, "INIT", "ASSET_ONLINE", 2)
        .advance(1, "ASSET_ONLINE", "VULN_CHECK_DONE", 3)
        .advance(1, "VULN_CHECK_DONE", "HIGH_RISK_FOUND", 4);
    a.epoch = 1;
    a.acquire(2, "INIT", 1, "replica-1#2")
        .advance(2, "INIT", "ASSET_ONLINE", 2)
        .advance(2, "ASSET_ONLINE", "VULN_CHECK_DONE", 3)
        .advance(2, "VULN_CHECK_DONE", "HIGH_RISK_FOUND", 4)
        .advance(2, "HIGH_RISK_FOUND", "NOTIFYING", 5)
        .advance(2, "NOTIFYING", "NOTIFIED", 6);
    let h = History {
        audit: a.records,
        ..baseline()
    };
    let times = check(&h).notification_times;
    assert_eq!(times.observations.len(), 1, "{times:?}");
    // Confirmed again at 1 007 ms, notified at 1 009 ms; first confirmed
    // at 1 003 ms, before the loss.
    assert_eq!(
        (times.observations[0].epoch, times.observations[0].ms),
        (1, 2)
    );
    assert_eq!(times.across_data_loss_ms, vec![(key(A, RUN_A), 6)]);
}
