//! The finalizer's cleanup: an object being deleted ends its runs for good.

use super::context::{Context, Error};
use super::request::owner_id;
use crate::kubernetes::controller::fleet::object_key;
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::Effects;
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
    ctx.redis_ready_after_failure(obj).await?;
    let namespace = obj.metadata.namespace.as_deref();
    let owner = owner_id(obj);
    let removed = (ctx.pipeline)
        .retire_owner(namespace, &asset, &owner, &ctx.holder(obj))
        .await?;
    info!(object = %object_key(obj), removed, "runs retired");
    // Nothing kept per object may outlive it.
    ctx.forget_gone(obj);
    Ok(Action::await_change())
}
