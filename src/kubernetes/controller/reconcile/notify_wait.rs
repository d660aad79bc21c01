//! Notification retries keep their backoff. A notify pass that failed
//! (every attempt refused by a channel) ends with the run `NOTIFYING`, its
//! channel's error in the status, and a requeue after `notify.maxBackoff`;
//! but that status write is itself a change the watch delivers, and its
//! reconcile would start the next pass at once. The wait is therefore read
//! from the status, the one record every replica shares: a run whose
//! status shows a failed notify pass is continued no sooner than
//! `notify.maxBackoff` after that failure, whichever replica reconciles it
//! and whatever triggered the reconcile.

use crate::kubernetes::crd::AssetScan;
use assetscan_domain::ticket::{Status, Step};
use assetscan_domain::{RunDecision, RunView};
use k8s_openapi::jiff::Timestamp;
use rand::RngExt;
use std::time::Duration;

/// The status keeps times to the second: a failure recorded at `12:00:07`
/// happened up to a second later.
const TIME_RESOLUTION: Duration = Duration::from_secs(1);

/// How long `decision` on `obj` still waits for its next notify pass, with
/// a little jitter (so that the failed passes of many objects do not all
/// come back at the same instant); `None` unless `decision` continues the
/// alert of a run whose last notify pass failed less than `backoff` ago.
pub(super) fn backoff_left(
    obj: &AssetScan,
    view: &RunView,
    decision: &RunDecision,
    backoff: Duration,
    now: Timestamp,
) -> Option<Duration> {
    if !view.continues_an_alert(decision) {
        return None;
    }
    let status = obj.status.as_ref()?;
    let error = status.last_error.as_ref()?;
    if status.phase != Some(Status::Notifying) || error.step != Step::Notify.as_str() {
        return None;
    }
    let failed_ms = error.at.0.as_millisecond();
    let not_before_ms = failed_ms.saturating_add(millis(backoff + TIME_RESOLUTION));
    let left_ms = not_before_ms.saturating_sub(now.as_millisecond());
    let left = Duration::from_millis(u64::try_from(left_ms).ok().filter(|ms| *ms > 0)?);
    Some(left + jitter(backoff))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Up to a tenth of the backoff.
fn jitter(backoff: Duration) -> Duration {
    let tenth = u64::try_from(backoff.as_millis() / 10).unwrap_or(u64::MAX);
    Duration::from_millis(rand::rng().random_range(0..=tenth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::controller::reconcile::request::run_view;
    use crate::kubernetes::crd::{AssetScanStatus, LastErrorStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn notifying(step: &str, at: Timestamp) -> AssetScan {
        let spec = serde_json::json!({"assetId": "web-01", "target": {}});
        let mut obj = AssetScan::new("web-01", serde_json::from_value(spec).unwrap());
        obj.metadata.uid = Some("1234abcd-5678".into());
        obj.metadata.generation = Some(1);
        obj.status = Some(AssetScanStatus {
            run: Some("1234abcd-g1-s0".into()),
            phase: Some(Status::Notifying),
            last_error: Some(LastErrorStatus {
                step: step.into(),
                message: "503".into(),
                at: Time(at),
                attempt: 4,
            }),
            ..AssetScanStatus::default()
        });
        obj
    }

    #[test]
    fn a_failed_pass_waits_its_backoff_from_the_failure() {
        let failed: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let obj = notifying("notify", failed);
        let view = run_view(&obj);
        let decision = view.decide(failed);
        assert!(view.continues_an_alert(&decision), "{decision:?}");
        let backoff = Duration::from_secs(30);
        let soon = failed + k8s_openapi::jiff::SignedDuration::from_secs(1);
        let left = backoff_left(&obj, &view, &decision, backoff, soon).unwrap();
        assert!(left >= Duration::from_secs(30), "{left:?}");
        assert!(left <= Duration::from_secs(33), "{left:?}");
        let later = failed + k8s_openapi::jiff::SignedDuration::from_secs(31);
        assert_eq!(backoff_left(&obj, &view, &decision, backoff, later), None);
        // Another step's error is not a failed notify pass.
        let other = notifying("vulnQuery", failed);
        let view = run_view(&other);
        assert_eq!(
            backoff_left(&other, &view, &view.decide(soon), backoff, soon),
            None
        );
    }
}
