//! Which run an AssetScan is on. Run ids are derived from the object alone
//! (`<uid prefix>-g<generation>-s<scan>`), so every replica that looks at the
//! same object picks the same run, and the ticket's lock and fast path do the
//! rest: two replicas never start two runs of one scan.

use super::request::rescan_interval;
use crate::crd::AssetScan;
use crate::ticket::Status;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// What the controller should do with an object now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunDecision {
    /// Drive this run (new or in progress).
    Run(String),
    /// Nothing to do until `Some(delay)` passes (a scheduled rescan) or the
    /// object changes (`None`).
    Wait(Option<Duration>),
    /// `spec.suspend`: no new run.
    Suspended,
    /// The status names an earlier generation's run that has not ended and
    /// does not show an alert. The status lags the ticket by a write: drive
    /// `earlier` if its ticket shows it alerting (a confirmed risk must not
    /// be lost to a spec edit), else start `next`.
    UnlessEarlierAlerts { earlier: String, next: String },
}

/// The owner of the object's runs in the ticket store: a prefix of its uid,
/// so that a new object of the same name is a new owner.
pub fn owner_id(obj: &AssetScan) -> String {
    obj.metadata
        .uid
        .as_deref()
        .unwrap_or("nouid")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect()
}

/// The run id of scan `scan` of the object's current generation.
pub fn run_id(obj: &AssetScan, scan: u64) -> String {
    let generation = obj.metadata.generation.unwrap_or(0);
    format!("{}-g{generation}-s{scan}", owner_id(obj))
}

/// `(owner, (generation, scan))` of a run id made by [`run_id`]: runs of
/// one owner are ordered by generation, then scan.
pub fn run_order(run: &str) -> Option<(&str, (i64, u64))> {
    let (rest, scan) = run.rsplit_once("-s")?;
    let (owner, generation) = rest.rsplit_once("-g")?;
    Some((owner, (generation.parse().ok()?, scan.parse().ok()?)))
}

/// The scan number of `run` if it belongs to the object's current generation.
fn scan_of(obj: &AssetScan, run: &str) -> Option<u64> {
    let prefix = run_id(obj, 0);
    let stem = prefix.strip_suffix('0')?;
    run.strip_prefix(stem)?.parse().ok()
}

/// The run of an earlier generation of this object that the status names,
/// with its phase there, while it has not ended. It is driven to its end
/// before anything new starts if it confirmed a high risk (its notification
/// must not be lost to a spec edit), or, when the spec only suspended
/// scanning, whatever its phase ("a run in flight finishes").
fn unfinished_earlier_run(obj: &AssetScan) -> Option<(String, Status)> {
    let status = obj.status.as_ref()?;
    let run = status.run.as_deref()?;
    let phase = status.phase?;
    let generation = obj.metadata.generation.unwrap_or(0);
    let earlier =
        run_order(run).is_some_and(|(owner, (of, _))| owner == owner_id(obj) && of < generation);
    (earlier && !phase.is_terminal()).then(|| (run.to_owned(), phase))
}

/// Whether a run at `status` is alerting: its risk is confirmed and its
/// notification not yet recorded as done.
pub fn is_alerting(status: Status) -> bool {
    matches!(
        status,
        Status::HighRiskFound | Status::Notifying | Status::Notified
    )
}

/// The annotation that asks for a new run without a spec change: set it to
/// a new value (a timestamp, say); the status records the value handled.
pub const RESCAN_ANNOTATION: &str = "assetscan.io/rescan";

/// The object's rescan request, if its value is not the one the status
/// recorded as handled.
pub fn rescan_requested(obj: &AssetScan) -> Option<&str> {
    let asked = obj.metadata.annotations.as_ref()?.get(RESCAN_ANNOTATION)?;
    let handled = obj
        .status
        .as_ref()
        .and_then(|s| s.last_handled_rescan.as_deref());
    (handled != Some(asked.as_str())).then_some(asked.as_str())
}

pub fn decide(obj: &AssetScan, now: Timestamp) -> RunDecision {
    let status = obj.status.as_ref();
    let current = status
        .and_then(|s| s.run.as_deref())
        .and_then(|run| scan_of(obj, run).map(|scan| (run.to_owned(), scan)));
    let Some((run, scan)) = current else {
        let next = run_id(obj, 0);
        return match unfinished_earlier_run(obj) {
            Some((earlier, phase)) if is_alerting(phase) || obj.spec.suspend => {
                RunDecision::Run(earlier)
            }
            Some((earlier, _)) => RunDecision::UnlessEarlierAlerts { earlier, next },
            // A new generation (or a new object) starts scan 0.
            None if obj.spec.suspend => RunDecision::Suspended,
            None => RunDecision::Run(next),
        };
    };
    let terminal = status
        .and_then(|s| s.phase)
        .is_some_and(|phase| phase.is_terminal());
    if !terminal {
        return RunDecision::Run(run);
    }
    if rescan_requested(obj).is_some() {
        return if obj.spec.suspend {
            RunDecision::Suspended
        } else {
            RunDecision::Run(run_id(obj, scan + 1))
        };
    }
    let Some(_) = rescan_interval(&obj.spec) else {
        return RunDecision::Wait(None);
    };
    let due = status.and_then(|s| s.next_scan_time.as_ref()).map(|t| t.0);
    match due {
        Some(due) if due > now => {
            let wait = now.duration_until(due).unsigned_abs();
            RunDecision::Wait(Some(wait))
        }
        _ if obj.spec.suspend => RunDecision::Suspended,
        _ => RunDecision::Run(run_id(obj, scan + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{AssetScanSpec, AssetScanStatus, Target};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn scan(generation: i64, status: Option<AssetScanStatus>) -> AssetScan {
        let mut obj = AssetScan::new(
            "web",
            AssetScanSpec {
                asset_id: "web-01".into(),
                target: Target {
                    host: Some("127.0.0.1".into()),
                    ports: vec![22],
                    inventory_ref: None,
                },
                software: vec![],
                policy: Default::default(),
                notify: vec![],
                rescan_interval: Some("1h".into()),
                suspend: false,
                report_history_limit: None,
            },
        );
        obj.metadata.uid = Some("1234abcd-5678-90ef".into());
        obj.metadata.generation = Some(generation);
        obj.status = status;
        obj
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn new_generation_starts_scan_zero_and_continues_it() {
        let obj = scan(3, None);
        assert_eq!(
            decide(&obj, at(0)),
            RunDecision::Run("1234abcd-g3-s0".into())
        );
        let running = scan(
            3,
            Some(AssetScanStatus {
                run: Some("1234abcd-g3-s0".into()),
                phase: Some(Status::VulnCheckDone),
                ..Default::default()
            }),
        );
        assert_eq!(
            decide(&running, at(0)),
            RunDecision::Run("1234abcd-g3-s0".into())
        );
        // A spec change (generation 4) leaves the old run behind, unless
        // its ticket shows an alert the status does not show yet.
        let changed = scan(4, running.status.clone());
        assert_eq!(
            decide(&changed, at(0)),
            RunDecision::UnlessEarlierAlerts {
                earlier: "1234abcd-g3-s0".into(),
                next: "1234abcd-g4-s0".into()
            }
        );
        // A status naming a later generation (an outdated read) is no
        // earlier run to finish.
        let outdated = scan(2, running.status.clone());
        assert_eq!(
            decide(&outdated, at(0)),
            RunDecision::Run("1234abcd-g2-s0".into())
        );
    }

    #[test]
    fn an_earlier_generation_with_a_confirmed_risk_finishes_first() {
        let at_phase = |phase| {
            Some(AssetScanStatus {
                run: Some("1234abcd-g3-s0".into()),
                phase: Some(phase),
                ..Default::default()
            })
        };
        for phase in [Status::HighRiskFound, Status::Notifying, Status::Notified] {
            let edited = scan(4, at_phase(phase));
            assert_eq!(
                decide(&edited, at(0)),
                RunDecision::Run("1234abcd-g3-s0".into()),
                "{phase}"
            );
        }
        // Before the status shows a risk, the earlier run's ticket decides.
        let edited = scan(4, at_phase(Status::AssetOnline));
        assert_eq!(
            decide(&edited, at(0)),
            RunDecision::UnlessEarlierAlerts {
                earlier: "1234abcd-g3-s0".into(),
                next: "1234abcd-g4-s0".into()
            }
        );
        // Suspending lets any run in flight finish, then nothing starts.
        let mut suspended = scan(4, at_phase(Status::AssetOnline));
        suspended.spec.suspend = true;
        assert_eq!(
            decide(&suspended, at(0)),
            RunDecision::Run("1234abcd-g3-s0".into())
        );
        let mut done = scan(4, at_phase(Status::Finished));
        done.spec.suspend = true;
        assert_eq!(decide(&done, at(0)), RunDecision::Suspended);
        // Another object's run (different uid) is not ours to finish.
        let mut other = scan(4, at_phase(Status::Notifying));
        other.status.as_mut().unwrap().run = Some("ffff0000-g3-s0".into());
        assert_eq!(
            decide(&other, at(0)),
            RunDecision::Run("1234abcd-g4-s0".into())
        );
    }

    #[test]
    fn a_new_rescan_value_starts_one_run_once_the_current_one_ended() {
        let with = |phase, handled: Option<&str>, asked: Option<&str>| {
            let mut obj = scan(
                3,
                Some(AssetScanStatus {
                    run: Some("1234abcd-g3-s1".into()),
                    phase: Some(phase),
                    last_handled_rescan: handled.map(str::to_owned),
                    ..Default::default()
                }),
            );
            obj.spec.rescan_interval = None;
            obj.metadata.annotations = asked.map(|value| {
                [(RESCAN_ANNOTATION.to_owned(), value.to_owned())]
                    .into_iter()
                    .collect()
            });
            obj
        };
        let next = RunDecision::Run("1234abcd-g3-s2".into());
        let ended = Status::Finished;
        assert_eq!(decide(&with(ended, None, Some("t1")), at(0)), next);
        assert_eq!(decide(&with(ended, Some("t0"), Some("t1")), at(0)), next);
        assert_eq!(decide(&with(Status::Failed, None, Some("t1")), at(0)), next);
        // The same value again, or none: nothing to do.
        let nothing = RunDecision::Wait(None);
        assert_eq!(decide(&with(ended, Some("t1"), Some("t1")), at(0)), nothing);
        assert_eq!(decide(&with(ended, Some("t1"), None), at(0)), nothing);
        // A request during a run waits for its end.
        let running = RunDecision::Run("1234abcd-g3-s1".into());
        let during = with(Status::VulnCheckDone, Some("t0"), Some("t1"));
        assert_eq!(decide(&during, at(0)), running);
        // Suspended: no new run, whatever is asked.
        let mut suspended = with(ended, Some("t0"), Some("t1"));
        suspended.spec.suspend = true;
        assert_eq!(decide(&suspended, at(0)), RunDecision::Suspended);
    }

    #[test]
    fn runs_of_one_owner_are_ordered_by_generation_then_scan() {
        assert_eq!(run_order("1234abcd-g3-s12"), Some(("1234abcd", (3, 12))));
        assert!(run_order("1234abcd-g3-s0") < run_order("1234abcd-g3-s1"));
        assert!(run_order("1234abcd-g3-s9") < run_order("1234abcd-g4-s0"));
        for bad in ["", "abc", "1234abcd-gx-s0", "1234abcd-g3-sy", "1234abcd-s3"] {
            assert_eq!(run_order(bad), None, "{bad}");
        }
    }

    #[test]
    fn terminal_runs_wait_for_the_rescan_then_start_the_next_scan() {
        let done = AssetScanStatus {
            run: Some("1234abcd-g3-s4".into()),
            phase: Some(Status::Finished),
            next_scan_time: Some(Time(at(3600))),
            ..Default::default()
        };
        let obj = scan(3, Some(done));
        assert_eq!(
            decide(&obj, at(600)),
            RunDecision::Wait(Some(Duration::from_secs(3000)))
        );
        assert_eq!(
            decide(&obj, at(3600)),
            RunDecision::Run("1234abcd-g3-s5".into())
        );
        let mut suspended = obj.clone();
        suspended.spec.suspend = true;
        assert_eq!(decide(&suspended, at(3600)), RunDecision::Suspended);
        let mut once = obj;
        once.spec.rescan_interval = None;
        assert_eq!(decide(&once, at(9999)), RunDecision::Wait(None));
    }
}
