//! The model: which actions each state allows and what each one does.
//!
//! Executors act one atomic step at a time, each step one script call or
//! one API request, in any interleaving. The environment acts too: time
//! passing (a lease expires while its holder is paused), faults (pauses,
//! crashes, Redis losing its data) and the user (a spec change, the
//! deletion). Faults are budgeted so that every path ends.

use crate::api::{Life, Mirror, Object, StatusRefused};
use crate::mutant::{Defences, Mutant};
use crate::operator::{Decision, GENERATIONS, Tables, Work};
use crate::redis::{Holder, RUNS, Redis, Run};
use crate::state::{Budget, Ghost, Pc, State, Worker};
use crate::steps::{acquire, advance, judge_step, lapse, notify};
use assetscan_domain::ticket::Status;

/// How much of the world the model lets happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Executors (operator replicas).
    pub workers: u8,
    /// Pauses and crashes, in all.
    pub faults: u8,
    /// Whether Redis may lose all its data (once).
    pub data_loss: bool,
    /// Whether the spec may change (once).
    pub spec_change: bool,
    /// Whether the object may be deleted.
    pub deletion: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A reconcile starts: the executor reads the object.
    Read(u8),
    Acquire(u8),
    RecordClaim(u8),
    /// A provider call answering with the status to write.
    Call(u8, Status),
    /// `advance` to the status.
    Advance(u8, Status),
    Notify(u8),
    Mirror(u8),
    Release(u8),
    Retire(u8),
    Unfinalize(u8),
    Pause(u8),
    Resume(u8),
    Crash(u8),
    LockExpires,
    RedisLosesData,
    SpecChange,
    Delete,
    /// The retention of a ticket of a deleted object runs out.
    TicketExpires(Run),
}

impl Action {
    /// The executor that acts, if one does.
    pub fn worker(self) -> Option<usize> {
        match self {
            Action::Read(w)
            | Action::Acquire(w)
            | Action::RecordClaim(w)
            | Action::Call(w, _)
            | Action::Advance(w, _)
            | Action::Notify(w)
            | Action::Mirror(w)
            | Action::Release(w)
            | Action::Retire(w)
            | Action::Unfinalize(w)
            | Action::Pause(w)
            | Action::Resume(w)
            | Action::Crash(w) => Some(usize::from(w)),
            _ => None,
        }
    }
}

/// The modelled system, with one set of defences.
#[derive(Clone, Debug)]
pub struct System {
    pub bounds: Bounds,
    pub defences: Defences,
    pub tables: Tables,
    /// Hold the design to what it does not promise (see `docs/model.md`,
    /// "Findings"): a data loss does not excuse forgetting a run's end or
    /// the object's deletion.
    pub strict: bool,
    /// Check only this property (to find its own shortest counterexample).
    pub focus: Option<&'static str>,
}

impl System {
    pub fn initial(&self) -> State {
        State {
            redis: Redis::empty(),
            object: Object::new(),
            workers: vec![Worker::idle(true); usize::from(self.bounds.workers)],
            delivered: [0; RUNS],
            budget: Budget {
                faults: self.bounds.faults,
                data_loss: self.bounds.data_loss,
                spec_change: self.bounds.spec_change,
                deletion: self.bounds.deletion,
            },
            ghost: Ghost::default(),
        }
    }

    /// The actions `state` allows, in a fixed order.
    pub fn enabled(&self, state: &State, out: &mut Vec<Action>) {
        // From reading the object to `acquire` takes an executor no time
        // unless it is paused there: only then can the world move under its
        // floor.
        let reading = state
            .workers
            .iter()
            .position(|w| w.pc == Pc::Acquire && !w.paused);
        if let Some(w) = reading {
            self.worker_actions(state, w as u8, &state.workers[w], out);
            return;
        }
        for (i, worker) in state.workers.iter().enumerate() {
            self.worker_actions(state, i as u8, worker, out);
        }
        let busy = state.workers.iter().any(|w| w.pc != Pc::Idle);
        let lock_lapses = match state.redis.lock {
            Some(Holder::Orphan) => true,
            Some(Holder::Worker(w)) => state.worker(usize::from(w)).is_some_and(|w| w.paused),
            None => false,
        };
        if lock_lapses {
            out.push(Action::LockExpires);
        }
        // The user and Redis act while a run is going on: once all is quiet
        // the path may end. Redis may lose its data at any such moment, also
        // while a claim is not yet recorded in the status (a token the floor
        // cannot know of, so Redis may hand it out again): such a claim is
        // then never recorded, and never acts.
        if busy && state.budget.data_loss {
            out.push(Action::RedisLosesData);
        }
        if busy && state.budget.spec_change && state.object.life == Life::Live {
            out.push(Action::SpecChange);
        }
        if busy && state.budget.deletion && state.object.life == Life::Live {
            out.push(Action::Delete);
        }
        if state.object.life == Life::Gone {
            for run in Run::all().filter(|r| state.redis.ticket(*r).is_some()) {
                out.push(Action::TicketExpires(run));
            }
        }
    }

    fn worker_actions(&self, state: &State, w: u8, worker: &Worker, out: &mut Vec<Action>) {
        if worker.paused {
            out.push(Action::Resume(w));
            if state.budget.faults > 0 {
                out.push(Action::Crash(w));
            }
            return;
        }
        match worker.pc {
            Pc::Idle => {
                if worker.news && self.has_work(&state.object) {
                    out.push(Action::Read(w));
                }
                return;
            }
            Pc::Acquire => out.push(Action::Acquire(w)),
            Pc::RecordClaim => out.push(Action::RecordClaim(w)),
            Pc::Advance => match worker.seen.map(|t| self.tables.work(t.status)) {
                Some(Work::Call(answers)) => {
                    out.extend(answers.iter().map(|to| Action::Call(w, *to)));
                }
                Some(Work::Advance(targets)) => {
                    out.extend(targets.iter().map(|to| Action::Advance(w, *to)));
                }
                _ => {}
            },
            Pc::Write(to) => out.push(Action::Advance(w, to)),
            Pc::Notify { .. } => out.push(Action::Notify(w)),
            Pc::Mirror => out.push(Action::Mirror(w)),
            Pc::Release => out.push(Action::Release(w)),
            Pc::Retire => out.push(Action::Retire(w)),
            Pc::Unfinalize => out.push(Action::Unfinalize(w)),
        }
        if state.budget.faults > 0 {
            out.push(Action::Pause(w));
            out.push(Action::Crash(w));
        }
    }

    /// Whether a reconcile of the object, read now, has anything to do.
    fn has_work(&self, object: &Object) -> bool {
        match object.life {
            Life::Live => self.tables.decide(object.generation, object.status) != Decision::Wait,
            Life::Deleting => true,
            Life::Gone => false,
        }
    }

    /// The state after `action`, before the executors are put in canonical
    /// order.
    pub fn step(&self, state: &State, action: Action) -> State {
        let mut next = state.clone();
        match action {
            Action::Pause(_)
            | Action::Resume(_)
            | Action::Crash(_)
            | Action::LockExpires
            | Action::RedisLosesData
            | Action::SpecChange
            | Action::Delete
            | Action::TicketExpires(_) => self.happen(&mut next, action),
            _ => self.execute(&mut next, action),
        }
        judge_step(state, &mut next);
        if next.world_differs(state) {
            for worker in &mut next.workers {
                worker.news = true;
            }
        }
        next
    }

    /// An executor's own step: one script call or one API request.
    fn execute(&self, next: &mut State, action: Action) {
        let d = self.defences;
        match action {
            Action::Read(w) => self.read(next, usize::from(w)),
            Action::Acquire(w) => acquire(next, usize::from(w), d),
            Action::RecordClaim(w) => self.record_claim(next, usize::from(w)),
            Action::Call(w, answer) => {
                let worker = &mut next.workers[usize::from(w)];
                worker.pc = if worker.lapsed {
                    Pc::Release
                } else {
                    Pc::Write(answer)
                };
            }
            Action::Advance(w, to) => advance(next, usize::from(w), to, d),
            Action::Notify(w) => notify(next, usize::from(w), d),
            Action::Mirror(w) => self.mirror(next, usize::from(w)),
            Action::Release(w) => {
                next.redis.release(Holder::Worker(w));
                next.workers[usize::from(w)].rest();
            }
            Action::Retire(w) => {
                let drawn = next.redis.retire(d);
                for (run, token) in Run::all().zip(drawn) {
                    if let Some(token) = token {
                        next.ghost.ended[run.index()] = true;
                        let claimed = &mut next.ghost.claimed[run.index()];
                        *claimed = (*claimed).max(token);
                    }
                }
                next.ghost.retired = true;
                next.workers[usize::from(w)].pc = Pc::Unfinalize;
            }
            Action::Unfinalize(w) => {
                if next.object.life == Life::Deleting {
                    next.object.life = Life::Gone;
                }
                next.workers[usize::from(w)].rest();
            }
            _ => {}
        }
    }

    /// What happens to the executors and the world: faults, time, the user.
    fn happen(&self, next: &mut State, action: Action) {
        match action {
            Action::Pause(w) => {
                next.workers[usize::from(w)].paused = true;
                next.budget.faults = next.budget.faults.saturating_sub(1);
            }
            Action::Resume(w) => next.workers[usize::from(w)].paused = false,
            Action::Crash(w) => {
                if next.redis.lock == Some(Holder::Worker(w)) {
                    next.redis.lock = Some(Holder::Orphan);
                }
                next.workers[usize::from(w)] = Worker::idle(true);
                next.budget.faults = next.budget.faults.saturating_sub(1);
            }
            Action::LockExpires => {
                lapse(next);
                next.redis.lock = None;
            }
            Action::RedisLosesData => {
                lapse(next);
                next.redis.lose_everything();
                next.budget.data_loss = false;
                // Redis's history is gone with it. Strictly, what the status
                // showed stays known: a run it showed ended, and the deletion.
                next.ghost.claimed = [0; RUNS];
                next.ghost.ended = [false; RUNS];
                if self.strict {
                    if let Some(shown) = next.object.status.filter(|m| m.phase.is_terminal()) {
                        next.ghost.ended[shown.run.index()] = true;
                    }
                } else {
                    next.ghost.retired = false;
                }
            }
            Action::SpecChange => {
                next.object.generation = (next.object.generation + 1).min(GENERATIONS);
                next.budget.spec_change = false;
            }
            Action::Delete => {
                next.object.life = Life::Deleting;
                next.budget.deletion = false;
            }
            Action::TicketExpires(run) => next.redis.tickets[run.index()] = None,
            _ => {}
        }
    }

    fn read(&self, next: &mut State, w: usize) {
        let object = next.object;
        next.workers[w].news = false;
        match object.life {
            Life::Deleting => next.workers[w].pc = Pc::Retire,
            Life::Live => {
                let (chosen, supersedes) =
                    match self.tables.decide(object.generation, object.status) {
                        Decision::Drive(run) => (Some(run), None),
                        Decision::DriveUnlessEarlierAlerts { earlier, next } => {
                            (Some(next), Some(earlier))
                        }
                        Decision::Wait => (None, None),
                    };
                let worker = &mut next.workers[w];
                if let Some(run) = chosen {
                    worker.pc = Pc::Acquire;
                    worker.run = run;
                    worker.supersedes = supersedes;
                    worker.generation = object.generation;
                    worker.floor = object.status.map_or(0, |s| s.token);
                    worker.read = object.status;
                }
            }
            Life::Gone => {}
        }
    }

    /// `record_claim`: the claim must be in the status before any provider
    /// call, or the run stops. It is written once, conditional on the
    /// object as read before `acquire` (its resourceVersion): a claim over
    /// an object that changed since is never recorded.
    fn record_claim(&self, next: &mut State, w: usize) {
        let worker = next.workers[w];
        let Some(seen) = worker.seen else { return };
        let object = next.object;
        let as_read = object.life == Life::Live
            && object.generation == worker.generation
            && object.status == worker.read;
        let recorded = if as_read || !self.defences.on(Mutant::NoClaimPrecondition) {
            next.object.write_status(
                Mirror::of(worker.run, seen, worker.generation),
                self.defences,
            )
        } else {
            Err(StatusRefused::Conflict)
        };
        next.workers[w].pc = match recorded {
            Ok(()) => self.after(seen.status, true, worker.token),
            Err(_) => Pc::Release,
        };
    }

    /// `on_ticket`: a refused status write does not stop the run.
    fn mirror(&self, next: &mut State, w: usize) {
        let worker = next.workers[w];
        let Some(seen) = worker.seen else { return };
        let _ = next.object.write_status(
            Mirror::of(worker.run, seen, worker.generation),
            self.defences,
        );
        next.workers[w].pc = self.after(seen.status, false, worker.token);
        if next.workers[w].pc == Pc::Idle {
            next.workers[w].rest();
        }
    }

    /// What an executor does next with a ticket at `status`, just claimed
    /// or just written.
    fn after(&self, status: Status, claimed: bool, token: u8) -> Pc {
        let d = self.defences;
        match self.tables.work(status) {
            Work::Done if token == 0 => Pc::Idle,
            Work::Done => Pc::Release,
            Work::Notify if claimed && !d.on(Mutant::NoResend) => Pc::Write(Status::Notified),
            Work::Notify => Pc::Notify {
                then: Status::Notified,
            },
            Work::Advance([Status::Notifying]) if !d.on(Mutant::NotifyFirst) => Pc::Notify {
                then: Status::Notifying,
            },
            Work::Advance(_) | Work::Call(_) => Pc::Advance,
        }
    }

    /// Whether no action is enabled: the path ends here.
    pub fn is_final(&self, state: &State) -> bool {
        let mut actions = Vec::new();
        self.enabled(state, &mut actions);
        actions.is_empty()
    }

    /// Where every path must end: the object deleted with no ticket left,
    /// or the run its generation calls for ended.
    pub fn settled(&self, state: &State) -> bool {
        let object = state.object;
        match object.life {
            Life::Gone => state.redis.tickets.iter().all(Option::is_none),
            Life::Deleting => false,
            Life::Live => {
                self.shown_ended(state)
                    || state
                        .redis
                        .ticket(Run(object.generation))
                        .is_some_and(|t| t.status.is_terminal())
            }
        }
    }

    /// Whether the status shows the end of the run the object's generation
    /// calls for (a reconcile has nothing left to do).
    pub fn shown_ended(&self, state: &State) -> bool {
        let object = state.object;
        object.life != Life::Live
            || self.tables.decide(object.generation, object.status) == Decision::Wait
    }
}

/// Whether a run is left at a confirmed high risk whose notification is not
/// known to be sent.
pub fn alert_pending(state: &State) -> bool {
    state.object.life == Life::Live
        && state
            .redis
            .tickets
            .iter()
            .flatten()
            .any(|t| t.status.is_alerting())
}
