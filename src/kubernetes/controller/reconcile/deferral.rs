//! A rescan the annotation asks for that `scanStarts.rescanMinInterval`
//! holds back, read off the run decision: the domain decides to wait
//! ([`RunView::decide`]); this says when the run it waits for starts, for
//! the status's `RescanPending` condition and its Event.

use crate::kubernetes::controller::status::halt::DeferredRescan;
use assetscan_domain::{RunDecision, RunView};
use k8s_openapi::jiff::SignedDuration;

/// The rescan `decision` holds back, if it does. The decision waits while
/// the view carries a rescan request not handled yet only for the minimum
/// interval (a request past it starts a run at once), so the run starts
/// `rescan_min_interval` after the last run ended, or with the scheduled
/// rescan if that is due first. `None` while suspended: no run starts.
///
/// Read from the status and the setting, never from the clock, so that
/// every reconcile while the rescan waits finds the same start.
pub(super) fn deferred_rescan(view: &RunView, decision: &RunDecision) -> Option<DeferredRescan> {
    if !matches!(decision, RunDecision::Wait(Some(_))) || view.suspend {
        return None;
    }
    view.rescan_requested()?;
    let ended = view.recorded.ended?;
    let interval = SignedDuration::try_from(view.rescan_min_interval).ok()?;
    let after_interval = ended.checked_add(interval).ok()?;
    let scheduled = (view.rescan_every)
        .and(view.recorded.next_scan)
        .filter(|due| *due < after_interval);
    Some(DeferredRescan {
        starts_at: scheduled.unwrap_or(after_interval),
        ended,
        scheduled: scheduled.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::Recorded;
    use assetscan_domain::ticket::Status;
    use k8s_openapi::jiff::Timestamp;
    use std::time::Duration;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// Run s1 ended at 1000 s, having handled `t0`; `t1` is asked, and
    /// rescans the annotation asks for wait an hour.
    fn asked_after_a_run() -> RunView {
        RunView {
            owner: "1234abcd".into(),
            generation: 3,
            rescan_asked: Some("t1".into()),
            rescan_min_interval: Duration::from_secs(3600),
            recorded: Recorded {
                run: Some("1234abcd-g3-s1".into()),
                phase: Some(Status::Finished),
                handled_rescan: Some("t0".into()),
                ended: Some(at(1000)),
                ..Recorded::default()
            },
            ..RunView::default()
        }
    }

    /// The start said is the first second the domain's decision runs.
    fn check_start_against_the_decision(view: &RunView, start: i64) {
        let before = view.decide(at(start - 1));
        let deferred = deferred_rescan(view, &before).expect("deferred");
        assert_eq!(deferred.starts_at, at(start));
        assert_eq!(deferred.ended, at(1000));
        assert!(matches!(view.decide(at(start)), RunDecision::Run(_)));
        // The same start at every reconcile while it waits.
        assert_eq!(
            deferred_rescan(view, &view.decide(at(1001))),
            Some(deferred)
        );
    }

    #[test]
    fn the_start_is_the_minimum_interval_after_the_last_run_s_end() {
        let view = asked_after_a_run();
        check_start_against_the_decision(&view, 4600);
        let deferred = deferred_rescan(&view, &view.decide(at(1001))).unwrap();
        assert!(!deferred.scheduled);
        assert!(
            deferred
                .message()
                .contains("starts at 1970-01-01T01:16:40Z")
        );
    }

    #[test]
    fn a_scheduled_rescan_due_first_is_the_start() {
        let mut view = asked_after_a_run();
        view.rescan_every = Some(Duration::from_secs(7200));
        view.recorded.next_scan = Some(at(2000));
        check_start_against_the_decision(&view, 2000);
        assert!(
            deferred_rescan(&view, &view.decide(at(1001)))
                .unwrap()
                .scheduled
        );
        // Due after the interval: the interval is the start.
        view.recorded.next_scan = Some(at(9000));
        check_start_against_the_decision(&view, 4600);
    }

    #[test]
    fn nothing_is_deferred_without_a_new_request_or_while_suspended() {
        let mut handled = asked_after_a_run();
        handled.rescan_asked = Some("t0".into());
        assert_eq!(deferred_rescan(&handled, &handled.decide(at(1001))), None);
        let mut suspended = asked_after_a_run();
        suspended.suspend = true;
        assert_eq!(
            deferred_rescan(&suspended, &suspended.decide(at(1001))),
            None
        );
        let view = asked_after_a_run();
        assert_eq!(deferred_rescan(&view, &view.decide(at(4600))), None);
        // A run in progress is driven; its request waits for its end, not
        // for the interval.
        let mut running = asked_after_a_run();
        running.recorded.phase = Some(Status::VulnCheckDone);
        assert_eq!(deferred_rescan(&running, &running.decide(at(1001))), None);
    }
}
