//! The properties checked on every reachable state, and the stateright
//! model they belong to.

use crate::api::Life;
use crate::redis::Run;
use crate::state::{State, broken};
use crate::system::{Action, System, alert_pending};
use assetscan_domain::ticket::Status;
use stateright::{Model, Property};

pub const TICKET_FORWARD: &str = "a ticket only moves forward; a terminal one never changes";
pub const NO_STALE_WRITE: &str =
    "no write is accepted under a token lower than one handed out before or recorded in the status";
pub const STATUS_FORWARD: &str =
    "the status's (fencingToken, revision) and observedGeneration never decrease";
pub const NOTIFIED_DELIVERED: &str = "NOTIFIED implies a delivery";
pub const DELIVERY_RECORDED: &str = "a delivery implies the run reached NOTIFYING";
pub const ONE_KEY: &str = "at most one idempotency key per run";
pub const NO_ENDED_TICKET: &str = "no ticket is created for a run that ended";
pub const NO_DELETED_TICKET: &str = "no ticket is created for a deleted object";
pub const SETTLES: &str =
    "every path ends with the current run terminal, or the object gone with no ticket left";
pub const SHOWN: &str = "every path ends with the status showing the current run's end";
pub const NO_ALERT_LEFT: &str = "no path ends with a run's alert unsent";

impl Model for System {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.enabled(state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        Some(self.step(state, action).canonical().0)
    }

    fn properties(&self) -> Vec<Property<System>> {
        let mut all = every_property();
        all.retain(|p| self.focus.is_none_or(|name| p.name == name));
        all
    }
}

fn every_property() -> Vec<Property<System>> {
    vec![
        Property::always(TICKET_FORWARD, |_, s: &State| {
            intact(s, broken::TICKET_WENT_BACK)
        }),
        Property::always(NO_STALE_WRITE, |_, s: &State| {
            intact(s, broken::STALE_WRITE)
        }),
        Property::always(STATUS_FORWARD, |_, s: &State| {
            intact(s, broken::STATUS_WENT_BACK)
        }),
        Property::always(NOTIFIED_DELIVERED, |_, s: &State| notified_delivered(s)),
        Property::always(DELIVERY_RECORDED, |_, s: &State| {
            Run::all().all(|r| s.delivered[r.index()] == 0 || s.ghost.notifying[r.index()])
        }),
        Property::always(ONE_KEY, |_, s: &State| {
            s.delivered.iter().all(|keys| keys.count_ones() <= 1)
        }),
        Property::always(NO_ENDED_TICKET, |_, s: &State| {
            intact(s, broken::ENDED_RUN_TICKET)
        }),
        Property::always(NO_DELETED_TICKET, |_, s: &State| {
            intact(s, broken::DELETED_OBJECT_TICKET)
        }),
        // Checked where a path ends rather than with `eventually`:
        // stateright counts an `eventually` property as met once it held
        // anywhere on the path, and a spec change can undo "the run
        // ended" after the fact.
        Property::always(SETTLES, |m: &System, s| !m.is_final(s) || m.settled(s)),
        Property::always(SHOWN, |m: &System, s| !m.is_final(s) || m.shown_ended(s)),
        Property::always(NO_ALERT_LEFT, |m: &System, s| {
            !m.is_final(s) || !alert_pending(s)
        }),
    ]
}

/// Whether no step so far broke the step property `bit`.
fn intact(s: &State, bit: u8) -> bool {
    s.ghost.broken & bit == 0
}

/// Every ticket and every status at `NOTIFIED` has its run's notification
/// delivered.
fn notified_delivered(s: &State) -> bool {
    let tickets = Run::all().filter(|r| {
        s.redis
            .ticket(*r)
            .is_some_and(|t| t.status == Status::Notified)
    });
    let mirrored = s
        .object
        .status
        .filter(|m| m.phase == Status::Notified && s.object.life != Life::Gone)
        .map(|m| m.run);
    tickets.chain(mirrored).all(|r| s.delivered[r.index()] != 0)
}
