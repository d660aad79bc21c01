//! The state of the modelled world: Redis, the object, the executors, the
//! notification receiver, what is left of the fault budget, and the ghost
//! record the properties are judged by.

use crate::api::{Mirror, Object};
use crate::redis::{Holder, RUNS, Redis, Run, Ticket};
use assetscan_domain::ticket::Status;

/// Where an executor is in its reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pc {
    /// Waiting for the next reconcile.
    Idle,
    /// Read the object and chose a run; next, `acquire` with the floor read.
    Acquire,
    /// Holds a fresh claim; next, record it in the status (`record_claim`).
    RecordClaim,
    /// Next, the step that `plan` gives for the ticket as last read: a
    /// provider call, or a decision and its write.
    Advance,
    /// Next, send the notification, then write `then`.
    Notify { then: Status },
    /// A step's result in hand; next, write it.
    Write(Status),
    /// Next, mirror the ticket as last read into the status (`on_ticket`).
    Mirror,
    /// Next, release the lock.
    Release,
    /// Deletion: next, run the cleanup (`retire.lua`).
    Retire,
    /// Deletion: next, remove the finalizer.
    Unfinalize,
}

/// One executor (a replica of the operator) and what it remembers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Worker {
    pub pc: Pc,
    /// Stopped (GC, frozen VM, SIGSTOP) with its context intact.
    pub paused: bool,
    /// The world changed since this executor last read it. A reconcile of
    /// an unchanged world does what the last one did, so an executor with
    /// no news does not reconcile: a futile retry loop ends the path
    /// instead of cycling, and the liveness check sees it.
    pub news: bool,
    pub run: Run,
    /// The generation of the object as read.
    pub generation: u8,
    /// The status's token as read: the floor for `acquire`.
    pub floor: u8,
    /// The status as read: a claim is recorded only over the object as read
    /// (with the generation and the object's life, its resourceVersion).
    pub read: Option<Mirror>,
    /// The earlier generation's run that the claim of `run` supersedes.
    pub supersedes: Option<Run>,
    /// The token it holds, 0 if none.
    pub token: u8,
    /// Its lease deadline passed (the lock expired or vanished): it knows,
    /// on its monotonic clock, and makes no further provider call.
    pub lapsed: bool,
    /// The ticket as last read.
    pub seen: Option<Ticket>,
}

impl Worker {
    /// An executor between reconciles: it remembers nothing.
    pub fn idle(news: bool) -> Worker {
        Worker {
            pc: Pc::Idle,
            paused: false,
            news,
            run: Run(1),
            generation: 0,
            floor: 0,
            read: None,
            supersedes: None,
            token: 0,
            lapsed: false,
            seen: None,
        }
    }
}

impl Worker {
    /// Ends the reconcile: the executor forgets it, keeping only whether
    /// the world changed since it last read it.
    pub fn rest(&mut self) {
        *self = Worker::idle(self.news);
    }
}

/// What happened so far, kept outside the modelled systems (Redis losing
/// its data does not lose it). Properties over histories read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Per run, the highest token `acquire` handed out for it.
    pub claimed: [u8; RUNS],
    /// Per run, whether a ticket of it was ever written `NOTIFYING`.
    pub notifying: [bool; RUNS],
    /// Per run, whether a ticket of it ever reached a terminal status.
    pub ended: [bool; RUNS],
    /// The cleanup ran: the object is deleted as far as Redis is concerned.
    pub retired: bool,
    /// Properties of steps (not of states) found broken, as bits.
    pub broken: u8,
}

/// Bits of [`Ghost::broken`].
pub mod broken {
    pub const TICKET_WENT_BACK: u8 = 1;
    pub const STALE_WRITE: u8 = 1 << 1;
    pub const STATUS_WENT_BACK: u8 = 1 << 2;
    pub const ENDED_RUN_TICKET: u8 = 1 << 3;
    pub const DELETED_OBJECT_TICKET: u8 = 1 << 4;
}

/// What the model's environment may still do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Pauses and crashes left.
    pub faults: u8,
    pub data_loss: bool,
    pub spec_change: bool,
    pub deletion: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub redis: Redis,
    pub object: Object,
    pub workers: Vec<Worker>,
    /// The notification receiver: per run, the idempotency keys it was
    /// sent (a bit per key).
    pub delivered: [u16; RUNS],
    pub budget: Budget,
    pub ghost: Ghost,
}

impl State {
    pub fn worker(&self, w: usize) -> Option<&Worker> {
        self.workers.get(w)
    }

    /// Something other than the executors' own memory changed.
    pub fn world_differs(&self, other: &State) -> bool {
        self.redis != other.redis
            || self.object != other.object
            || self.delivered != other.delivered
    }

    /// The same state with the executors in a canonical order (they are
    /// interchangeable), and where each executor went: `order[new] = old`.
    pub fn canonical(mut self) -> (State, Vec<usize>) {
        let holder = self.redis.lock;
        let is_holder = |w: usize| holder == Some(Holder::Worker(w as u8));
        let mut order: Vec<usize> = (0..self.workers.len()).collect();
        order.sort_by_key(|&w| (self.workers[w], is_holder(w)));
        self.workers = order.iter().map(|&w| self.workers[w]).collect();
        if let Some(Holder::Worker(old)) = holder
            && let Some(new) = order.iter().position(|&w| w == usize::from(old))
        {
            self.redis.lock = Some(Holder::Worker(new as u8));
        }
        (self, order)
    }
}
