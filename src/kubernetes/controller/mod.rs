//! The AssetScan controller: kube-runtime's `Controller` with a small
//! `Context`, `reconcile` and `error_policy`, a finalizer, and the ticket
//! mirrored into the status after every accepted transition.
//!
//! - `context`: what every reconcile shares, and the reconcile's error;
//! - `apply`: a reconcile of a live object: decide, run, settle (`outcome`:
//!   the table from the pipeline's outcome to the next action), or say why
//!   no run goes on (`halt`);
//! - `cleanup`: the finalizer's end of an object's runs;
//! - `mirror`: the pipeline's observer, composed of the status plan (`status_plan`,
//!   pure), the fenced status writer (`writer`), the report recorder
//!   (`report`) and the run's Events and metrics (`events`);
//! - `status`, `conditions`: the ticket → status mapping, and the conditions;
//! - `cache`: the watch cache, aware of this process's own writes;
//! - `gauges`: the status-derived gauges, computed from the cache at each
//!   scrape (scans by phase and verdict, the oldest unnotified high risk,
//!   the oldest overdue run);
//! - `request`: the object as the domain sees it: its run view (which run
//!   it is on, decided in the domain) and its scan request.
//! - `starts`, `spread`: no storms: the per-replica bound on runs started
//!   per second, and rescans spread over their interval.

mod apply;
mod cache;
mod channels;
mod cleanup;
mod conditions;
mod context;
mod events;
mod gauges;
mod halt;
mod members;
mod mirror;
mod notify_wait;
mod outcome;
mod report;
mod request;
mod shard;
mod share;
mod spread;
mod starts;
mod status;
mod status_plan;
mod writer;

pub use cache::DELIVERY_WAIT;
pub use conditions::ConditionType;
pub use context::{Context, ControllerSettings, Error};
pub use gauges::{Waiting, install as install_status_gauges};
pub use members::Members;
pub use mirror::StatusMirror;
pub use request::{owner_id, run_id, run_view};
pub use spread::rescan_after;
pub use status::status_from_ticket;
pub use status_plan::merge_patch;
pub use writer::FIELD_MANAGER;

use apply::apply;
use cleanup::cleanup;
use context::object_key;
use events::RunEvents;

use crate::backoff::Backoff;
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::Effects;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use rand::RngExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// Finalizer that releases locks and deletes tickets before the object goes.
pub const FINALIZER: &str = "assetscan.io/tickets";

/// Runs the controller until `shutdown` fires; in-flight runs then stop and
/// release their locks before this returns.
///
/// Two controllers share the context: the main one, on the objects of this
/// replica's buckets, cached; and a small one on the objects no bucket
/// selects, which labels new objects and scans those whose label is not a
/// bucket ([`shard`]).
pub async fn run<E: Effects + 'static>(ctx: Arc<Context<E>>) {
    let api: Api<AssetScan> = match &ctx.settings.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    if let Err(err) = api.list(&ListParams::default().limit(1)).await {
        warn!(error = %err, "cannot list AssetScans: is the CRD installed (assetscan-operator crd | kubectl apply -f -)?");
    }
    // Who is live before the first reconcile: each replica then prefers
    // its share from the start.
    ctx.members.beat(&ctx.pipeline).await;
    let owned = watcher::Config::default()
        .any_semantic()
        .labels(&shard::owned_selector(ctx.settings.shard));
    let held = ctx.metrics.sharding.watched_objects.clone();
    let Some(objects) = ctx.cache().watch(api.clone(), owned, held) else {
        warn!("the controller of this context runs already");
        return;
    };
    let config = controller::Config::default().concurrency(ctx.settings.concurrency);
    let main = Controller::for_stream(objects, ctx.cache().store())
        .with_config(config.clone())
        .reconcile_all_on(ctx.members.left())
        .graceful_shutdown_on(shutdown_of(&ctx))
        .run(reconcile, error_policy, ctx.clone())
        .for_each(log_failure);
    let unplaced = watcher::Config::default()
        .any_semantic()
        .labels(&shard::unplaced_selector());
    let (unplaced_store, unplaced_objects) =
        cache::unplaced_watch(api, unplaced, ctx.settings.shard);
    let placing = Controller::for_stream(unplaced_objects, unplaced_store)
        .with_config(config)
        .reconcile_all_on(ctx.members.left())
        .graceful_shutdown_on(shutdown_of(&ctx))
        .run(shard::place, error_policy, ctx.clone())
        .for_each(log_failure);
    futures::join!(
        main,
        placing,
        ctx.members.keep(&ctx.pipeline, &ctx.shutdown)
    );
}

fn shutdown_of<E>(ctx: &Context<E>) -> impl Future<Output = ()> + Send + 'static {
    let shutdown = ctx.shutdown.clone();
    async move { shutdown.cancelled().await }
}

async fn log_failure<T, E: std::fmt::Display>(result: Result<T, E>) {
    if let Err(err) = result {
        warn!(error = %err, "reconcile failed");
    }
}

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
    if !ctx.settings.shard.owns(shard::Placement::of(&obj).bucket()) {
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
