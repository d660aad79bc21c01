//! The reconcile: one object at a time, from its newest copy to the
//! pipeline and back, and what a failed one waits before the next.

mod apply;
mod channels;
mod cleanup;
pub(super) mod context;
mod deferral;
mod exceptions;
mod notify_wait;
mod outcome;
mod place;
pub(super) mod request;
mod share;

pub use place::place;

use crate::backoff::Backoff;
use crate::kubernetes::controller::fleet::object_key;
use crate::kubernetes::controller::fleet::shard::Placement;
use crate::kubernetes::controller::status::events::RunEvents;
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::Effects;
use apply::apply;
use cleanup::cleanup;
use context::{Context, Error};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use rand::RngExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// Finalizer that releases locks and deletes tickets before the object goes.
pub const FINALIZER: &str = "assetscan.io/tickets";

/// Reconciles `obj`, timed (`assetscan_reconcile_duration_seconds`).
pub async fn reconcile<E: Effects + 'static>(
    obj: Arc<AssetScan>,
    ctx: Arc<Context<E>>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_object(obj, &ctx).await;
    ctx.metrics
        .promise
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    result
}

async fn reconcile_object<E: Effects + 'static>(
    obj: Arc<AssetScan>,
    ctx: &Arc<Context<E>>,
) -> Result<Action, Error> {
    if !ctx.settings.shard.owns(Placement::of(&obj).bucket()) {
        // Another replica's bucket (a label changed since the watch sent it).
        return Ok(Action::await_change());
    }
    if let Some(later) = share::defer(&obj, ctx) {
        return Ok(later);
    }
    let api: Api<AssetScan> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let result = finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Finalizer::Apply(obj) => apply(&obj, ctx, &api).await,
            Finalizer::Cleanup(obj) => cleanup(&obj, ctx).await,
        }
    })
    .await;
    use kube::runtime::finalizer::Error as FinalizerError;
    match result {
        Ok(action) => Ok(action),
        Err(FinalizerError::ApplyFailed(inner) | FinalizerError::CleanupFailed(inner)) => {
            Err(inner)
        }
        Err(
            FinalizerError::AddFinalizer(kube::Error::Api(e))
            | FinalizerError::RemoveFinalizer(kube::Error::Api(e)),
        ) if is_finalizer_race(e.code) => {
            // Another replica added or removed the finalizer between our
            // read and our patch: its reconcile did the work. Not a failure;
            // look again shortly, from the watch's newer copy.
            ctx.metrics.finalizer_races.inc();
            debug!(
                code = e.code,
                "finalizer patch lost a race with another replica"
            );
            Ok(Action::requeue(Duration::from_millis(
                rand::rng().random_range(100..1000),
            )))
        }
        Err(other) => Err(Error::Finalizer(Box::new(other))),
    }
}

/// The answers of a finalizer patch that another replica's patch raced:
/// 422 (the `test` of the JSON patch no longer holds: the list changed), 409
/// (its resourceVersion moved) and 404 (the object went with the last
/// finalizer removed).
fn is_finalizer_race(code: u16) -> bool {
    matches!(code, 404 | 409 | 422)
}

/// Requeue after a failed reconcile: 1 s, doubling with each consecutive
/// failure of the object, up to 2 minutes.
const RECONCILE_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(120));

/// The same while Redis is unavailable, but up to 15 s: Redis outages end,
/// and an attempt while Redis is down costs one refused round trip, so
/// objects resume within seconds once it is back.
const REDIS_DOWN_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(15));

/// Backoff per object, reset by the next successful reconcile. The first
/// failure of a streak, and each change of its reason, is also said on the
/// object as a Warning Event (`ReconcileFailed`): one per streak and
/// reason, however long the streak, so an outage costs the API server one
/// Event per object.
pub fn error_policy<E: Effects + 'static>(
    obj: Arc<AssetScan>,
    err: &Error,
    ctx: Arc<Context<E>>,
) -> Action {
    let reason = err.reason();
    ctx.metrics.failed(reason);
    let (failures, new_reason) = ctx.failed(&obj, reason);
    if new_reason {
        let message = err.to_string();
        let (obj, ctx) = (obj.clone(), ctx.clone());
        tokio::spawn(async move {
            RunEvents::new(&obj, &ctx.recorder, &ctx.metrics)
                .reconcile_failed(reason, &message)
                .await;
        });
    }
    let backoff = match err {
        Error::Store(e) if e.is_unavailable() => REDIS_DOWN_BACKOFF,
        _ => RECONCILE_BACKOFF,
    };
    let delay = backoff.after(failures);
    warn!(object = %object_key(&obj), error = %err, failures, retry_in = ?delay, "reconcile error");
    Action::requeue(delay)
}
