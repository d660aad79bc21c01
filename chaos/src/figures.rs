//! The figures of a run, printed as its last lines. The last two are
//! always `stale writes rejected: N` and `invariant violations: N`.

use crate::check::{NotificationTimes, Report};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Figures {
    pub seed: u64,
    pub scale: String,
    pub replicas: usize,
    pub objects_created: usize,
    pub objects_edited: usize,
    pub objects_deleted: usize,
    /// Final phases of the live objects.
    pub phases: BTreeMap<String, usize>,
    /// SIGSTOPs by the run (0.5–2.5 × ttl, and around drills).
    pub pauses: usize,
    /// Replicas that stopped themselves at a fault drill.
    pub drill_stops: usize,
    pub kills: usize,
    pub restarts_same_instance: usize,
    pub restarts_new_instance: usize,
    pub redis_data_losses: usize,
    pub api_outages: usize,
    pub api_outage_seconds: f64,
    pub api_connections_cut: usize,
    /// API requests answered with an injected 409, 500 or 429.
    pub api_errors_injected: usize,
    pub watch_interruptions: usize,
    pub provider_bursts: usize,
    pub provider_latency_changes: usize,
    pub deliveries: usize,
    pub duplicate_deliveries: BTreeMap<String, usize>,
    pub late_claims_refused: usize,
    /// How soon each confirmed high risk went out, and its bound.
    pub notification_times: NotificationTimes,
    /// From the end of the faults until every object settled; `None`: never.
    pub converged_after: Option<Duration>,
    pub run_time: Duration,
    pub stale_writes_rejected: usize,
    pub invariant_violations: usize,
}

impl Figures {
    /// Takes the checker's part of the figures from its report.
    pub fn with_report(mut self, report: &Report) -> Figures {
        self.stale_writes_rejected = report.stale_writes_rejected;
        self.late_claims_refused = report.late_claims_refused;
        self.notification_times = report.notification_times.clone();
        self.invariant_violations = report.violations.len();
        self.duplicate_deliveries = report
            .duplicates
            .iter()
            .map(|(cause, n)| (cause.to_string(), *n))
            .collect();
        self
    }

    /// The run passed: no violation, and the faults hit the window the
    /// fencing exists for at least once.
    pub fn passed(&self) -> bool {
        self.invariant_violations == 0 && self.stale_writes_rejected > 0
    }
}

/// `1 pass`, `2 passes`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// `detection → notification: …`, and the runs that span a data loss.
impl fmt::Display for NotificationTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Some(p50), Some(p99), Some(worst)) =
            (self.quantile_ms(0.5), self.quantile_ms(0.99), self.worst())
        else {
            return writeln!(f, "detection → notification: no high risk notified");
        };
        writeln!(
            f,
            "detection → notification: {}; p50 {p50} ms, p99 {p99} ms, worst {} ({}, {}, {}, bound {}); over the bound: {} (bound of a pass: {})",
            count(self.observations.len(), "run", "runs"),
            secs(worst.ms),
            worst.ticket,
            count(worst.passes, "pass", "passes"),
            count(worst.outages, "outage", "outages"),
            secs(worst.bound_ms),
            self.over_bound(),
            secs(self.pass_bound_ms),
        )?;
        if let Some(longest) = self.across_data_loss_ms.iter().map(|(_, ms)| *ms).max() {
            writeln!(
                f,
                "  confirmed before a Redis data loss, notified after it: {}, worst {} from the first confirmation (not bounded: the run started over)",
                count(self.across_data_loss_ms.len(), "run", "runs"),
                secs(longest)
            )?;
        }
        Ok(())
    }
}

fn list(map: &BTreeMap<String, usize>) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let duplicates: usize = self.duplicate_deliveries.values().sum();
        writeln!(
            f,
            "seed: {} (replay: CHAOS_SEED={} make chaos{})",
            self.seed,
            self.seed,
            if self.scale == "full" {
                String::new()
            } else {
                format!(" CHAOS_SCALE={}", self.scale)
            }
        )?;
        writeln!(
            f,
            "objects: {} created, {} edited, {} deleted; final phases: {}",
            self.objects_created,
            self.objects_edited,
            self.objects_deleted,
            list(&self.phases)
        )?;
        writeln!(
            f,
            "replicas: {}; pauses (SIGSTOP): {}; fault-drill stops: {}; kills (SIGKILL): {}; restarts: {} same instance, {} new instance",
            self.replicas,
            self.pauses,
            self.drill_stops,
            self.kills,
            self.restarts_same_instance,
            self.restarts_new_instance
        )?;
        writeln!(f, "redis data losses: {}", self.redis_data_losses)?;
        writeln!(
            f,
            "api server outages: {} ({:.1} s, {} connections cut); injected api errors: {}; watches ended or cut: {}",
            self.api_outages,
            self.api_outage_seconds,
            self.api_connections_cut,
            self.api_errors_injected,
            self.watch_interruptions
        )?;
        writeln!(
            f,
            "provider faults: {} bursts of 5xx, {} latency changes",
            self.provider_bursts, self.provider_latency_changes
        )?;
        writeln!(
            f,
            "deliveries: {}; duplicate deliveries: {duplicates} ({})",
            self.deliveries,
            list(&self.duplicate_deliveries)
        )?;
        writeln!(
            f,
            "late claims refused after deletion: {}",
            self.late_claims_refused
        )?;
        write!(f, "{}", self.notification_times)?;
        match self.converged_after {
            Some(after) => writeln!(
                f,
                "converged: {:.1} s after the faults stopped; run time {:.1} s",
                after.as_secs_f64(),
                self.run_time.as_secs_f64()
            )?,
            None => writeln!(
                f,
                "converged: no; run time {:.1} s",
                self.run_time.as_secs_f64()
            )?,
        }
        writeln!(f, "stale writes rejected: {}", self.stale_writes_rejected)?;
        write!(f, "invariant violations: {}", self.invariant_violations)
    }
}
