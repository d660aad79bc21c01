//! The finalizer's cleanup: an object being deleted ends its runs for good.

use super::context::{Context, Error, object_key};
use super::request::owner_id;
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::Effects;
use crate::store::{StoreError, TicketStore};
use assetscan_domain::AssetId;
use kube::runtime::controller::Action;
use tracing::info;

/// Ends the object's runs for good (runs whose id carries its owner id):
/// `retire` leaves the owner's tombstone, fails each run still in progress
/// under a fresh token and removes the tickets, creating nothing. An
/// executor still driving a run (on another replica, or paused) finds its
/// ticket gone at its next write; one that read the object before the
/// deletion and acquires later is refused. Two replicas may clean up the
/// same object at once: retiring is idempotent.
pub(super) async fn cleanup<E: Effects + 'static>(
    obj: &AssetScan,
    ctx: &Context<E>,
) -> Result<Action, Error> {
    let Ok(asset) = AssetId::new(obj.spec.asset_id.clone()) else {
        return Ok(Action::await_change());
    };
    let store = &ctx.pipeline.store_in(obj.metadata.namespace.as_deref())?;
    ctx.redis_ready_after_failure(obj).await?;
    let owner = owner_id(obj);
    let holder = ctx.holder(obj);
    let listed = owned_runs(store, &asset, &owner).await?;
    crate::pipeline::drill::stop_before(asset.as_str(), "RETIRE");
    let mut removed = store.retire(&asset, &owner, &listed, &holder).await?;
    // A run acquired between the listing and the tombstone is listed now;
    // none can appear after it.
    let late = owned_runs(store, &asset, &owner).await?;
    if !late.is_empty() {
        removed += store.retire(&asset, &owner, &late, &holder).await?;
    }
    info!(object = %object_key(obj), removed, "runs retired");
    // Nothing kept per object may outlive it.
    ctx.forget_gone(obj);
    Ok(Action::await_change())
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
