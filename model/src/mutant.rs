//! Mutants: the model with one defence taken away. Each exists to show that
//! the defence is needed, i.e. that the checker finds a run breaking the
//! property the defence guards once it is gone.

use std::fmt;
use std::str::FromStr;

/// One defence removed (or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `advance` ignores the caller's token.
    NoTokenCheck,
    /// `acquire` hands out a token without writing it into the ticket; the
    /// ticket takes a token at its first write, and `advance` refuses only
    /// tokens lower than the ticket's.
    NoClaimAtAcquire,
    /// `acquire` ignores the floor (the status's token) after Redis lost data.
    NoFloor,
    /// The CRD has no CEL transition rules on the status.
    NoStatusFence,
    /// The notification is sent before `NOTIFYING` is recorded.
    NotifyFirst,
    /// A takeover at `NOTIFYING` assumes the previous holder sent it.
    NoResend,
    /// The idempotency key carries the holder's token, not only the ticket id.
    KeyPerToken,
    /// Deletion's cleanup leaves no tombstone (as the cleanup built on
    /// `acquire` did): a late `acquire` creates the ticket again.
    NoTombstone,
    /// The claim of a later generation's run leaves the earlier run as it
    /// is (`acquire.lua` without its seventh key): a stalled executor of the
    /// earlier run may still confirm a risk there and die.
    NoSupersede,
    /// A claim is recorded over the status as it is now, not only over the
    /// object as read before `acquire` (no resourceVersion precondition).
    NoClaimPrecondition,
}

impl Mutant {
    pub const ALL: [Mutant; 10] = [
        Mutant::NoTokenCheck,
        Mutant::NoClaimAtAcquire,
        Mutant::NoFloor,
        Mutant::NoStatusFence,
        Mutant::NotifyFirst,
        Mutant::NoResend,
        Mutant::KeyPerToken,
        Mutant::NoTombstone,
        Mutant::NoSupersede,
        Mutant::NoClaimPrecondition,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::NoTokenCheck => "no-token-check",
            Mutant::NoClaimAtAcquire => "no-claim-at-acquire",
            Mutant::NoFloor => "no-floor",
            Mutant::NoStatusFence => "no-status-fence",
            Mutant::NotifyFirst => "notify-first",
            Mutant::NoResend => "no-resend",
            Mutant::KeyPerToken => "key-per-token",
            Mutant::NoTombstone => "no-tombstone",
            Mutant::NoSupersede => "no-supersede",
            Mutant::NoClaimPrecondition => "no-claim-precondition",
        }
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown mutant {given:?}; known mutants: {known}")]
pub struct UnknownMutant {
    /// The name asked for, cut to a readable length.
    pub given: String,
    pub known: String,
}

impl FromStr for Mutant {
    type Err = UnknownMutant;

    fn from_str(name: &str) -> Result<Mutant, UnknownMutant> {
        Mutant::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| UnknownMutant {
                given: name.chars().take(64).collect(),
                known: Mutant::ALL.map(Mutant::name).join(", "),
            })
    }
}

/// Which defences are on: all of them, or all but one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Defences(Option<Mutant>);

impl Defences {
    pub fn all() -> Defences {
        Defences(None)
    }

    pub fn without(mutant: Mutant) -> Defences {
        Defences(Some(mutant))
    }

    pub fn mutant(self) -> Option<Mutant> {
        self.0
    }

    /// Whether the defence that `mutant` removes is on.
    pub fn on(self, mutant: Mutant) -> bool {
        self.0 != Some(mutant)
    }
}
