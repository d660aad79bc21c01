//! The AssetScan controller: kube-runtime's `Controller` with a small
//! `Context`, `reconcile` and `error_policy`, a finalizer, and the ticket
//! mirrored into the status after every accepted transition. Three rooms,
//! each importing only the ones below it: `reconcile` (the loop and the
//! decision), `status` (the fenced status mirror, the pipeline's observer)
//! and `fleet` (the replicas side by side); and beside `reconcile`, the
//! teams' channels (`channels`: the watch on NotificationChannels, which
//! writes their conditions as `status` writes an AssetScan's). What each
//! file holds is in the code map, docs/development.md ("The layout").
//!
//! `reconcile` uses `status` and `fleet`; `status` uses `fleet` (the shard
//! label it reports); `fleet` uses neither. The watch cache (`cache`) is
//! beside the rooms, where both of its readers find it: the reconcile
//! reads it, the status mirror remembers its writes in it. Beside them, `settings`: the controller's sections of the
//! configuration file, which the CLI reads and hands over; and `metrics`:
//! the gauges computed from the watch cache at each scrape, which [`run`]
//! installs (a context that never runs registers nothing).

mod cache;
mod channels;
mod fleet;
mod metrics;
mod reconcile;
pub mod settings;
mod status;

pub use cache::DELIVERY_WAIT;
pub use fleet::members::Members;
pub use fleet::spread::rescan_after;
pub use fleet::waiting::Waiting;
pub use metrics::install as install_status_gauges;
pub use reconcile::context::{Context, ControllerSettings, Error, TeamChannelSettings};
pub use reconcile::request::{owner_id, run_id, run_view};
pub use reconcile::{FINALIZER, error_policy, reconcile};
pub use status::conditions::ConditionType;
pub use status::from_ticket::status_from_ticket;
pub use status::mirror::StatusMirror;
pub use status::plan::merge_patch;
pub use status::writer::FIELD_MANAGER;

use crate::kubernetes::crd::AssetScan;
use crate::pipeline::Effects;
use channels::ChannelWatch;
use fleet::starts::StartGate;
use futures::{Stream, StreamExt};
use kube::api::{Api, ListParams};
use kube::runtime::controller::{self, Controller};
use kube::runtime::watcher;
use std::sync::Arc;
use tracing::warn;

/// Runs the controller until `shutdown` fires; in-flight runs then stop and
/// release their locks before this returns.
///
/// Two controllers share the context: the main one, on the objects of this
/// replica's buckets, cached; and a small one on the objects no bucket
/// selects, which labels new objects and scans those whose label is not a
/// bucket ([`fleet::shard`], [`reconcile::place`]).
pub async fn run<E: Effects + 'static>(ctx: Arc<Context<E>>) {
    let api: Api<AssetScan> = match &ctx.settings.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    if let Err(err) = api.list(&ListParams::default().limit(1)).await {
        warn!(error = %err, "cannot list AssetScans: is the CRD installed (assetscan-operator crd | kubectl apply -f -)?");
    }
    let team_channels = team_channels(&ctx).await;
    // Who is live before the first reconcile: each replica then prefers
    // its share from the start.
    ctx.members.beat(&*ctx.store.membership).await;
    let owned = watcher::Config::default()
        .any_semantic()
        .labels(&fleet::shard::owned_selector(ctx.settings.shard));
    let held = ctx.metrics.sharding.watched_objects.clone();
    let Some(objects) = ctx.cache().watch(api.clone(), owned, held) else {
        warn!("the controller of this context runs already");
        return;
    };
    metrics::install(
        &ctx.metrics,
        ctx.cache().store(),
        ctx.waiting.clone(),
        ctx.settings.shard,
        ctx.members.clone(),
    );
    let config = controller::Config::default().concurrency(ctx.settings.concurrency);
    let main = Controller::for_stream(objects, ctx.cache().store())
        .with_config(config.clone())
        .reconcile_all_on(rebooking(&ctx, |ctx| &ctx.starts))
        .graceful_shutdown_on(shutdown_of(&ctx))
        .run(reconcile, error_policy, ctx.clone())
        .for_each(log_failure);
    let unplaced = watcher::Config::default()
        .any_semantic()
        .labels(&fleet::shard::unplaced_selector());
    let (unplaced_store, unplaced_objects) =
        cache::unplaced_watch(api, unplaced, ctx.settings.shard);
    let placing = Controller::for_stream(unplaced_objects, unplaced_store)
        .with_config(config)
        .reconcile_all_on(rebooking(&ctx, |ctx| &ctx.label_gate))
        .graceful_shutdown_on(shutdown_of(&ctx))
        .run(reconcile::place, error_policy, ctx.clone())
        .for_each(log_failure);
    futures::join!(
        main,
        placing,
        ctx.members.keep(&*ctx.store.membership, &ctx.shutdown),
        team_channels,
    );
}

/// How long the first runs wait for the team channels to be listed: a run
/// naming its namespace's channel would otherwise find none and fail. A
/// watch that cannot list (the CRD not installed yet) is warned about by
/// the watch, and the runs start without it.
const TEAM_CHANNELS_LISTED: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts the watch on the team channels, when they are enabled, and waits
/// until it has listed them (or [`TEAM_CHANNELS_LISTED`]); the future
/// returned keeps it running until shutdown.
async fn team_channels<E>(ctx: &Context<E>) -> impl Future<Output = ()> + use<E> {
    let Some(settings) = ctx.settings.team_channels.clone() else {
        return futures::future::Either::Left(futures::future::ready(()));
    };
    let watch = ChannelWatch {
        client: ctx.client.clone(),
        objects: settings.objects,
        egress: settings.egress,
        namespace: ctx.settings.namespace.clone(),
        settings: settings.section,
    };
    let (listed, mut first_listing) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(watch.run(ctx.shutdown.clone(), listed));
    let waited = tokio::time::timeout(TEAM_CHANNELS_LISTED, first_listing.wait_for(|done| *done));
    if waited.await.is_err() {
        warn!("the team channels are not listed yet: runs start without them");
    }
    futures::future::Either::Right(async move {
        if let Err(err) = task.await {
            warn!(error = %err, "the team channels' watch ended");
        }
    })
}

/// The membership's changes, each of which first books the lines of
/// `gate` again: every object is about to be reconciled at once, and each
/// delayed one takes a new slot.
fn rebooking<E: Send + Sync + 'static>(
    ctx: &Arc<Context<E>>,
    gate: fn(&Context<E>) -> &StartGate,
) -> impl Stream<Item = ()> + Send + use<E> {
    let ctx = ctx.clone();
    ctx.members.changed().map(move |()| gate(&ctx).rebook())
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
