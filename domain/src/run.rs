//! Which run an AssetScan is on. Run ids are derived from the object alone
//! (`<uid prefix>-g<generation>-s<scan>`), so every replica that looks at the
//! same object picks the same run, and the ticket's lock and fast path do the
//! rest: two replicas never start two runs of one scan.
//!
//! The decision reads a [`RunView`]: what the Kubernetes adapter takes of
//! the object (its uid, generation, spec switches, the rescan annotation and
//! the status's record of the last run), so that the model check and the
//! tests decide exactly as the controller does, without Kubernetes.

use crate::ticket::Status;
use jiff::Timestamp;
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

/// The object as the run decision sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunView {
    /// The owner of the object's runs in the ticket store ([`owner_id`]).
    pub owner: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.suspend`.
    pub suspend: bool,
    /// `spec.rescanInterval`, if set and well-formed.
    pub rescan_every: Option<Duration>,
    /// The value of the rescan annotation ([`RESCAN_ANNOTATION`]), if set.
    pub rescan_asked: Option<String>,
    /// The least time between the end of a run and a run the annotation
    /// asks for: changing the annotation's value again and again starts a
    /// run at most this often (`Duration::ZERO`: at every change).
    pub rescan_min_interval: Duration,
    /// What the status records of the last run.
    pub recorded: Recorded,
}

/// What a status records of the object's last run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub run: Option<String>,
    pub phase: Option<Status>,
    /// When the next run is due (`status.nextScanTime`).
    pub next_scan: Option<Timestamp>,
    /// The rescan annotation's value the last run was started for.
    pub handled_rescan: Option<String>,
    /// When the last run ended (`status.lastScanTime`).
    pub ended: Option<Timestamp>,
}

/// The owner of an object's runs: a prefix of its uid, so that a new object
/// of the same name is a new owner.
pub fn owner_id(uid: Option<&str>) -> String {
    uid.unwrap_or("nouid")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect()
}

/// `(owner, (generation, scan))` of a run id made by [`RunView::run_id`]:
/// runs of one owner are ordered by generation, then scan.
pub fn run_order(run: &str) -> Option<(&str, (i64, u64))> {
    let (rest, scan) = run.rsplit_once("-s")?;
    let (owner, generation) = rest.rsplit_once("-g")?;
    Some((owner, (generation.parse().ok()?, scan.parse().ok()?)))
}

/// The annotation that asks for a new run without a spec change: set it to
/// a new value (a timestamp, say); the status records the value handled.
pub const RESCAN_ANNOTATION: &str = "assetscan.io/rescan";

impl RunView {
    /// The run id of scan `scan` of the object's current generation.
    pub fn run_id(&self, scan: u64) -> String {
        format!("{}-g{}-s{scan}", self.owner, self.generation)
    }

    /// The scan number of `run` if it belongs to the current generation.
    fn scan_of(&self, run: &str) -> Option<u64> {
        match run_order(run)? {
            (owner, (generation, scan)) if owner == self.owner && generation == self.generation => {
                Some(scan)
            }
            _ => None,
        }
    }

    /// The run of an earlier generation of this object that the status
    /// names, with its phase there, while it has not ended. It is driven to
    /// its end before anything new starts if it confirmed a high risk (its
    /// notification must not be lost to a spec edit), or, when the spec
    /// only suspended scanning, whatever its phase ("a run in flight
    /// finishes").
    fn unfinished_earlier_run(&self) -> Option<(String, Status)> {
        let run = self.recorded.run.as_deref()?;
        let phase = self.recorded.phase?;
        let earlier = run_order(run)
            .is_some_and(|(owner, (of, _))| owner == self.owner && of < self.generation);
        (earlier && !phase.is_terminal()).then(|| (run.to_owned(), phase))
    }

    /// Whether `decision` continues the run the status shows alerting
    /// ([`Status::is_alerting`]: its high risk confirmed, the run not ended): what
    /// is left of it is its notification, or the write that ends it.
    pub fn continues_an_alert(&self, decision: &RunDecision) -> bool {
        match decision {
            RunDecision::Run(run) => {
                self.recorded.run.as_deref() == Some(run.as_str())
                    && self.recorded.phase.is_some_and(Status::is_alerting)
            }
            _ => false,
        }
    }

    /// The rescan request, if its value is not the one the status recorded
    /// as handled.
    pub fn rescan_requested(&self) -> Option<&str> {
        let asked = self.rescan_asked.as_deref()?;
        (self.recorded.handled_rescan.as_deref() != Some(asked)).then_some(asked)
    }

    /// What to do with the object at `now`.
    pub fn decide(&self, now: Timestamp) -> RunDecision {
        let current = (self.recorded.run.as_deref())
            .and_then(|run| self.scan_of(run).map(|scan| (run.to_owned(), scan)));
        let Some((run, scan)) = current else {
            return self.decide_new_generation();
        };
        if !self.recorded.phase.is_some_and(Status::is_terminal) {
            return RunDecision::Run(run);
        }
        // A rescan asked too soon after the last run waits for the minimum
        // interval, unless the schedule is due first.
        let too_soon = match self.rescan_requested() {
            Some(_) => match self.rescan_allowed_in(now) {
                None => return self.unless_suspended(scan + 1),
                wait => wait,
            },
            None => None,
        };
        if self.rescan_every.is_none() {
            return RunDecision::Wait(too_soon);
        }
        match self.recorded.next_scan {
            Some(due) if due > now => {
                let scheduled = now.duration_until(due).unsigned_abs();
                RunDecision::Wait(Some(too_soon.map_or(scheduled, |w| w.min(scheduled))))
            }
            _ => self.unless_suspended(scan + 1),
        }
    }

    /// How long until a rescan the annotation asks for may start: `None`
    /// when it may now (the minimum interval since the last run's end has
    /// passed, or no end is recorded).
    fn rescan_allowed_in(&self, now: Timestamp) -> Option<Duration> {
        let ended = self.recorded.ended?;
        let since = ended.duration_until(now);
        let since = Duration::try_from(since).unwrap_or(Duration::ZERO);
        self.rescan_min_interval
            .checked_sub(since)
            .filter(|left| !left.is_zero())
    }

    /// No run of the current generation is recorded: an earlier one may
    /// have to finish first; else scan 0 starts.
    fn decide_new_generation(&self) -> RunDecision {
        let next = self.run_id(0);
        match self.unfinished_earlier_run() {
            Some((earlier, phase)) if phase.is_alerting() || self.suspend => {
                RunDecision::Run(earlier)
            }
            Some((earlier, _)) => RunDecision::UnlessEarlierAlerts { earlier, next },
            None => self.unless_suspended(0),
        }
    }

    fn unless_suspended(&self, scan: u64) -> RunDecision {
        if self.suspend {
            RunDecision::Suspended
        } else {
            RunDecision::Run(self.run_id(scan))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(generation: i64, recorded: Option<Recorded>) -> RunView {
        RunView {
            owner: owner_id(Some("1234abcd-5678-90ef")),
            generation,
            rescan_every: Some(Duration::from_secs(3600)),
            recorded: recorded.unwrap_or_default(),
            ..Default::default()
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn only_the_run_the_status_shows_alerting_continues_an_alert() {
        let at_phase = |phase| {
            scan(
                3,
                Some(Recorded {
                    run: Some("1234abcd-g3-s0".into()),
                    phase: Some(phase),
                    ..Default::default()
                }),
            )
        };
        let this = RunDecision::Run("1234abcd-g3-s0".into());
        for phase in [Status::HighRiskFound, Status::Notifying, Status::Notified] {
            assert!(at_phase(phase).continues_an_alert(&this), "{phase:?}");
        }
        for phase in [Status::Init, Status::VulnCheckDone, Status::Finished] {
            assert!(!at_phase(phase).continues_an_alert(&this), "{phase:?}");
        }
        let notifying = at_phase(Status::Notifying);
        assert!(!notifying.continues_an_alert(&RunDecision::Run("1234abcd-g3-s1".into())));
        assert!(!notifying.continues_an_alert(&RunDecision::Wait(None)));
        // An earlier generation's alerting run, driven before anything new.
        let earlier = scan(
            4,
            Some(Recorded {
                run: Some("1234abcd-g3-s0".into()),
                phase: Some(Status::HighRiskFound),
                ..Default::default()
            }),
        );
        let decision = earlier.decide(at(0));
        assert!(earlier.continues_an_alert(&decision), "{decision:?}");
    }

    #[test]
    fn new_generation_starts_scan_zero_and_continues_it() {
        let obj = scan(3, None);
        assert_eq!(obj.decide(at(0)), RunDecision::Run("1234abcd-g3-s0".into()));
        let running = scan(
            3,
            Some(Recorded {
                run: Some("1234abcd-g3-s0".into()),
                phase: Some(Status::VulnCheckDone),
                ..Default::default()
            }),
        );
        assert_eq!(
            running.decide(at(0)),
            RunDecision::Run("1234abcd-g3-s0".into())
        );
        // A spec change (generation 4) leaves the old run behind, unless
        // its ticket shows an alert the status does not show yet.
        let changed = scan(4, Some(running.recorded.clone()));
        assert_eq!(
            changed.decide(at(0)),
            RunDecision::UnlessEarlierAlerts {
                earlier: "1234abcd-g3-s0".into(),
                next: "1234abcd-g4-s0".into()
            }
        );
        // A status naming a later generation (an outdated read) is no
        // earlier run to finish.
        let outdated = scan(2, Some(running.recorded.clone()));
        assert_eq!(
            outdated.decide(at(0)),
            RunDecision::Run("1234abcd-g2-s0".into())
        );
    }

    #[test]
    fn an_earlier_generation_with_a_confirmed_risk_finishes_first() {
        let at_phase = |phase| {
            Some(Recorded {
                run: Some("1234abcd-g3-s0".into()),
                phase: Some(phase),
                ..Default::default()
            })
        };
        for phase in [Status::HighRiskFound, Status::Notifying, Status::Notified] {
            let edited = scan(4, at_phase(phase));
            assert_eq!(
                edited.decide(at(0)),
                RunDecision::Run("1234abcd-g3-s0".into()),
                "{phase}"
            );
        }
        // Before the status shows a risk, the earlier run's ticket decides.
        let edited = scan(4, at_phase(Status::AssetOnline));
        assert_eq!(
            edited.decide(at(0)),
            RunDecision::UnlessEarlierAlerts {
                earlier: "1234abcd-g3-s0".into(),
                next: "1234abcd-g4-s0".into()
            }
        );
        // Suspending lets any run in flight finish, then nothing starts.
        let mut suspended = scan(4, at_phase(Status::AssetOnline));
        suspended.suspend = true;
        assert_eq!(
            suspended.decide(at(0)),
            RunDecision::Run("1234abcd-g3-s0".into())
        );
        let mut done = scan(4, at_phase(Status::Finished));
        done.suspend = true;
        assert_eq!(done.decide(at(0)), RunDecision::Suspended);
        // Another object's run (different uid) is not ours to finish.
        let mut other = scan(4, at_phase(Status::Notifying));
        other.recorded.run = Some("ffff0000-g3-s0".into());
        assert_eq!(
            other.decide(at(0)),
            RunDecision::Run("1234abcd-g4-s0".into())
        );
    }

    #[test]
    fn a_new_rescan_value_starts_one_run_once_the_current_one_ended() {
        let with = |phase, handled: Option<&str>, asked: Option<&str>| {
            let mut obj = scan(
                3,
                Some(Recorded {
                    run: Some("1234abcd-g3-s1".into()),
                    phase: Some(phase),
                    handled_rescan: handled.map(str::to_owned),
                    ..Default::default()
                }),
            );
            obj.rescan_every = None;
            obj.rescan_asked = asked.map(str::to_owned);
            obj
        };
        let next = RunDecision::Run("1234abcd-g3-s2".into());
        let ended = Status::Finished;
        assert_eq!(with(ended, None, Some("t1")).decide(at(0)), next);
        assert_eq!(with(ended, Some("t0"), Some("t1")).decide(at(0)), next);
        assert_eq!(with(Status::Failed, None, Some("t1")).decide(at(0)), next);
        // The same value again, or none: nothing to do.
        let nothing = RunDecision::Wait(None);
        assert_eq!(with(ended, Some("t1"), Some("t1")).decide(at(0)), nothing);
        assert_eq!(with(ended, Some("t1"), None).decide(at(0)), nothing);
        // A request during a run waits for its end.
        let running = RunDecision::Run("1234abcd-g3-s1".into());
        let during = with(Status::VulnCheckDone, Some("t0"), Some("t1"));
        assert_eq!(during.decide(at(0)), running);
        // Suspended: no new run, whatever is asked.
        let mut suspended = with(ended, Some("t0"), Some("t1"));
        suspended.suspend = true;
        assert_eq!(suspended.decide(at(0)), RunDecision::Suspended);
    }

    #[test]
    fn a_rescan_asked_too_soon_waits_for_the_minimum_interval() {
        let mut obj = scan(
            3,
            Some(Recorded {
                run: Some("1234abcd-g3-s1".into()),
                phase: Some(Status::Finished),
                handled_rescan: Some("t0".into()),
                ended: Some(at(100)),
                ..Default::default()
            }),
        );
        obj.rescan_every = None;
        obj.rescan_asked = Some("t1".into());
        obj.rescan_min_interval = Duration::from_secs(30);
        let next = RunDecision::Run("1234abcd-g3-s2".into());
        assert_eq!(
            obj.decide(at(110)),
            RunDecision::Wait(Some(Duration::from_secs(20)))
        );
        assert_eq!(obj.decide(at(130)), next);
        // A scheduled rescan due sooner is not held back.
        obj.rescan_every = Some(Duration::from_secs(3600));
        obj.recorded.next_scan = Some(at(105));
        assert_eq!(obj.decide(at(110)), next);
        obj.recorded.next_scan = Some(at(120));
        assert_eq!(
            obj.decide(at(110)),
            RunDecision::Wait(Some(Duration::from_secs(10)))
        );
        // No minimum: every new value starts a run at once.
        obj.rescan_min_interval = Duration::ZERO;
        assert_eq!(obj.decide(at(110)), next);
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
        let done = Recorded {
            run: Some("1234abcd-g3-s4".into()),
            phase: Some(Status::Finished),
            next_scan: Some(at(3600)),
            ..Default::default()
        };
        let obj = scan(3, Some(done));
        assert_eq!(
            obj.decide(at(600)),
            RunDecision::Wait(Some(Duration::from_secs(3000)))
        );
        assert_eq!(
            obj.decide(at(3600)),
            RunDecision::Run("1234abcd-g3-s5".into())
        );
        let mut suspended = obj.clone();
        suspended.suspend = true;
        assert_eq!(suspended.decide(at(3600)), RunDecision::Suspended);
        let mut once = obj;
        once.rescan_every = None;
        assert_eq!(once.decide(at(9999)), RunDecision::Wait(None));
    }
}
