//! The state machine of a ticket, declared once: its statuses, the writes
//! each status allows, which of them alert and which end a run, the steps
//! of the pipeline with the facts each records and the statuses it leads
//! to.
//!
//! Everything else reads this declaration rather than restating it: the
//! planner and the pipeline, the store's Lua scripts and the Argo CD health
//! check (their tables are generated from it into marked regions, and
//! `generate/tests/regions.rs` fails when a region differs: `make
//! generate` rewrites them), the model check, the status mirror and its
//! metrics. Adding a step is a change here, in the planner (`plan.rs`), in
//! the pipeline and in the provider that answers it. What may change
//! between releases is checked in `domain/tests/releases.rs`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A ticket's status. The wire names (see [`Status::declared`]) are the
/// public contract: tickets, scripts, the AssetScan's `status.phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Init,
    AssetOnline,
    AssetOffline,
    VulnCheckDone,
    HighRiskFound,
    Notifying,
    Notified,
    Finished,
    Failed,
}

/// Where a run with a confirmed high risk stands with its alert. A run
/// that alerts must not be superseded or lost: it is driven to its end
/// before a later run of its object starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alert {
    /// The risk is confirmed; nothing is sent yet.
    Confirmed,
    /// The intent to notify is recorded: a delivery may have happened.
    Sending,
    /// Every channel confirmed; the run has not ended yet.
    Sent,
}

/// How a terminal status ends its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Succeeded,
    Failed,
}

/// What the state machine says about one status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    /// The wire name.
    pub name: &'static str,
    /// How far a run at this status got. Every write moves to a later stage
    /// (or stays), so a ticket never goes back: the model check judges the
    /// table by it, and a test checks the table against it.
    pub stage: u8,
    /// The statuses a write may move it to, besides the two moves every
    /// status that has not ended allows (see [`Status::allows`]).
    pub next: &'static [Status],
    /// Whether a run at this status alerts, and how far.
    pub alert: Option<Alert>,
    /// Whether this status ends the run, and how.
    pub end: Option<End>,
}

/// A status the run passes through: no alert, no end.
const UNDERWAY: Declared = Declared {
    name: "",
    stage: 0,
    next: &[],
    alert: None,
    end: None,
};

/// The statuses the verdict on the facts writes: a confirmed high risk, or
/// the run's end without one.
pub const VERDICT: &[Status] = &[Status::HighRiskFound, Status::Finished];

impl Status {
    /// Every status, in the order of a run.
    pub const ALL: [Status; 9] = [
        Status::Init,
        Status::AssetOnline,
        Status::AssetOffline,
        Status::VulnCheckDone,
        Status::HighRiskFound,
        Status::Notifying,
        Status::Notified,
        Status::Finished,
        Status::Failed,
    ];

    /// The declaration of the state machine, one status at a time.
    pub const fn declared(self) -> Declared {
        use Status::*;
        match self {
            Init => Declared {
                name: "INIT",
                next: &[AssetOnline, AssetOffline],
                ..UNDERWAY
            },
            AssetOnline => Declared {
                name: "ASSET_ONLINE",
                stage: 1,
                next: &[VulnCheckDone],
                ..UNDERWAY
            },
            AssetOffline => Declared {
                name: "ASSET_OFFLINE",
                stage: 1,
                next: &[Finished],
                ..UNDERWAY
            },
            VulnCheckDone => Declared {
                name: "VULN_CHECK_DONE",
                stage: 2,
                next: VERDICT,
                ..UNDERWAY
            },
            HighRiskFound => Declared {
                name: "HIGH_RISK_FOUND",
                stage: 3,
                next: &[Notifying],
                alert: Some(Alert::Confirmed),
                end: None,
            },
            Notifying => Declared {
                name: "NOTIFYING",
                stage: 4,
                next: &[Notified],
                alert: Some(Alert::Sending),
                end: None,
            },
            Notified => Declared {
                name: "NOTIFIED",
                stage: 5,
                next: &[Finished],
                alert: Some(Alert::Sent),
                end: None,
            },
            Finished => Declared {
                name: "FINISHED",
                stage: 6,
                end: Some(End::Succeeded),
                ..UNDERWAY
            },
            Failed => Declared {
                name: "FAILED",
                stage: 6,
                end: Some(End::Failed),
                ..UNDERWAY
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        self.declared().name
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// `FINISHED` and `FAILED` end a run: nothing is written after them.
    pub fn is_terminal(self) -> bool {
        self.declared().end.is_some()
    }

    /// Where the run's alert stands at this status; `None` when it has no
    /// confirmed high risk, or has ended.
    pub fn alert(self) -> Option<Alert> {
        self.declared().alert
    }

    /// Whether a run at this status is alerting: its risk is confirmed and
    /// the run has not ended (its notification may be recorded, the run not
    /// yet `FINISHED`).
    pub fn is_alerting(self) -> bool {
        self.alert().is_some()
    }

    /// Whether a write may move a ticket from this status to `to`. Besides
    /// the declared moves, `X -> X` is allowed for every `X` that has not
    /// ended, so that errors, attempts and late facts can be recorded
    /// without moving forward, and any such status may fail.
    pub fn allows(self, to: Status) -> bool {
        if self.is_terminal() {
            return false;
        }
        to == self || to == Status::Failed || self.declared().next.contains(&to)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fact a run learns. Each is written once by the step that learns it (a
/// notification's as it goes) and kept in the ticket's facts under its
/// name; a reader ignores a name it does not know (a newer writer's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fact {
    Online,
    Vulnerabilities,
    ThreatIntel,
    Risk,
    Notification,
    Sbom,
}

impl Fact {
    pub const ALL: [Fact; 6] = [
        Fact::Online,
        Fact::Vulnerabilities,
        Fact::ThreatIntel,
        Fact::Risk,
        Fact::Notification,
        Fact::Sbom,
    ];

    /// The name in the ticket's facts (a field of its facts hash).
    pub const fn as_str(self) -> &'static str {
        match self {
            Fact::Online => "online",
            Fact::Vulnerabilities => "vulnerabilities",
            Fact::ThreatIntel => "threat_intel",
            Fact::Risk => "risk",
            Fact::Notification => "notification",
            Fact::Sbom => "sbom",
        }
    }

    pub fn parse(name: &str) -> Option<Fact> {
        Fact::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A unit of work of the pipeline: one call to the outside world. Completed
/// steps are recorded in the ticket so that a takeover never repeats one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    OnlineCheck,
    VulnQuery,
    ThreatIntel,
    Notify,
}

/// What the state machine says about one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepDeclared {
    /// The wire name (in `completed_steps`, `attempts`, `last_error`).
    pub name: &'static str,
    /// The facts its call records (also those of a failed call: what it
    /// learned all the same).
    pub records: &'static [Fact],
    /// The statuses its successful call is recorded at; the answer picks
    /// one. The model check drives the provider's answers through them.
    pub leads_to: &'static [Status],
}

impl Step {
    pub const ALL: [Step; 4] = [
        Step::OnlineCheck,
        Step::VulnQuery,
        Step::ThreatIntel,
        Step::Notify,
    ];

    /// The declaration of the pipeline's steps.
    pub const fn declared(self) -> StepDeclared {
        match self {
            Step::OnlineCheck => StepDeclared {
                name: "online_check",
                records: &[Fact::Online],
                leads_to: &[Status::AssetOffline, Status::AssetOnline],
            },
            Step::VulnQuery => StepDeclared {
                name: "vuln_query",
                records: &[Fact::Vulnerabilities, Fact::Sbom],
                leads_to: &[Status::VulnCheckDone],
            },
            // The verdict is recorded with the intel, in the same write.
            Step::ThreatIntel => StepDeclared {
                name: "threat_intel",
                records: &[Fact::ThreatIntel, Fact::Risk],
                leads_to: VERDICT,
            },
            Step::Notify => StepDeclared {
                name: "notify",
                records: &[Fact::Notification],
                leads_to: &[Status::Notified],
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        self.declared().name
    }

    /// Whether the declaration lets this step's call record `fact`.
    pub fn records(self, fact: Fact) -> bool {
        self.declared().records.contains(&fact)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every status a run can reach from `INIT` along the declared moves.
    fn reachable() -> BTreeSet<Status> {
        let mut seen = BTreeSet::from([Status::Init, Status::Failed]);
        let mut todo = vec![Status::Init];
        while let Some(at) = todo.pop() {
            for to in at.declared().next {
                if seen.insert(*to) {
                    todo.push(*to);
                }
            }
        }
        seen
    }

    #[test]
    fn every_status_is_listed_once_and_reachable() {
        let listed: BTreeSet<Status> = Status::ALL.into_iter().collect();
        assert_eq!(listed.len(), Status::ALL.len(), "listed twice");
        assert_eq!(
            reachable(),
            listed,
            "a status reachable from INIT is missing from Status::ALL, or one listed is unreachable"
        );
        let names: BTreeSet<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), Status::ALL.len(), "two statuses share a name");
    }

    #[test]
    fn every_write_goes_forward_and_nothing_follows_an_end() {
        for from in Status::ALL {
            for to in Status::ALL {
                if from.allows(to) && to != from {
                    let (a, b) = (from.declared().stage, to.declared().stage);
                    assert!(b > a, "{from} (stage {a}) -> {to} (stage {b})");
                }
            }
            if from.is_terminal() {
                assert!(from.declared().next.is_empty(), "{from} ended but moves on");
                assert!(!from.is_alerting(), "{from} ended but alerts");
            }
        }
    }

    #[test]
    fn an_alert_once_confirmed_goes_on_until_the_run_ends() {
        for from in Status::ALL.into_iter().filter(|s| s.is_alerting()) {
            for to in from.declared().next {
                assert!(
                    to.is_alerting() || to.is_terminal(),
                    "{from} -> {to} drops the alert"
                );
            }
        }
    }

    #[test]
    fn wire_names_are_the_serialized_ones() {
        for s in Status::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        for step in Step::ALL {
            let json = serde_json::to_string(&step).unwrap();
            assert_eq!(json, format!("\"{}\"", step.as_str()));
        }
        for fact in Fact::ALL {
            assert_eq!(Fact::parse(fact.as_str()), Some(fact));
        }
        assert_eq!(Fact::parse("from_a_newer_writer"), None);
    }

    #[test]
    fn every_step_leads_where_the_table_allows_and_every_fact_has_a_step() {
        for step in Step::ALL {
            assert!(!step.declared().leads_to.is_empty(), "{step} leads nowhere");
            for to in step.declared().leads_to {
                let from = Status::ALL
                    .into_iter()
                    .any(|from| from != *to && from.allows(*to));
                assert!(from, "{step} leads to {to}, which no write reaches");
            }
        }
        for fact in Fact::ALL {
            assert!(
                Step::ALL.iter().any(|s| s.records(fact)),
                "no step records {fact}"
            );
        }
    }
}
