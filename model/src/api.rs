//! The AssetScan object as the API server keeps it: its life (live, being
//! deleted, gone), its spec generation, and the status mirror with the CRD's
//! CEL transition rules.

use crate::mutant::{Defences, Mutant};
use crate::redis::{Run, Ticket};
use assetscan_domain::ticket::Status;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Life {
    Live,
    /// `deletionTimestamp` set; the finalizer holds the object until the
    /// cleanup ran.
    Deleting,
    Gone,
}

/// The fence fields of the status, which every mirror write carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mirror {
    pub run: Run,
    pub token: u8,
    pub revision: u8,
    pub phase: Status,
    pub observed_generation: u8,
}

impl Mirror {
    /// The status mirroring `ticket` of `run`, as seen by an executor that
    /// read the object at `generation`.
    pub fn of(run: Run, ticket: Ticket, generation: u8) -> Mirror {
        Mirror {
            run,
            token: ticket.token,
            revision: ticket.revision,
            phase: ticket.status,
            observed_generation: generation,
        }
    }

    fn fence(self) -> (u8, u8) {
        (self.token, self.revision)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Object {
    pub life: Life,
    pub generation: u8,
    pub status: Option<Mirror>,
}

/// Why a status write did not land.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusRefused {
    /// 404: the object is gone.
    Gone,
    /// Not sent: behind the stored status (the mirror's own check, made
    /// against the status it re-read after a resourceVersion conflict).
    Behind,
    /// 422 from a CEL transition rule.
    Cel,
    /// 409: the object changed since it was read (a write conditional on
    /// the resourceVersion as read).
    Conflict,
}

impl Object {
    pub fn new() -> Object {
        Object {
            life: Life::Live,
            generation: 1,
            status: None,
        }
    }

    /// A status write as `StatusWriter::write` makes it. The write is
    /// conditional on the resourceVersion it was computed against and is
    /// retried against a fresh read on conflict; as every write carries all
    /// the fence fields, that amounts to one compare-and-set against the
    /// current status, which is how the model takes it.
    pub fn write_status(&mut self, new: Mirror, d: Defences) -> Result<(), StatusRefused> {
        if self.life == Life::Gone {
            return Err(StatusRefused::Gone);
        }
        if let Some(old) = self.status {
            if new.fence() < old.fence() {
                return Err(StatusRefused::Behind);
            }
            if d.on(Mutant::NoStatusFence) && !cel_allows(old, new) {
                return Err(StatusRefused::Cel);
            }
        }
        self.status = Some(new);
        Ok(())
    }
}

impl Default for Object {
    fn default() -> Object {
        Object::new()
    }
}

/// The CRD's transition rules on the status (`TOKEN_RULE`,
/// `GENERATION_RULE` in `domain/src/fence.rs`).
fn cel_allows(old: Mirror, new: Mirror) -> bool {
    let fence = new.token > old.token || (new.token == old.token && new.revision >= old.revision);
    fence && new.observed_generation >= old.observed_generation
}
