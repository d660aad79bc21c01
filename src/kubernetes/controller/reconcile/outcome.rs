//! What the controller does once the pipeline answered: for each
//! [`Outcome`], the result it counts, what it tells (the status, an Event,
//! the log) and when it looks again.

use crate::kubernetes::controller::status::mirror::StatusMirror;
use crate::pipeline::Outcome;
use crate::telemetry::Metrics;
use assetscan_domain::ticket::{Status, Ticket};
use kube::runtime::controller::Action;
use rand::RngExt;
use std::time::Duration;
use tracing::info;

/// An outcome, settled.
#[derive(Debug)]
pub struct Settled<'o> {
    /// The `result` label of `assetscan_reconciles_total`.
    pub result: &'static str,
    pub tell: Tell<'o>,
    pub then: Action,
}

/// What the controller tells of an outcome, besides counting it.
#[derive(Debug, PartialEq)]
pub enum Tell<'o> {
    Nothing,
    /// Mirror the ticket: the status shows where the run stands.
    Mirror(&'o Ticket),
    /// Another executor holds the asset's lock.
    Contention {
        holder: &'o str,
    },
    /// Another executor took the run over; this one stopped.
    Superseded {
        caller: u64,
        valid: u64,
    },
}

/// A short random delay, so that replicas that lost the same race do not
/// look again at the same instant.
fn jitter() -> Duration {
    Duration::from_millis(rand::rng().random_range(100..1000))
}

/// The table: what the controller does after `outcome`. `rescan` is how
/// long after a run ended the object's next scan is due.
pub fn settle(outcome: &Outcome, rescan: Option<Duration>) -> Settled<'_> {
    let (result, tell, then) = match outcome {
        Outcome::Terminal(ticket) => (
            if ticket.status == Status::Failed {
                "failed"
            } else {
                "finished"
            },
            // Mirror in case an earlier status write was lost.
            Tell::Mirror(ticket),
            rescan.map_or_else(Action::await_change, Action::requeue),
        ),
        Outcome::Locked {
            holder,
            retry_after,
        } => (
            "locked",
            Tell::Contention { holder },
            Action::requeue(*retry_after + jitter()),
        ),
        Outcome::Superseded { caller, valid } => (
            "superseded",
            Tell::Superseded {
                caller: *caller,
                valid: *valid,
            },
            Action::requeue(jitter()),
        ),
        // Waiting for a channel: the status says so (NOTIFYING, and the
        // channel's error), whatever the progress interval skipped.
        Outcome::Deferred {
            retry_after,
            ticket,
        } => (
            "notify_deferred",
            Tell::Mirror(ticket),
            Action::requeue(*retry_after + jitter()),
        ),
        Outcome::LockLost(_) => ("lock_lost", Tell::Nothing, Action::requeue(jitter())),
        // Only a request that supersedes a run is refused so, and it was
        // retried without; look again from a fresh read.
        Outcome::EarlierRunAlerting => (
            "earlier_run_alerting",
            Tell::Nothing,
            Action::requeue(jitter()),
        ),
        // The object was deleted after it was read: its cleanup retired the
        // run. The next reconcile finds the object gone.
        Outcome::Retired => ("retired", Tell::Nothing, Action::requeue(jitter())),
        // Refused by the status fence (this object changed under us) or the
        // API is failing: look again shortly, from a fresh read.
        Outcome::ClaimUnrecorded(_) => (
            "claim_unrecorded",
            Tell::Nothing,
            Action::requeue(Duration::from_secs(1) + jitter()),
        ),
        Outcome::Stopped(ticket) => ("stopped", Tell::Mirror(ticket), Action::await_change()),
    };
    Settled { result, tell, then }
}

impl Settled<'_> {
    /// Counts the outcome and tells it; returns when to look again.
    pub async fn carry_out(
        self,
        key: &str,
        metrics: &Metrics,
        mirror: &StatusMirror<'_>,
    ) -> Action {
        metrics.reconciled(self.result);
        match self.tell {
            Tell::Nothing => {}
            Tell::Mirror(ticket) => {
                mirror.mirror(ticket).await;
            }
            Tell::Contention { holder } => {
                metrics.lock_contention.inc();
                info!(object = %key, %holder, "asset locked by another executor");
            }
            Tell::Superseded { caller, valid } => {
                mirror.events().superseded(caller, valid).await;
            }
        }
        self.then
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(status: Status) -> Ticket {
        Ticket {
            status,
            ..Ticket::new("web-01", "1234abcd-g1-s0", 0)
        }
    }

    #[test]
    fn a_run_that_ended_is_mirrored_and_looked_at_again_at_the_next_scan() {
        let every = Some(Duration::from_secs(600));
        let finished = Outcome::Terminal(ticket(Status::Finished));
        let settled = settle(&finished, every);
        assert_eq!(settled.result, "finished");
        assert!(matches!(settled.tell, Tell::Mirror(t) if t.status == Status::Finished));
        assert_eq!(settled.then, Action::requeue(Duration::from_secs(600)));

        let failed = Outcome::Terminal(ticket(Status::Failed));
        let settled = settle(&failed, None);
        assert_eq!(settled.result, "failed");
        assert_eq!(settled.then, Action::await_change());
    }

    #[test]
    fn every_outcome_has_its_result_and_what_it_tells() {
        let t = ticket(Status::Notifying);
        let a_second = Duration::from_secs(1);
        let cases = [
            (
                Outcome::Locked {
                    holder: "other".into(),
                    retry_after: a_second,
                },
                "locked",
            ),
            (
                Outcome::Superseded {
                    caller: 3,
                    valid: 4,
                },
                "superseded",
            ),
            (
                Outcome::Deferred {
                    ticket: t.clone(),
                    retry_after: a_second,
                },
                "notify_deferred",
            ),
            (Outcome::LockLost(t.clone()), "lock_lost"),
            (Outcome::EarlierRunAlerting, "earlier_run_alerting"),
            (Outcome::Retired, "retired"),
            (Outcome::ClaimUnrecorded(t.clone()), "claim_unrecorded"),
            (Outcome::Stopped(t.clone()), "stopped"),
        ];
        for (outcome, result) in &cases {
            let settled = settle(outcome, None);
            assert_eq!(settled.result, *result);
            let tell = match outcome {
                Outcome::Locked { .. } => Tell::Contention { holder: "other" },
                Outcome::Superseded { .. } => Tell::Superseded {
                    caller: 3,
                    valid: 4,
                },
                Outcome::Deferred { .. } | Outcome::Stopped(_) => Tell::Mirror(&t),
                _ => Tell::Nothing,
            };
            assert_eq!(settled.tell, tell, "{result}");
            let looks_again = settled.then != Action::await_change();
            assert_eq!(looks_again, *result != "stopped", "{result}");
        }
    }
}
