//! The invariant checker: reads a recorded [`History`] and lists every
//! place where the recorded state stopped being true.
//!
//! It trusts nothing the operator says about itself: the audit streams are
//! what Redis applied, the status writes what the API server stored, the
//! deliveries what the receivers got. Duplicate deliveries are allowed only
//! where the non-guarantees (docs/guarantees.md) allow them, and each one is explained
//! by its cause or reported.

mod notification_time;
mod notifications;
mod processes;
mod statuses;
mod tickets;

use crate::history::History;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

pub use notification_time::{NotificationTimes, Observation};
pub use tickets::Claims;

/// What must hold. Each has a test that feeds the checker a history with
/// one violation of it injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Invariant {
    /// Every live AssetScan ends in a terminal phase of its current
    /// generation (`observedGeneration == generation`).
    Converged,
    /// A deleted AssetScan is gone, and so are its tickets.
    DeletedGone,
    /// Per ticket, accepted writes have strictly increasing revisions.
    Revisions,
    /// Per ticket, accepted writes follow the state machine from where the
    /// ticket stood.
    Transitions,
    /// Nothing is accepted after a ticket ended, nor after its end was
    /// recorded in the status (not even once Redis lost its data).
    Terminal,
    /// Per ticket, no write is accepted under a token lower than one
    /// already accepted, and a claim that acts (an accepted write under its
    /// token follows) drew a higher one.
    TicketTokens,
    /// Per asset, a claim that acts drew a token above every one drawn
    /// before, across runs and across Redis data losses: Redis may hand a
    /// number out again after it lost its data, but no two claims of one
    /// number both act.
    Claims,
    /// Per AssetScan, status `(fencingToken, revision)` and
    /// `observedGeneration` never decrease.
    StatusFence,
    /// Every status the API server stored mirrors a write Redis accepted
    /// (same run, token, revision and phase).
    StatusMirror,
    /// A finished scan's verdict is what the providers' facts say.
    Verdict,
    /// Per run and channel, deliveries carry one idempotency key: the
    /// ticket id.
    OneKeyPerRun,
    /// A high risk with channels is recorded `sent` under its ticket id,
    /// and each of its channels (and no other) got that key; nothing else
    /// notifies; every delivery comes from an executor that held the run at
    /// `NOTIFYING` (the key recorded before the send).
    Notified,
    /// A raw duplicate delivery has a cause the non-guarantees allow.
    Duplicates,
    /// A confirmed high risk is recorded `NOTIFIED` within the bound
    /// docs/guarantees.md states: per pass over the run, the longest of the lock's ttl,
    /// the notify backoff and the wait for the watch's delivery, 1 s of
    /// requeue jitter and one notify pass at worst; plus, per outage, twice
    /// its part within the wait and 1 s.
    NotifiedInTime,
    /// No replica exits by itself or panics.
    Processes,
    /// Every high-risk AssetScan ends FINISHED with its alert accepted on
    /// each of its channels under its ticket id: a FAILED run, one that
    /// never ended, or a receiver that refused it, is a lost alert. Only
    /// [`check_strict`] asks it (the upgrade test, which injects no
    /// fault); a chaos run's faults may fail a run, and it is checked
    /// without.
    EveryAlertDelivered,
}

impl Invariant {
    pub const ALL: [Invariant; 15] = [
        Invariant::Converged,
        Invariant::DeletedGone,
        Invariant::Revisions,
        Invariant::Transitions,
        Invariant::Terminal,
        Invariant::TicketTokens,
        Invariant::Claims,
        Invariant::StatusFence,
        Invariant::StatusMirror,
        Invariant::Verdict,
        Invariant::OneKeyPerRun,
        Invariant::Notified,
        Invariant::Duplicates,
        Invariant::NotifiedInTime,
        Invariant::Processes,
    ];

    /// [`Invariant::ALL`] and those only [`check_strict`] asks.
    pub const STRICT: [Invariant; 16] = {
        let mut strict = [Invariant::EveryAlertDelivered; 16];
        let mut i = 0;
        while i < Invariant::ALL.len() {
            strict[i] = Invariant::ALL[i];
            i += 1;
        }
        strict
    };
}

/// One place where an invariant does not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub invariant: Invariant,
    /// The object, ticket, asset, delivery or process concerned.
    pub subject: String,
    /// What was seen, with the history excerpt that shows it.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}: {}", self.invariant, self.subject, self.detail)
    }
}

/// Why a receiver got the same notification more than once, as the
/// non-guarantees (docs/guarantees.md) allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum DuplicateCause {
    /// Another executor held the run at `NOTIFYING`: the previous one
    /// crashed or stalled between a channel's acceptance and the write that
    /// records its receipt (or its call completed after it lost the lock).
    TakeoverAtNotifying,
    /// Redis lost the ticket in flight; the run started again from `INIT`
    /// under a higher token and notified again under the same key.
    RedisDataLoss,
}

impl fmt::Display for DuplicateCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DuplicateCause::TakeoverAtNotifying => "takeover at NOTIFYING",
            DuplicateCause::RedisDataLoss => "Redis data loss",
        })
    }
}

/// The checker's findings.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub violations: Vec<Violation>,
    /// Writes Redis refused with `STALE_TOKEN`.
    pub stale_writes_rejected: usize,
    /// Claims refused with `RUN_RETIRED` (the object had been deleted).
    pub late_claims_refused: usize,
    /// Raw duplicate deliveries, by cause.
    pub duplicates: BTreeMap<DuplicateCause, usize>,
    /// How soon each confirmed high risk went out.
    pub notification_times: NotificationTimes,
}

impl Report {
    /// Violations per invariant.
    pub fn by_invariant(&self) -> BTreeMap<Invariant, usize> {
        let mut counts = BTreeMap::new();
        for v in &self.violations {
            *counts.entry(v.invariant).or_insert(0) += 1;
        }
        counts
    }
}

/// [`check`], and [`Invariant::EveryAlertDelivered`]: for a run without
/// injected faults, where nothing excuses a high risk left unalerted.
pub fn check_strict(history: &History) -> Report {
    let mut report = check(history);
    notifications::every_alert_delivered(history, &mut report.violations);
    report
}

/// Checks every invariant over `history`.
pub fn check(history: &History) -> Report {
    let mut violations = Vec::new();
    let claims = tickets::check(&history.audit, &mut violations);
    statuses::check(history, &claims, &mut violations);
    let duplicates = notifications::check(history, &claims, &mut violations);
    let notification_times = notification_time::check(history, &mut violations);
    processes::check(&history.processes, &mut violations);
    let count = |result: &str| {
        history
            .audit
            .iter()
            .filter(|r| r.get("result") == Some(result))
            .count()
    };
    Report {
        violations,
        stale_writes_rejected: count("STALE_TOKEN"),
        late_claims_refused: count("RUN_RETIRED"),
        duplicates,
        notification_times,
    }
}
