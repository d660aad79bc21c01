//! A path of the model told as a story, one action per line, with each
//! executor keeping its name although the model reorders executors to
//! count interchangeable states once.

use crate::api::{Life, Mirror};
use crate::redis::{Holder, Refused, Ticket};
use crate::state::{Pc, State, Worker};
use crate::system::{Action, System};

const NAMES: [&str; 8] = ["A", "B", "C", "D", "E", "F", "G", "H"];

/// One line per action of `path` (states and the actions taken from them),
/// then the last state.
pub fn tell(system: &System, path: &[(State, Option<Action>)]) -> Vec<String> {
    let mut names: Vec<&str> = NAMES.to_vec();
    let mut lines = Vec::new();
    for (state, action) in path {
        let Some(action) = *action else {
            lines.push(format!("end: {}", summary(state, &names)));
            break;
        };
        let raw = system.step(state, action);
        lines.push(format!(
            "{:>2}. {}",
            lines.len() + 1,
            line(system, state, action, &raw, &names)
        ));
        let (_, order) = raw.canonical();
        names = order.iter().map(|&old| name(&names, old)).collect();
    }
    lines
}

fn line(system: &System, before: &State, action: Action, after: &State, names: &[&str]) -> String {
    let who = action.worker().map_or("", |w| name(names, w));
    let was = action.worker().and_then(|w| before.worker(w));
    let now = action.worker().and_then(|w| after.worker(w));
    let (Some(was), Some(now)) = (was, now) else {
        return environment(before, action, names);
    };
    let run = now.run.0.max(was.run.0);
    match action {
        Action::Read(_) => match now.pc {
            Pc::Retire => format!("{who} reads the object: it is being deleted"),
            _ => format!(
                "{who} reads the object (generation {}, status {}): drives run g{run}",
                now.generation,
                mirror(before.object.status)
            ),
        },
        Action::Acquire(_) => acquired(who, run, was, now, before, after),
        Action::RecordClaim(_) => format!(
            "{who} records its claim in the status: {}",
            written(before, after)
        ),
        Action::Advance(_, to) => {
            let mut redis = before.redis;
            match redis.advance(was.run, was.token, to, system.defences) {
                Ok(t) => format!(
                    "{who} advance(g{run}, token {}, {to}) -> ok, {}",
                    was.token,
                    ticket(Some(t))
                ),
                Err(why) => format!(
                    "{who} advance(g{run}, token {}, {to}) -> {}",
                    was.token,
                    refusal(why)
                ),
            }
        }
        Action::Call(_, answer) => match now.pc {
            Pc::Release => format!("{who} would call a provider: its lease lapsed, it stops"),
            _ => format!("{who} calls a provider for run g{run}: the answer means {answer}"),
        },
        Action::Notify(_) => match now.pc {
            Pc::Release => format!("{who} would notify: its lease lapsed, it stops"),
            _ => format!("{who} sends the notification of run g{run}"),
        },
        Action::Mirror(_) => format!(
            "{who} mirrors {} into the status: {}",
            ticket(was.seen),
            written(before, after)
        ),
        Action::Release(_) => format!("{who} releases the lock"),
        Action::Retire(_) => {
            format!("{who} runs the cleanup (retire.lua): tombstone set, tickets deleted")
        }
        Action::Unfinalize(_) => format!("{who} removes the finalizer: the object is gone"),
        Action::Pause(_) => format!("{who} pauses"),
        Action::Resume(_) => format!(
            "{who} resumes with its context: token {}, ticket as read {}",
            was.token,
            ticket(was.seen)
        ),
        Action::Crash(_) => format!("{who} crashes and restarts with nothing"),
        _ => environment(before, action, names),
    }
}

/// The line of an `acquire`: what it answered, from where the executor is
/// now.
fn acquired(
    who: &str,
    run: u8,
    was: &Worker,
    now: &Worker,
    before: &State,
    after: &State,
) -> String {
    match now.pc {
        Pc::RecordClaim => format!(
            "{who} acquire(g{run}, floor {}{}) -> token {}, ticket {}{}{}",
            was.floor,
            was.supersedes
                .map_or(String::new(), |e| format!(", superseding g{}", e.0)),
            now.token,
            ticket(now.seen),
            if before.redis.ticket(now.run).is_none() {
                " (created)"
            } else {
                ""
            },
            superseded(before, after, was.supersedes)
        ),
        Pc::Acquire => format!(
            "{who} acquire(g{}, superseding g{run}) -> EARLIER_ALERTING: drives g{run} first",
            was.run.0
        ),
        Pc::Mirror => format!("{who} acquire(g{run}) -> run ended: {}", ticket(now.seen)),
        _ if before.redis.tombstone => format!("{who} acquire(g{run}) -> RUN_RETIRED"),
        _ => format!("{who} acquire(g{run}) -> LOCKED"),
    }
}

fn environment(before: &State, action: Action, names: &[&str]) -> String {
    match action {
        Action::LockExpires => match before.redis.lock {
            Some(Holder::Worker(w)) => format!(
                "the lock's lease expires ({} is paused)",
                name(names, usize::from(w))
            ),
            _ => "the lock's lease expires (its holder crashed)".to_owned(),
        },
        Action::RedisLosesData => "Redis loses all its data".to_owned(),
        Action::SpecChange => "the spec changes: generation 2".to_owned(),
        Action::Delete => "the object is deleted (deletionTimestamp set)".to_owned(),
        Action::TicketExpires(run) => format!("the ticket of run g{} expires", run.0),
        other => format!("{other:?}"),
    }
}

/// An executor's name; past the alphabet's few letters, a number.
fn name<'a>(names: &[&'a str], w: usize) -> &'a str {
    names.get(w).copied().unwrap_or("?")
}

fn refusal(why: Refused) -> &'static str {
    match why {
        Refused::NotFound => "TICKET_NOT_FOUND",
        Refused::StaleToken => "STALE_TOKEN",
        Refused::IllegalTransition => "ILLEGAL_TRANSITION",
    }
}

fn written(before: &State, after: &State) -> &'static str {
    match (
        before.object.life,
        before.object.status == after.object.status,
    ) {
        (Life::Gone, _) => "404, the object is gone",
        (_, false) => "written",
        (_, true) => "refused or unchanged",
    }
}

/// What a claim did to the run it supersedes.
fn superseded(before: &State, after: &State, earlier: Option<crate::redis::Run>) -> String {
    let Some(earlier) = earlier else {
        return String::new();
    };
    match (before.redis.ticket(earlier), after.redis.ticket(earlier)) {
        (Some(was), Some(now)) if was != now => {
            format!("; g{} ended: {}", earlier.0, ticket(Some(now)))
        }
        _ => String::new(),
    }
}

fn ticket(t: Option<Ticket>) -> String {
    t.map_or("none".to_owned(), |t| {
        format!("{} token {} rev {}", t.status, t.token, t.revision)
    })
}

fn mirror(m: Option<Mirror>) -> String {
    m.map_or("none".to_owned(), |m| {
        format!(
            "run g{} {} token {} rev {} observedGeneration {}",
            m.run.0, m.phase, m.token, m.revision, m.observed_generation
        )
    })
}

/// The last state in a line: Redis, the status, the deliveries.
fn summary(state: &State, names: &[&str]) -> String {
    let tickets: Vec<String> = crate::redis::Run::all()
        .map(|r| format!("g{}: {}", r.0, ticket(state.redis.ticket(r))))
        .collect();
    let lock = match state.redis.lock {
        Some(Holder::Worker(w)) => name(names, usize::from(w)).to_owned(),
        Some(Holder::Orphan) => "a crashed holder".to_owned(),
        None => "free".to_owned(),
    };
    format!(
        "tickets [{}], lock {lock}, status {}{}, deliveries {:?}",
        tickets.join(", "),
        mirror(state.object.status),
        if state.object.life == Life::Gone {
            " (object gone)"
        } else {
            ""
        },
        state.delivered
    )
}
