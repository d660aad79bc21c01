//! Planning: from a ticket, what happens next. Pure, so that a takeover
//! continues from the last confirmed fact: the plan depends on the ticket
//! alone, never on what the process remembers.

use crate::ticket::{Status, Step, Ticket};

/// The next thing to do for a ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Call the outside world for `step`, then record what it learned.
    Call(Step),
    /// Decide from the facts already confirmed (no outside call).
    Decide,
    /// Move to `status` with nothing new to record.
    Move(Status),
    /// The run is over.
    Done,
}

/// `intel_needed` says whether the threat-intel step is needed for this
/// ticket's vulnerabilities under the scan's policy.
pub fn plan(ticket: &Ticket, intel_needed: bool) -> Next {
    match ticket.status {
        Status::Init => Next::Call(Step::OnlineCheck),
        Status::AssetOffline => Next::Move(Status::Finished),
        Status::AssetOnline => Next::Call(Step::VulnQuery),
        Status::VulnCheckDone if intel_needed && !ticket.has_completed(Step::ThreatIntel) => {
            Next::Call(Step::ThreatIntel)
        }
        Status::VulnCheckDone => Next::Decide,
        Status::HighRiskFound => Next::Move(Status::Notifying),
        Status::Notifying => Next::Call(Step::Notify),
        Status::Notified => Next::Move(Status::Finished),
        Status::Finished | Status::Failed => Next::Done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(status: Status) -> Ticket {
        let mut t = Ticket::new("a", "r", 0);
        t.status = status;
        t
    }

    #[test]
    fn every_planned_move_is_legal() {
        for status in Status::ALL {
            for intel in [false, true] {
                if let Next::Move(to) = plan(&at(status), intel) {
                    assert!(status.allows(to), "{status} -> {to}");
                }
            }
        }
    }

    #[test]
    fn a_confirmed_step_is_never_planned_again() {
        let mut t = at(Status::VulnCheckDone);
        assert_eq!(plan(&t, true), Next::Call(Step::ThreatIntel));
        t.completed_steps.push(Step::ThreatIntel);
        assert_eq!(plan(&t, true), Next::Decide);
        assert_eq!(plan(&at(Status::VulnCheckDone), false), Next::Decide);
        // Past the online check, it is never planned again.
        for status in [
            Status::AssetOnline,
            Status::VulnCheckDone,
            Status::HighRiskFound,
            Status::Notifying,
        ] {
            assert_ne!(plan(&at(status), true), Next::Call(Step::OnlineCheck));
        }
    }
}
