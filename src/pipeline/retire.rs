//! The end of an owner's runs for good: what the finalizer of a deleted
//! object asks of the pipeline.

use super::{Pipeline, StoreFailure, drill};
use crate::store::{StoreError, TicketStore};
use assetscan_domain::AssetId;

impl<E> Pipeline<E> {
    /// Ends the runs of `owner` (runs whose id carries it) of `asset` in
    /// `namespace` for good: `retire` leaves the owner's tombstone, fails
    /// each run still in progress under a fresh token and removes the
    /// tickets, creating nothing. Returns how many tickets it removed.
    /// Idempotent: two replicas may retire the same owner at once.
    pub async fn retire_owner(
        &self,
        namespace: Option<&str>,
        asset: &AssetId,
        owner: &str,
        holder: &str,
    ) -> Result<usize, StoreFailure> {
        let store = &self.store_in(namespace)?;
        let listed = owned_runs(store, asset, owner).await?;
        drill::stop_before(asset.as_str(), "RETIRE");
        let mut removed = store.retire(asset, owner, &listed, holder).await?;
        // A run acquired between the listing and the tombstone is listed now;
        // none can appear after it.
        let late = owned_runs(store, asset, owner).await?;
        if !late.is_empty() {
            removed += store.retire(asset, owner, &late, holder).await?;
        }
        Ok(removed)
    }
}

/// The runs of `owner` that have a ticket.
async fn owned_runs(
    store: &TicketStore,
    asset: &AssetId,
    owner: &str,
) -> Result<Vec<String>, StoreError> {
    let prefix = format!("{owner}-");
    let mut runs = store.runs(asset).await?;
    runs.retain(|run| run.starts_with(&prefix));
    Ok(runs)
}
