//! The operator's own decisions, tabulated once from its code: which run a
//! reconcile drives (the domain's `RunView::decide`, which the controller
//! calls with its view of the object) and what an executor does next from a
//! ticket (`plan`), with the statuses each step leads to as the state
//! machine declares them (`assetscan_domain::machine`). The model looks
//! them up instead of restating them, so it checks the protocol the
//! operator runs.

use crate::api::Mirror;
use crate::redis::{RUNS, Run};
use assetscan_domain::run::{Recorded, RunDecision, RunView};
use assetscan_domain::ticket::{Status, Step, Ticket};
use assetscan_domain::{Next, VERDICT, owner_id, plan};
use jiff::Timestamp;

/// Generations the model goes through (one spec change).
pub const GENERATIONS: u8 = RUNS as u8;

/// What a reconcile of a live object does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Drive(Run),
    /// Drive `next`, superseding `earlier` in the same `acquire`: that
    /// ends `earlier`, or, if its ticket shows an alert, refuses the claim
    /// and the executor drives `earlier` instead.
    DriveUnlessEarlierAlerts {
        earlier: Run,
        next: Run,
    },
    Wait,
}

/// What an executor holding a ticket does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Call a provider; its answer (the outside world picks) is the status
    /// to write.
    Call(&'static [Status]),
    /// Write one of these statuses, decided from the facts at hand (more
    /// than one: the verdict on the facts picks).
    Advance(&'static [Status]),
    /// Send the notification, then write `NOTIFIED`.
    Notify,
    /// The run is over.
    Done,
}

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("decide() chose run {run:?}, which is no run of the model")]
    UnknownRun { run: String },
    #[error("decide() answered {answer:?}, which the model does not take (no suspend, no rescan)")]
    Unexpected { answer: String },
}

/// `decide` for every generation and stored status, `plan` for every status.
#[derive(Clone, Debug)]
pub struct Tables {
    /// Index: see [`Tables::decision_index`].
    decisions: Vec<Decision>,
    work: [Work; Status::ALL.len()],
}

fn status_index(status: Status) -> usize {
    Status::ALL
        .iter()
        .position(|s| *s == status)
        .unwrap_or_default()
}

impl Tables {
    pub fn build() -> Result<Tables, TableError> {
        let mut decisions = Vec::new();
        for generation in 1..=GENERATIONS {
            for status in std::iter::once(None).chain(stored_statuses().map(Some)) {
                decisions.push(decision(generation, status)?);
            }
        }
        let mut work = [Work::Done; Status::ALL.len()];
        for (slot, status) in work.iter_mut().zip(Status::ALL) {
            *slot = work_at(status);
        }
        Ok(Tables { decisions, work })
    }

    fn decision_index(generation: u8, status: Option<(Run, Status)>) -> usize {
        let per_generation = 1 + RUNS * Status::ALL.len();
        let within = status.map_or(0, |(run, phase)| {
            1 + run.index() * Status::ALL.len() + status_index(phase)
        });
        usize::from(generation.saturating_sub(1)) * per_generation + within
    }

    /// What a reconcile of the live object at `generation` with `status` does.
    pub fn decide(&self, generation: u8, status: Option<Mirror>) -> Decision {
        let key = Tables::decision_index(generation, status.map(|m| (m.run, m.phase)));
        self.decisions.get(key).copied().unwrap_or(Decision::Wait)
    }

    pub fn work(&self, status: Status) -> Work {
        self.work[status_index(status)]
    }
}

/// Every (run, phase) a status can name.
fn stored_statuses() -> impl Iterator<Item = (Run, Status)> {
    Run::all().flat_map(|run| Status::ALL.into_iter().map(move |phase| (run, phase)))
}

/// The object at `generation` as the controller shows it to the decision;
/// `status` names a run by its generation.
fn object(generation: u8, status: Option<(Run, Status)>) -> RunView {
    RunView {
        owner: owner_id(Some("0b1ec7aa-model")),
        generation: i64::from(generation),
        recorded: status.map_or_else(Recorded::default, |(run, phase)| Recorded {
            run: Some(object(run.0, None).run_id(0)),
            phase: Some(phase),
            ..Recorded::default()
        }),
        ..RunView::default()
    }
}

fn decision(generation: u8, status: Option<(Run, Status)>) -> Result<Decision, TableError> {
    match object(generation, status).decide(Timestamp::UNIX_EPOCH) {
        RunDecision::Wait(None) => Ok(Decision::Wait),
        RunDecision::Run(chosen) => Ok(Decision::Drive(run_named(&chosen)?)),
        RunDecision::UnlessEarlierAlerts { earlier, next } => {
            Ok(Decision::DriveUnlessEarlierAlerts {
                earlier: run_named(&earlier)?,
                next: run_named(&next)?,
            })
        }
        other => Err(TableError::Unexpected {
            answer: format!("{other:?}"),
        }),
    }
}

/// The model's run whose id is `chosen`.
fn run_named(chosen: &str) -> Result<Run, TableError> {
    for run in Run::all() {
        if object(run.0, None).run_id(0) == chosen {
            return Ok(run);
        }
    }
    Err(TableError::UnknownRun {
        run: chosen.to_owned(),
    })
}

fn work_at(status: Status) -> Work {
    let mut ticket = Ticket::new("asset", "run", 0);
    ticket.status = status;
    // Threat intel is abstracted away (the verdict without it leads to the
    // same statuses); every other step is a provider call whose answer picks
    // one of the statuses the step declares.
    match plan(&ticket, false) {
        Next::Call(Step::Notify) => Work::Notify,
        Next::Call(step) => Work::Call(step.declared().leads_to),
        Next::Decide => Work::Advance(VERDICT),
        Next::Move(to) => Work::Advance(std::slice::from_ref(move_target(to))),
        Next::Done => Work::Done,
    }
}

/// Every status, for `Move` targets as `'static` slices.
static STATUSES: [Status; Status::ALL.len()] = Status::ALL;

fn move_target(to: Status) -> &'static Status {
    &STATUSES[status_index(to)]
}
