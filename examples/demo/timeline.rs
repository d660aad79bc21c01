//! The scenario's timeline: the moments the demo itself marks (a replica
//! started, stalled, resumed; the asset back online) merged with the
//! asset's audit stream, which tells what each replica claimed and wrote,
//! and what the store accepted or rejected.

use crate::{SCENARIO, SCENARIO_ASSET, now_ms};
use assetscan_operator::store::AuditEntry;

/// An orchestrator-side moment, merged into the timeline.
struct Moment {
    at_ms: u64,
    who: String,
    what: String,
}

/// The moments marked so far.
#[derive(Default)]
pub struct Timeline {
    moments: Vec<Moment>,
}

impl Timeline {
    /// Marks that `who` did `what`, now.
    pub fn mark(&mut self, who: &str, what: impl Into<String>) {
        self.moments.push(Moment {
            at_ms: now_ms(),
            who: who.to_owned(),
            what: what.into(),
        });
    }

    /// Prints the marked moments and the rows of `audit` in time order,
    /// from the first.
    pub fn print(&self, audit: &[AuditEntry]) {
        let mut rows: Vec<(u64, String, String)> = self
            .moments
            .iter()
            .map(|m| (m.at_ms, m.who.clone(), m.what.clone()))
            .collect();
        rows.extend(audit_rows(audit));
        rows.sort_by_key(|r| r.0);
        let t0 = rows.first().map_or(0, |r| r.0);
        println!("\ntimeline of {SCENARIO} ({SCENARIO_ASSET}):");
        for (at, who, what) in rows {
            println!(
                "  {:>6.2}s  {who:<10} {what}",
                (at.saturating_sub(t0)) as f64 / 1000.0
            );
        }
    }
}

/// `(at, who, what)` of each audit record. A write is told as the replica
/// whose claim drew its token.
fn audit_rows(audit: &[AuditEntry]) -> Vec<(u64, String, String)> {
    let mut holders: Vec<(u64, String)> = Vec::new();
    let mut rows = Vec::new();
    for e in audit {
        let at: u64 = e.get("at").and_then(|t| t.parse().ok()).unwrap_or(0);
        let token = e.get("token").unwrap_or("-");
        let (who, what) = match e.op() {
            "acquire" => {
                let who = replica_of(e.get("holder").unwrap_or("?"));
                holders.push((e.token().unwrap_or(0), who.clone()));
                (
                    who,
                    format!(
                        "acquired the lock, token {token}, claimed the ticket at {}",
                        e.get("status").unwrap_or("?")
                    ),
                )
            }
            "release" => (
                replica_of(e.get("holder").unwrap_or("?")),
                "released the lock".into(),
            ),
            _ => {
                let who = holders
                    .iter()
                    .find(|(t, _)| Some(*t) == e.token())
                    .map(|(_, w)| w.clone())
                    .unwrap_or_else(|| "?".into());
                (who, write(e, token))
            }
        };
        rows.push((at, who, what));
    }
    rows
}

/// A write, accepted or rejected, under `token`.
fn write(e: &AuditEntry, token: &str) -> String {
    let (from, to) = (e.get("from").unwrap_or("?"), e.get("to").unwrap_or("?"));
    if e.accepted() {
        let move_ = format!("{from} -> {to}");
        format!(
            "write {move_:<36} token {token}  accepted (revision {})",
            e.get("revision").unwrap_or("?")
        )
    } else {
        format!(
            "write {:<36} token {token}  REJECTED {} (the ticket is {from} under token {})",
            format!("-> {to}"),
            e.get("result").unwrap_or("?"),
            e.get("valid").unwrap_or("?")
        )
    }
}

/// The replica's instance name in a lock holder id
/// (`<instance>#<random>:<namespace>/<name>`).
fn replica_of(holder: &str) -> String {
    holder.split(['#', ':']).next().unwrap_or(holder).to_owned()
}
