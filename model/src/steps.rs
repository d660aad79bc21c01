//! What the executors' script calls do to Redis, and how the ghost (the
//! model's record of what happened, which the properties read) judges each
//! step.

use crate::mutant::{Defences, Mutant};
use crate::redis::{Acquired, Holder};
use crate::state::{Pc, State, broken};
use assetscan_domain::ticket::Status;

pub fn acquire(next: &mut State, w: usize, d: Defences) {
    let worker = next.workers[w];
    let answer = next.redis.acquire(
        Holder::Worker(w as u8),
        worker.run,
        worker.floor,
        worker.supersedes,
        d,
    );
    let run = worker.run.index();
    match answer {
        Acquired::Locked | Acquired::Retired => next.workers[w].rest(),
        Acquired::EarlierAlerting => {
            // The controller drives the earlier run at once, in the same
            // reconcile, from the same read.
            let worker = &mut next.workers[w];
            if let Some(earlier) = worker.supersedes.take() {
                worker.run = earlier;
            }
        }
        Acquired::Terminal(ticket) => {
            next.workers[w].seen = Some(ticket);
            next.workers[w].pc = Pc::Mirror;
        }
        Acquired::Claimed {
            token,
            ticket,
            created,
            ended,
        } => {
            if let Some((earlier, by)) = ended {
                next.ghost.ended[earlier.index()] = true;
                let claimed = &mut next.ghost.claimed[earlier.index()];
                *claimed = (*claimed).max(by);
            }
            if created && next.ghost.ended[run] {
                next.ghost.broken |= broken::ENDED_RUN_TICKET;
            }
            if created && next.ghost.retired {
                next.ghost.broken |= broken::DELETED_OBJECT_TICKET;
            }
            next.ghost.claimed[run] = next.ghost.claimed[run].max(token);
            let worker = &mut next.workers[w];
            worker.token = token;
            worker.seen = Some(ticket);
            worker.pc = Pc::RecordClaim;
        }
    }
}

pub fn advance(next: &mut State, w: usize, to: Status, d: Defences) {
    let worker = next.workers[w];
    let run = worker.run.index();
    match next.redis.advance(worker.run, worker.token, to, d) {
        Ok(ticket) => {
            let recorded = next
                .object
                .status
                .filter(|m| m.run == worker.run)
                .map_or(0, |m| m.token);
            if worker.token < next.ghost.claimed[run].max(recorded) {
                next.ghost.broken |= broken::STALE_WRITE;
            }
            next.ghost.notifying[run] |= to == Status::Notifying;
            next.ghost.ended[run] |= to.is_terminal();
            next.workers[w].seen = Some(ticket);
            next.workers[w].pc = Pc::Mirror;
        }
        Err(_) => next.workers[w].pc = Pc::Release,
    }
}

/// The lock's holder learns, at its next look at its lease deadline, that
/// the lock is gone.
pub fn lapse(next: &mut State) {
    if let Some(Holder::Worker(w)) = next.redis.lock
        && let Some(worker) = next.workers.get_mut(usize::from(w))
    {
        worker.lapsed = true;
    }
}

/// The notification, keyed by the ticket id (and, in a mutant, the token).
/// A provider call: not made once the lease lapsed.
pub fn notify(next: &mut State, w: usize, d: Defences) {
    let worker = next.workers[w];
    if worker.lapsed {
        next.workers[w].pc = Pc::Release;
        return;
    }
    let key = if d.on(Mutant::KeyPerToken) {
        0
    } else {
        worker.token.min(15)
    };
    next.delivered[worker.run.index()] |= 1 << key;
    if let Pc::Notify { then } = worker.pc {
        next.workers[w].pc = Pc::Write(then);
    }
}

/// Records in the ghost the step properties `next` breaks.
pub fn judge_step(before: &State, next: &mut State) {
    for (old, new) in before.redis.tickets.iter().zip(next.redis.tickets) {
        if let (Some(old), Some(new)) = (old, new)
            && !goes_forward(old.status, new.status)
        {
            next.ghost.broken |= broken::TICKET_WENT_BACK;
        }
    }
    if let (Some(old), Some(new)) = (before.object.status, next.object.status)
        && ((new.token, new.revision) < (old.token, old.revision)
            || new.observed_generation < old.observed_generation)
    {
        next.ghost.broken |= broken::STATUS_WENT_BACK;
    }
}

/// The order of a run, declared apart from the moves (each status's
/// stage): a status may stay, or move to a later stage; a terminal one
/// never changes, and the online check's verdict is never swapped for the
/// other.
fn goes_forward(from: Status, to: Status) -> bool {
    let stage = |s: Status| s.declared().stage;
    from == to || (!from.is_terminal() && stage(to) > stage(from))
}
