//! The controller's doors to the runs' store: small traits in the
//! controller's own words, over domain types alone, which the store side
//! implements (`store/doors.rs`) and the controller holds as
//! [`StoreDoors`]. A door is also where the store's error becomes
//! [`StoreFailure`]: what the controller needs of a failure (is Redis away,
//! and a stable reason), never the store's own type. So the direction is
//! held by types, in the manner of linkerd's policy-controller core: the
//! Kubernetes side names these traits and never a store type.
//!
//! Starting or resuming a run is the pipeline's one job
//! (`pipeline::Pipeline::run`, which answers with the same failure).

use assetscan_domain::AssetId;
use assetscan_domain::ticket::Ticket;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

/// Why the store did not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreFailure {
    /// Redis did not answer (connection, timeout, failover, a write no
    /// replica acknowledged): worth a quick retry once it is back.
    #[error("{detail}")]
    Unavailable {
        reason: &'static str,
        detail: String,
    },
    /// Redis answered, and refused or could not be understood (a corrupt
    /// ticket, a permission, an invalid id): retrying at once changes
    /// nothing.
    #[error("{detail}")]
    Refused {
        reason: &'static str,
        detail: String,
    },
}

impl StoreFailure {
    /// Short stable name, for metrics labels and condition reasons.
    pub fn reason(&self) -> &'static str {
        match self {
            StoreFailure::Unavailable { reason, .. } | StoreFailure::Refused { reason, .. } => {
                reason
            }
        }
    }

    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreFailure::Unavailable { .. })
    }
}

/// Who of the replicas is live: the runs' store keeps the membership, as a
/// replica that cannot reach it runs nothing anyway.
pub trait Membership: Send + Sync {
    /// Renews `member`'s heartbeat in `group` for `ttl`; the live members
    /// and when each one lapses (ms since the epoch).
    fn heartbeat<'a>(
        &'a self,
        group: &'a str,
        member: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Vec<(String, u64)>, StoreFailure>>;

    /// Takes `member` out of `group` at once, rather than at its ttl.
    fn leave<'a>(
        &'a self,
        group: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreFailure>>;
}

/// What the controller reads of the runs without taking part in one.
pub trait Tickets: Send + Sync {
    /// The ticket of `run` of `asset` in `namespace` (none: the legacy
    /// layout of runs of no object), as the store has it now.
    fn ticket_of<'a>(
        &'a self,
        namespace: Option<&'a str>,
        asset: &'a AssetId,
        run: &'a str,
    ) -> BoxFuture<'a, Result<Option<Ticket>, StoreFailure>>;

    /// Whether the store answers, on a live connection.
    fn ready(&self) -> BoxFuture<'_, Result<(), StoreFailure>>;

    /// How long a lock outlives its holder: a run another executor holds
    /// ends within this long of that executor's end.
    fn lock_ttl(&self) -> Duration;
}

/// The doors of one store, as the controller holds them.
#[derive(Clone)]
pub struct StoreDoors {
    pub membership: Arc<dyn Membership>,
    pub tickets: Arc<dyn Tickets>,
}
