//! Redis as the scripts in `lua/` leave it: the asset's lock, its fence
//! counter, the tickets of the object's runs and the object's tombstone.
//! Every method is one script, so one atomic step of the model.

use crate::mutant::{Defences, Mutant};
use assetscan_domain::ticket::Status;

/// Runs of the object: one per spec generation (generation 1 and 2).
pub const RUNS: usize = 2;

/// A run, named by the generation it scans (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Run(pub u8);

impl Run {
    pub fn index(self) -> usize {
        usize::from(self.0.saturating_sub(1)).min(RUNS - 1)
    }

    pub fn all() -> impl Iterator<Item = Run> {
        (1..=RUNS as u8).map(Run)
    }
}

/// The parts of a ticket the protocol reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket {
    pub status: Status,
    pub token: u8,
    pub revision: u8,
}

/// Who the lock says holds it. A holder that crashed is gone for good (a
/// restarted process has a new holder id), so its lock is nobody's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Holder {
    Worker(u8),
    Orphan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Redis {
    /// The asset's lock; its expiry is an event of the model.
    pub lock: Option<Holder>,
    /// The fence counter (`INCR` on every claim).
    pub fence: u8,
    pub tickets: [Option<Ticket>; RUNS],
    /// Set by `retire.lua`: the object is deleted, no run of it may start.
    pub tombstone: bool,
}

/// What `acquire.lua` answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The lock is another's (`LOCKED`).
    Locked,
    /// The object was retired (`RUN_RETIRED`).
    Retired,
    /// The run already ended: its ticket, untouched, and no lock taken.
    Terminal(Ticket),
    /// The run the claim supersedes is alerting (`EARLIER_ALERTING`):
    /// nothing taken or written.
    EarlierAlerting,
    /// The lock, a new token, and the ticket as claimed (`created` when it
    /// did not exist).
    Claimed {
        token: u8,
        ticket: Ticket,
        created: bool,
        /// The superseded run, failed under this token, if it was in
        /// progress.
        ended: Option<(Run, u8)>,
    },
}

/// Why `advance.lua` refused a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    NotFound,
    StaleToken,
    IllegalTransition,
}

impl Redis {
    pub fn empty() -> Redis {
        Redis {
            lock: None,
            fence: 0,
            tickets: [None; RUNS],
            tombstone: false,
        }
    }

    pub fn ticket(&self, run: Run) -> Option<Ticket> {
        self.tickets[run.index()]
    }

    /// `acquire.lua` (with the owner's tombstone, and the run it
    /// `supersedes`).
    pub fn acquire(
        &mut self,
        holder: Holder,
        run: Run,
        floor: u8,
        supersedes: Option<Run>,
        d: Defences,
    ) -> Acquired {
        if self.lock.is_some_and(|h| h != holder) {
            return Acquired::Locked;
        }
        if self.tombstone {
            return Acquired::Retired;
        }
        let found = self.ticket(run);
        if let Some(ticket) = found.filter(|t| t.status.is_terminal()) {
            return Acquired::Terminal(ticket);
        }
        let earlier = supersedes
            .filter(|_| d.on(Mutant::NoSupersede))
            .and_then(|r| Some((r, self.ticket(r)?)))
            .filter(|(_, t)| !t.status.is_terminal());
        if earlier.is_some_and(|(_, t)| t.status.is_alerting()) {
            return Acquired::EarlierAlerting;
        }
        self.lock = Some(holder);
        let floor = if d.on(Mutant::NoFloor) { floor } else { 0 };
        let ended = earlier.map(|(r, mut t)| {
            self.fence = self
                .fence
                .saturating_add(1)
                .max(floor.max(t.token).saturating_add(1));
            t.status = Status::Failed;
            t.token = self.fence;
            t.revision = t.revision.saturating_add(1);
            self.tickets[r.index()] = Some(t);
            (r, self.fence)
        });
        self.fence = self.fence.saturating_add(1).max(floor.saturating_add(1));
        let token = self.fence;
        let mut ticket = found.unwrap_or(Ticket {
            status: Status::Init,
            token: 0,
            revision: 0,
        });
        if d.on(Mutant::NoClaimAtAcquire) {
            ticket.token = token;
            ticket.revision = ticket.revision.saturating_add(1);
        }
        self.tickets[run.index()] = Some(ticket);
        Acquired::Claimed {
            token,
            ticket,
            created: found.is_none(),
            ended,
        }
    }

    /// `advance.lua`: the token check, then the transition table (the
    /// declaration the script's table is generated from, [`Status::allows`]).
    pub fn advance(
        &mut self,
        run: Run,
        caller: u8,
        to: Status,
        d: Defences,
    ) -> Result<Ticket, Refused> {
        let mut ticket = self.ticket(run).ok_or(Refused::NotFound)?;
        let claims_here = !d.on(Mutant::NoClaimAtAcquire);
        let token_ok = match () {
            _ if !d.on(Mutant::NoTokenCheck) => true,
            _ if claims_here => caller >= ticket.token,
            _ => caller == ticket.token,
        };
        if !token_ok {
            return Err(Refused::StaleToken);
        }
        if !ticket.status.allows(to) {
            return Err(Refused::IllegalTransition);
        }
        if claims_here {
            ticket.token = caller;
        }
        ticket.status = to;
        ticket.revision = ticket.revision.saturating_add(1);
        self.tickets[run.index()] = Some(ticket);
        Ok(ticket)
    }

    /// `release.lua`: only the holder's own lock.
    pub fn release(&mut self, holder: Holder) {
        if self.lock == Some(holder) {
            self.lock = None;
        }
    }

    /// `retire.lua`: the tombstone, then every ticket of the object deleted,
    /// a non-terminal one first failed under a fresh token. Returns the
    /// tokens so drawn, per run.
    pub fn retire(&mut self, d: Defences) -> [Option<u8>; RUNS] {
        self.tombstone = d.on(Mutant::NoTombstone);
        let mut drawn = [None; RUNS];
        for (slot, token) in self.tickets.iter_mut().zip(drawn.iter_mut()) {
            if slot.is_some_and(|t| !t.status.is_terminal()) {
                self.fence = self.fence.saturating_add(1);
                *token = Some(self.fence);
            }
            *slot = None;
        }
        drawn
    }

    /// A restart without persistence, or a failover that lost writes: all
    /// keys gone.
    pub fn lose_everything(&mut self) {
        *self = Redis::empty();
    }
}
