//! The store behind the controller's doors ([`crate::ports`]): the
//! membership and the ticket reads of a [`TicketStore`], and its errors as
//! the controller sees them.

use super::{StoreError, TicketStore};
use crate::ports::{Membership, StoreDoors, StoreFailure, Tickets};
use assetscan_domain::AssetId;
use assetscan_domain::ticket::Ticket;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

impl From<StoreError> for StoreFailure {
    fn from(err: StoreError) -> StoreFailure {
        let (reason, detail) = (err.reason(), err.to_string());
        match err.is_unavailable() {
            true => StoreFailure::Unavailable { reason, detail },
            false => StoreFailure::Refused { reason, detail },
        }
    }
}

impl TicketStore {
    /// This store behind the controller's doors.
    pub fn doors(&self) -> StoreDoors {
        let store = Arc::new(self.clone());
        StoreDoors {
            membership: store.clone(),
            tickets: store,
        }
    }
}

impl Membership for TicketStore {
    fn heartbeat<'a>(
        &'a self,
        group: &'a str,
        member: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Vec<(String, u64)>, StoreFailure>> {
        Box::pin(async move { Ok(TicketStore::heartbeat(self, group, member, ttl).await?) })
    }

    fn leave<'a>(
        &'a self,
        group: &'a str,
        member: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreFailure>> {
        Box::pin(async move { Ok(TicketStore::leave(self, group, member).await?) })
    }
}

impl Tickets for TicketStore {
    fn ticket_of<'a>(
        &'a self,
        namespace: Option<&'a str>,
        asset: &'a AssetId,
        run: &'a str,
    ) -> BoxFuture<'a, Result<Option<Ticket>, StoreFailure>> {
        Box::pin(async move {
            let ticket = match namespace {
                Some(namespace) => self.scoped(namespace)?.get_ticket(asset, run).await?,
                None => self.get_ticket(asset, run).await?,
            };
            Ok(ticket)
        })
    }

    /// After Redis failed, the connection is re-established lazily: the
    /// first command after Redis is back still fails with the old error
    /// (and only then starts the reconnect), so an unavailable answer is
    /// asked once more.
    fn ready(&self) -> BoxFuture<'_, Result<(), StoreFailure>> {
        Box::pin(async move {
            match self.ping().await {
                Ok(()) => Ok(()),
                Err(err) if err.is_unavailable() => Ok(self.ping().await?),
                Err(err) => Err(err.into()),
            }
        })
    }

    fn lock_ttl(&self) -> Duration {
        self.config().lock_ttl
    }
}
