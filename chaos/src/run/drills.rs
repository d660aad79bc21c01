//! The fault drills as they happen: the armed replica alone with its
//! target while the others are paused (the isolation), and each replica
//! stopped at its drill resumed once its pending write is stale for sure.

use super::Driver;
use crate::history::AuditRecord;
use crate::replicas::State;
use std::time::{Duration, Instant};

/// How often a drilled replica's asset is looked up in the audit.
const DRILL_CHECK: Duration = Duration::from_millis(250);

/// The drill's replica alone with its target: the others are paused until
/// it holds the target's lock (or stopped), for 0.5–2.5 × the lock ttl.
pub(super) struct Isolation {
    pub(super) armed: usize,
    asset: String,
    earliest_end: Instant,
    deadline: Instant,
}

/// The latest claim in `records` by a process of `instance` (holder ids
/// are `<instance>#<random>:<namespace>/<name>`).
fn latest_claim<'r>(records: &'r [AuditRecord], instance: &str) -> Option<&'r AuditRecord> {
    let holder = format!("{instance}#");
    records.iter().rev().find(|r| {
        r.op() == "acquire"
            && r.accepted()
            && r.get("holder").is_some_and(|h| h.starts_with(&holder))
    })
}

impl Driver<'_> {
    /// Pauses every other running replica, so that the armed one meets its
    /// drill's target first.
    pub(super) fn isolate(&mut self, armed: usize, object: usize) {
        let running = self
            .replicas
            .get(armed)
            .is_some_and(|r| r.state == State::Running && r.drill.is_some());
        if !running || self.isolation.is_some() {
            return;
        }
        let ttl = self.plan.scale.lock_ttl;
        let now = Instant::now();
        let deadline = now + ttl.mul_f64(2.5);
        for slot in (0..self.plan.scale.replicas).filter(|s| *s != armed) {
            self.replicas.pause(slot, deadline, true);
        }
        self.isolation = Some(Isolation {
            armed,
            asset: self.plan.objects[object].asset.clone(),
            earliest_end: now + ttl / 2,
            deadline,
        });
        self.say(format!(
            "create {} while only {} runs (the others paused)",
            self.plan.objects[object].name,
            self.instance(armed)
        ));
    }

    /// Whether the isolation under way, if any, is over at `now`: its
    /// deadline passed, or (not before its earliest end) the armed replica
    /// holds its target's claim or no longer runs.
    pub(super) async fn isolation_over(&self, now: Instant) -> bool {
        match &self.isolation {
            None => false,
            Some(i) if now >= i.deadline => true,
            Some(i) if now < i.earliest_end => false,
            Some(i) => match self.replicas.get(i.armed) {
                Some(r) if r.state == State::Running => {
                    self.holds_claim(&r.instance, &i.asset).await
                }
                _ => true,
            },
        }
    }

    /// Whether the audit shows a claim of `asset` by `instance` (Redis may
    /// be down: then not yet).
    async fn holds_claim(&self, instance: &str, asset: &str) -> bool {
        let records = self
            .world
            .view
            .audit(asset, self.epoch)
            .await
            .unwrap_or_default();
        latest_claim(&records, instance).is_some()
    }

    /// Looks at the drilled replicas every [`DRILL_CHECK`].
    pub(super) async fn check_drills(&mut self, now: Instant) {
        if now.duration_since(self.last_drill_check) >= DRILL_CHECK {
            self.last_drill_check = now;
            self.resume_superseded_drills().await;
        }
    }

    /// Resumes each replica stopped at its drill once the audit shows a
    /// newer executor claimed its asset (so its pending write is stale),
    /// or after a generous bound.
    async fn resume_superseded_drills(&mut self) {
        let bound = self.plan.scale.lock_ttl * 6 + Duration::from_secs(10);
        for slot in 0..self.plan.scale.replicas {
            let Some(replica) = self.replicas.get(slot) else {
                continue;
            };
            let (State::Drilled { since, token }, Some(drill)) = (replica.state, &replica.drill)
            else {
                continue;
            };
            // Redis may be down; the next check tries again.
            let records = self
                .world
                .view
                .audit(&drill.asset, self.epoch)
                .await
                .unwrap_or_default();
            let token = token.or_else(|| latest_claim(&records, &replica.instance)?.token());
            let superseded = token.is_some_and(|own| {
                records
                    .iter()
                    .any(|r| r.is_ticket_write() && r.token().is_some_and(|t| t > own))
            });
            let timed_out = since.elapsed() >= bound;
            let Some(replica) = self.replicas.get_mut(slot) else {
                continue;
            };
            if superseded || timed_out {
                replica.resume();
                let why = if superseded {
                    format!("a newer token than its {token:?} claimed the asset")
                } else {
                    "nobody took its asset over".into()
                };
                let line = format!(
                    "{} resumed (SIGCONT) with its stale context: {why}",
                    replica.instance
                );
                self.say(line);
            } else {
                replica.state = State::Drilled { since, token };
            }
        }
    }
}
