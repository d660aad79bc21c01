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

/// The scan number of `run` if it belongs to the object's current generation.
fn scan_of(obj: &AssetScan, run: &str) -> Option<u64> {
    let prefix = run_id(obj, 0);
    let stem = prefix.strip_suffix('0')?;
    run.strip_prefix(stem)?.parse().ok()
}

/// A run of an earlier generation of this object that must still be driven
/// to its end before anything new starts: one that has confirmed a high risk
/// (its notification must not be lost to a spec edit), or any run in flight
/// when the spec only suspended scanning ("a run in flight finishes").
fn unfinished_earlier_run(obj: &AssetScan) -> Option<String> {
    let status = obj.status.as_ref()?;
    let run = status.run.as_deref()?;
    let phase = status.phase?;
    let stem = run_id(obj, 0);
    let uid = stem.split_once("-g")?.0;
    let ours = run.strip_prefix(uid)?.starts_with("-g");
    let alerting = matches!(
        phase,
        Status::HighRiskFound | Status::Notifying | Status::Notified
    );
    (ours && !phase.is_terminal() && (alerting || obj.spec.suspend)).then(|| run.to_owned())
}

pub fn decide(obj: &AssetScan, now: Timestamp) -> RunDecision {
    let status = obj.status.as_ref();
    let current = status
        .and_then(|s| s.run.as_deref())
        .and_then(|run| scan_of(obj, run).map(|scan| (run.to_owned(), scan)));
    let Some((run, scan)) = current else {
        if let Some(unfinished) = unfinished_earlier_run(obj) {
            return RunDecision::Run(unfinished);
        }
        // A new generation (or a new object) starts scan 0.
        return if obj.spec.suspend {
            RunDecision::Suspended
        } else {
            RunDecision::Run(run_id(obj, 0))
        };
    };
    let terminal = status
        .and_then(|s| s.phase)
        .is_some_and(|phase| phase.is_terminal());
    if !terminal {
        return RunDecision::Run(run);
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
        // A spec change (generation 4) leaves the old run behind.
        let changed = scan(4, running.status.clone());
        assert_eq!(
            decide(&changed, at(0)),
            RunDecision::Run("1234abcd-g4-s0".into())
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
        // Before a risk is confirmed, a spec edit starts the new generation.
        let edited = scan(4, at_phase(Status::AssetOnline));
        assert_eq!(
            decide(&edited, at(0)),
            RunDecision::Run("1234abcd-g4-s0".into())
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
