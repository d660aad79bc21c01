//! How soon each confirmed high risk went out: from the accepted
//! `HIGH_RISK_FOUND` write to the accepted `NOTIFIED` write of the same
//! run, both as the audit records them (their `at` is the time the writing
//! executor gave the ticket, the same clock the operator's
//! `assetscan_detection_to_notification_seconds` reads), checked against
//! the bound docs/guarantees.md states.
//!
//! The bound of one run: per pass (the one that confirmed the high risk,
//! and each later claim of the run: a takeover, a retry after a deferral or
//! a refused claim), the wait before it (the longest of the lock's ttl, the
//! notify backoff and the wait for the watch to deliver the executor's own
//! status write, and up to 1 s of requeue jitter) and one notify pass at
//! worst; plus, for every outage during the wait (Redis, the API server,
//! every replica stopped), twice the part of it within the wait and 1 s:
//! the run's reconciles fail from the outage's start at the earliest, and
//! the reconcile backoff doubles while it lasts.
//!
//! A run whose ticket Redis lost after the confirmation is confirmed again
//! in the new epoch and measured from there, as the operator measures it
//! (the first confirmation went with the data); the time from its first
//! confirmation is reported apart, and not bounded: the run starts over
//! from its first step.

use super::{Invariant, Violation};
use crate::history::{AssetIdentity, AuditRecord, History, Outage, Timing};
use serde::Serialize;
use std::collections::BTreeMap;

/// The requeue jitter a run may wait on top of the lock's ttl or the
/// notify backoff (`jitter()` in the controller's outcome table: below 1 s).
const REQUEUE_JITTER_MS: u64 = 1_000;

/// One run's detection-to-notification time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// `<asset>/<run>`.
    pub ticket: String,
    pub epoch: u32,
    pub ms: u64,
    /// Passes over the run from the confirmation to the notification.
    pub passes: usize,
    /// Outages that overlapped the wait.
    pub outages: usize,
    pub bound_ms: u64,
}

/// Every run's time, and the ones that span a Redis data loss.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NotificationTimes {
    /// In the order of the audit.
    pub observations: Vec<Observation>,
    /// Runs confirmed before a data loss and notified after it: from the
    /// first confirmation to the notification, ms. Not bounded.
    pub across_data_loss_ms: Vec<(String, u64)>,
    /// The bound of a run of one pass without outages, ms.
    pub pass_bound_ms: u64,
}

impl NotificationTimes {
    /// The observation of the longest wait.
    pub fn worst(&self) -> Option<&Observation> {
        self.observations.iter().max_by_key(|o| o.ms)
    }

    /// The `q` quantile (0–1) of the times, nearest rank.
    pub fn quantile_ms(&self, q: f64) -> Option<u64> {
        let mut times: Vec<u64> = self.observations.iter().map(|o| o.ms).collect();
        times.sort_unstable();
        let last = times.len().checked_sub(1)?;
        let rank = (q.clamp(0.0, 1.0) * last as f64).round() as usize;
        times.get(rank.min(last)).copied()
    }

    pub fn over_bound(&self) -> usize {
        self.observations
            .iter()
            .filter(|o| o.ms > o.bound_ms)
            .count()
    }
}

/// Where a run stood in the audit of one epoch.
#[derive(Default)]
struct Run<'h> {
    confirmed: Option<&'h AuditRecord>,
    /// Claims accepted after the confirmation.
    claims_after: usize,
    notified: Option<&'h AuditRecord>,
}

fn at(record: &AuditRecord) -> Option<u64> {
    record.get("at")?.parse().ok()
}

/// A run of one asset, as the audit files it.
type RunOf<'h> = (&'h AssetIdentity, &'h str);

pub(super) fn check(history: &History, out: &mut Vec<Violation>) -> NotificationTimes {
    let timing = &history.timing;
    let mut runs: BTreeMap<(u32, RunOf), Run> = BTreeMap::new();
    for record in history.audit.iter().filter(|r| r.accepted()) {
        let Some(run) = record.run() else { continue };
        let entry = runs
            .entry((record.epoch, (&record.identity, run)))
            .or_default();
        match (record.op(), record.get("to")) {
            ("advance", Some("HIGH_RISK_FOUND")) if entry.confirmed.is_none() => {
                entry.confirmed = Some(record);
            }
            ("advance", Some("NOTIFIED")) if entry.notified.is_none() => {
                entry.notified = Some(record);
            }
            ("acquire", _) if entry.confirmed.is_some() && entry.notified.is_none() => {
                entry.claims_after += 1;
            }
            _ => {}
        }
    }
    let mut times = NotificationTimes {
        pass_bound_ms: pass_bound_ms(timing),
        ..NotificationTimes::default()
    };
    // A history recorded before the bound's settings were has none: its
    // times are measured, not checked.
    let checked = timing.notify_pass_ms > 0;
    let mut first_confirmed: BTreeMap<RunOf, (u32, u64)> = BTreeMap::new();
    for ((epoch, of), run) in &runs {
        if let Some(confirmed_at) = run.confirmed.and_then(at) {
            first_confirmed.entry(*of).or_insert((*epoch, confirmed_at));
        }
        let (Some(confirmed), Some(notified)) = (run.confirmed, run.notified) else {
            continue;
        };
        // Its ticket id, as the receivers and the operator's metric see it;
        // the violations name the run where the audit filed it.
        let ticket = format!("{}/{}", of.0.asset, of.1);
        let subject = format!("ticket {}/{}", of.0, of.1);
        let (Some(from), Some(to)) = (at(confirmed), at(notified)) else {
            out.push(Violation {
                invariant: Invariant::NotifiedInTime,
                subject,
                detail: "its confirmation or its notification has no time (`at`)".into(),
            });
            continue;
        };
        let observation = observe(timing, &ticket, *epoch, run.claims_after, from, to);
        if checked && observation.ms > observation.bound_ms {
            out.push(Violation {
                invariant: Invariant::NotifiedInTime,
                subject,
                detail: format!(
                    "notified {} ms after its confirmation, over its bound of {} ms ({} passes, {} outages)",
                    observation.ms, observation.bound_ms, observation.passes, observation.outages
                ),
            });
        }
        if let Some((first_epoch, first_at)) = first_confirmed.get(of)
            && *first_epoch < *epoch
        {
            times
                .across_data_loss_ms
                .push((ticket.clone(), to.saturating_sub(*first_at)));
        }
        times.observations.push(observation);
    }
    times
}

/// The bound of one pass: the wait before it and one notify pass at worst.
fn pass_bound_ms(timing: &Timing) -> u64 {
    timing
        .lock_ttl_ms
        .max(timing.notify_max_backoff_ms)
        .max(timing.cache_wait_ms)
        .max(1_000)
        + REQUEUE_JITTER_MS
        + timing.notify_pass_ms
}

/// How much of `outage` falls within `from..=to`, if any of it does.
fn overlap_ms(outage: &Outage, from: u64, to: u64) -> Option<u64> {
    (outage.from_ms <= to && outage.to_ms >= from).then(|| {
        outage
            .to_ms
            .min(to)
            .saturating_sub(outage.from_ms.max(from))
    })
}

fn observe(
    timing: &Timing,
    ticket: &str,
    epoch: u32,
    claims: usize,
    from: u64,
    to: u64,
) -> Observation {
    let passes = 1 + claims;
    let during: Vec<u64> = timing
        .outages
        .iter()
        .filter_map(|o| overlap_ms(o, from, to))
        .collect();
    let outage_allowance: u64 = during.iter().map(|ms| 2 * ms + 1_000).sum();
    Observation {
        ticket: ticket.to_owned(),
        epoch,
        ms: to.saturating_sub(from),
        passes,
        outages: during.len(),
        bound_ms: u64::try_from(passes).unwrap_or(u64::MAX) * pass_bound_ms(timing)
            + outage_allowance,
    }
}
