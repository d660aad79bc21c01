//! The AssetScan controller: kube-runtime's `Controller` with a small
//! `Context`, `reconcile` and `error_policy`, a finalizer, and the ticket
//! mirrored into the status after every accepted transition.

mod cache;
mod conditions;
mod mirror;
mod report;
mod request;
mod status;

pub use conditions::ConditionType;
pub use mirror::{FIELD_MANAGER, StatusMirror, merge_patch};
pub use request::{owner_id, run_id, run_view};
pub use status::status_from_ticket;

use assetscan_domain::RunDecision;
use cache::{Latest, WatchCache};
use conditions::{ConditionBuilder, ConditionStatus};
use request::{rescan_interval, scan_request};

use crate::backoff::Backoff;
use crate::crd::{AssetScan, AssetScanStatus};
use crate::pipeline::{Effects, Outcome, Pipeline};
use crate::store::StoreError;
use crate::telemetry::Metrics;
use assetscan_domain::AssetId;
use assetscan_domain::ScanRequest;
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Client, Resource, ResourceExt};
use rand::RngExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Finalizer that releases locks and deletes tickets before the object goes.
pub const FINALIZER: &str = "assetscan.io/tickets";

/// Controller settings (flags of `run`).
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// Reconciles in flight at once.
    pub concurrency: u16,
    /// `(index, count)`: only assets whose id hashes to `index` are handled.
    pub shard: Option<(u32, u32)>,
    /// Watch one namespace instead of all.
    pub namespace: Option<String>,
    /// This replica's id (pod name), the prefix of its lock holder ids.
    pub instance: String,
    /// See [`crate::config::StatusSection::progress_every`].
    pub progress_every: Duration,
}

/// What every reconcile shares.
pub struct Context<E> {
    pub client: Client,
    pub pipeline: Pipeline<E>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub settings: ControllerSettings,
    /// Fires on shutdown: runs in flight stop and release their locks.
    pub shutdown: CancellationToken,
    /// Consecutive failures per object, for `error_policy`'s backoff.
    failures: Mutex<HashMap<String, u32>>,
    /// The watch's store, and this process's status writes it has not
    /// delivered yet.
    cache: WatchCache,
    /// `<instance>#<random>`: lock holder ids are unique to this process, so
    /// a replacement with the same pod name can never re-enter a lock that a
    /// still-running old process holds.
    holder_prefix: String,
}

impl<E> Context<E> {
    pub fn new(
        client: Client,
        pipeline: Pipeline<E>,
        metrics: Arc<Metrics>,
        settings: ControllerSettings,
        shutdown: CancellationToken,
    ) -> Context<E> {
        let reporter = Reporter {
            controller: "assetscan-operator".into(),
            instance: Some(settings.instance.clone()),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            pipeline,
            metrics,
            holder_prefix: format!("{}#{:08x}", settings.instance, rand::rng().random::<u32>()),
            settings,
            shutdown,
            failures: Mutex::new(HashMap::new()),
            cache: WatchCache::default(),
        }
    }

    fn failures(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ticket store: {0}")]
    Store(#[from] StoreError),
    #[error("kubernetes api: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl Error {
    /// Stable reason, for metrics and the `Stalled` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Store(e) => e.reason(),
            Error::Kube(_) => "KubernetesApi",
            Error::Finalizer(_) => "Finalizer",
        }
    }
}

/// Runs the controller until `shutdown` fires; in-flight runs then stop and
/// release their locks before this returns.
pub async fn run<E: Effects + 'static>(ctx: Arc<Context<E>>) {
    let api: Api<AssetScan> = match &ctx.settings.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    if let Err(err) = api.list(&ListParams::default().limit(1)).await {
        warn!(error = %err, "cannot list AssetScans: is the CRD installed (assetscan-operator crd | kubectl apply -f -)?");
    }
    let shutdown = ctx.shutdown.clone();
    let config = kube::runtime::controller::Config::default().concurrency(ctx.settings.concurrency);
    let Some(objects) = ctx.cache.watch(api) else {
        warn!("the controller of this context runs already");
        return;
    };
    Controller::for_stream(objects, ctx.cache.store())
        .with_config(config)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                warn!(error = %err, "reconcile failed");
            }
        })
        .await;
}

fn object_key(obj: &AssetScan) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Whether this replica's shard owns the asset.
fn in_shard(settings: &ControllerSettings, asset: &str) -> bool {
    match settings.shard {
        Some((index, count)) if count > 1 => {
            // FNV-1a: stable across processes and versions, unlike std's hasher.
            let hash = asset.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            hash % u64::from(count) == u64::from(index)
        }
        _ => true,
    }
}

pub async fn reconcile<E: Effects + 'static>(
    obj: Arc<AssetScan>,
    ctx: Arc<Context<E>>,
) -> Result<Action, Error> {
    if !in_shard(&ctx.settings, &obj.spec.asset_id) {
        return Ok(Action::await_change());
    }
    let api: Api<AssetScan> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let result = finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            Finalizer::Apply(obj) => apply(&obj, &ctx, &api).await,
            Finalizer::Cleanup(obj) => cleanup(&obj, &ctx).await,
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

async fn apply<E: Effects + 'static>(
    cached: &AssetScan,
    ctx: &Context<E>,
    api: &Api<AssetScan>,
) -> Result<Action, Error> {
    // Decide from the newest cached copy, unless it misses a status write
    // of this process: then the delivery of that write triggers the next
    // reconcile. A decision to wait or to stay suspended is taken from the
    // cache alone: its writes are conditional on the copy's resourceVersion,
    // so a copy that misses another replica's write costs a refused write,
    // never a wrong status.
    let (fresh, read) = match ctx.cache.latest(cached) {
        Latest::Cached(obj) => (Some(obj), false),
        Latest::Behind => {
            ctx.metrics.reconciled("cache_behind");
            return Ok(Action::requeue(cache::DELIVERY_WAIT));
        }
        Latest::Unknown => (read_stored(cached, ctx, api).await?, true),
    };
    let Some(mut fresh) = fresh else {
        return Ok(Action::await_change());
    };
    let mut decision = run_view(&fresh).decide(Timestamp::now());
    if !read
        && matches!(
            decision,
            RunDecision::Run(_) | RunDecision::UnlessEarlierAlerts { .. }
        )
    {
        // A run is about to be claimed in Redis: decide again from the
        // object as stored. After Redis lost its data, the stored status is
        // the only record that a run ended or that the object is gone, and
        // a cached copy older than it would claim that run again (or
        // recreate a deleted object's ticket). One GET per run started.
        let Some(stored) = read_stored(cached, ctx, api).await? else {
            return Ok(Action::await_change());
        };
        fresh = stored;
        decision = run_view(&fresh).decide(Timestamp::now());
    }
    if fresh.meta().deletion_timestamp.is_some() {
        // The finalizer's cleanup runs on the next reconcile.
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    let obj = fresh.as_ref();
    let key = object_key(obj);
    let rescan = rescan_interval(&obj.spec);
    let mirror = StatusMirror::new(api.clone(), obj, &ctx.recorder, &ctx.metrics, rescan)
        .progress_every(ctx.settings.progress_every)
        .remembered_in(&ctx.cache);
    let (run, supersedes) = match decision {
        RunDecision::Run(run) => (run, None),
        RunDecision::UnlessEarlierAlerts { earlier, next } => (next, Some(earlier)),
        RunDecision::Wait(delay) => {
            ctx.metrics.reconciled("up_to_date");
            ctx.failures().remove(&key);
            if let Err(err) = write_missing_report(obj, ctx.pipeline.store(), &mirror).await {
                let err = Error::Store(err);
                stall(obj, &mirror, &err).await;
                return Err(err);
            }
            return Ok(delay.map_or_else(Action::await_change, Action::requeue));
        }
        RunDecision::Suspended => {
            ctx.metrics.reconciled("suspended");
            ctx.failures().remove(&key);
            // Say that this generation was seen, and why nothing runs.
            let mut status = mirror.current().unwrap_or_default();
            status.observed_generation = obj.metadata.generation;
            ConditionBuilder::new(obj.metadata.generation, Timestamp::now()).set(
                &mut status.conditions,
                ConditionType::Reconciling,
                ConditionStatus::False,
                "Suspended",
                "spec.suspend is true: no new run starts",
            );
            mirror.write(status).await;
            return Ok(Action::await_change());
        }
    };
    // Stable per process and object: a reconcile of the same object in the
    // same process may re-enter its own lock after an error.
    let holder = format!("{}:{}", ctx.holder_prefix, key);
    let mut request = match scan_request(obj, &run, holder) {
        Ok(request) => ScanRequest {
            supersedes,
            ..request
        },
        Err(err) => {
            let mut status = mirror.current().unwrap_or_default();
            ConditionBuilder::new(obj.metadata.generation, Timestamp::now()).set(
                &mut status.conditions,
                ConditionType::Stalled,
                ConditionStatus::True,
                "InvalidSpec",
                &err.to_string(),
            );
            mirror.write(status).await;
            return Ok(Action::await_change());
        }
    };
    if ctx.failures().contains_key(&key)
        && let Err(err) = redis_ready(ctx.pipeline.store()).await
    {
        let err = Error::Store(err);
        stall(obj, &mirror, &err).await;
        return Err(err);
    }
    let mut outcome = ctx.pipeline.run(&request, &mirror, &ctx.shutdown).await;
    if let Ok(Outcome::EarlierRunAlerting) = outcome
        && let Some(earlier) = request.supersedes.take()
    {
        // The earlier generation's run confirmed a risk the status may not
        // show yet (the executor that found it may have died before
        // mirroring it): it notifies before the new run starts.
        request.run = earlier;
        outcome = ctx.pipeline.run(&request, &mirror, &ctx.shutdown).await;
    }
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => {
            let err = Error::Store(err);
            stall(obj, &mirror, &err).await;
            return Err(err);
        }
    };
    ctx.failures().remove(&key);
    let jitter = || Duration::from_millis(rand::rng().random_range(100..1000));
    Ok(match outcome {
        Outcome::Terminal(ticket) => {
            ctx.metrics.reconciled(
                if ticket.status == assetscan_domain::ticket::Status::Failed {
                    "failed"
                } else {
                    "finished"
                },
            );
            // Mirror in case an earlier status write was lost.
            crate::pipeline::Observer::on_ticket(&mirror, &ticket).await;
            match rescan {
                Some(every) => Action::requeue(every),
                None => Action::await_change(),
            }
        }
        Outcome::Locked {
            holder,
            retry_after,
        } => {
            ctx.metrics.lock_contention.inc();
            ctx.metrics.reconciled("locked");
            info!(object = %key, %holder, "asset locked by another executor");
            Action::requeue(retry_after + jitter())
        }
        Outcome::Superseded { caller, valid } => {
            ctx.metrics.stale_writes_rejected.inc();
            ctx.metrics.reconciled("superseded");
            mirror
                .publish(
                    EventType::Warning,
                    "StaleWriteRejected",
                    "Scan",
                    format!("write with token {caller} rejected: token {valid} owns the run; this executor stopped"),
                )
                .await;
            Action::requeue(jitter())
        }
        Outcome::Deferred {
            retry_after,
            ticket,
        } => {
            // Waiting for a channel: the status says so (NOTIFYING, and
            // the channel's error), whatever the progress interval skipped.
            mirror.mirror(&ticket).await;
            ctx.metrics.reconciled("notify_deferred");
            Action::requeue(retry_after + jitter())
        }
        Outcome::LockLost(_) => {
            ctx.metrics.reconciled("lock_lost");
            Action::requeue(jitter())
        }
        Outcome::EarlierRunAlerting => {
            // Only a request that supersedes a run is refused so, and the
            // one above was retried without; look again from a fresh read.
            ctx.metrics.reconciled("earlier_run_alerting");
            Action::requeue(jitter())
        }
        Outcome::Retired => {
            // The object was deleted after it was read: its cleanup retired
            // the run. The next reconcile finds the object gone.
            ctx.metrics.reconciled("retired");
            Action::requeue(jitter())
        }
        Outcome::ClaimUnrecorded(_) => {
            // Refused by the status fence (this object changed under us) or
            // the API is failing: look again shortly, from a fresh read.
            ctx.metrics.reconciled("claim_unrecorded");
            Action::requeue(Duration::from_secs(1) + jitter())
        }
        Outcome::Stopped(ticket) => {
            mirror.mirror(&ticket).await;
            ctx.metrics.reconciled("stopped");
            Action::await_change()
        }
    })
}

/// The object as stored now (a GET); `None` once it is gone, and then
/// nothing of it is kept.
async fn read_stored<E: Effects + 'static>(
    cached: &AssetScan,
    ctx: &Context<E>,
    api: &Api<AssetScan>,
) -> Result<Option<Arc<AssetScan>>, Error> {
    match api.get(&cached.name_any()).await {
        Ok(stored) => Ok(Some(Arc::new(stored))),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            ctx.failures().remove(&object_key(cached));
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

/// The run the status shows ended has no report named in the status (its
/// write failed, or the status write that named it was lost): mirror the
/// run's ticket again, which writes the report and names it. One read of
/// the ticket, only then; a ticket Redis no longer has cannot be reported.
async fn write_missing_report(
    obj: &AssetScan,
    store: &crate::store::TicketStore,
    mirror: &StatusMirror<'_>,
) -> Result<(), StoreError> {
    let Some(status) = obj.status.as_ref() else {
        return Ok(());
    };
    let (Some(run), Some(phase)) = (status.run.as_deref(), status.phase) else {
        return Ok(());
    };
    if !phase.is_terminal()
        || status.latest_report.as_deref() == Some(&report::report_name(obj, run))
    {
        return Ok(());
    }
    let Ok(asset) = AssetId::new(obj.spec.asset_id.clone()) else {
        return Ok(());
    };
    match store.get_ticket(&asset, run).await? {
        Some(ticket) if ticket.status.is_terminal() => {
            crate::pipeline::Observer::on_ticket(mirror, &ticket).await;
        }
        _ => debug!(run, "no ticket left to report the run from"),
    }
    Ok(())
}

/// Checks that Redis answers, on a live connection. After Redis failed, the
/// connection is re-established lazily: the first command after Redis is
/// back still fails with the old error (and only then starts the reconnect),
/// so a retry after a failure first pings, twice if need be, rather than
/// losing the attempt (and another backoff period) to a stale connection.
async fn redis_ready(store: &crate::store::TicketStore) -> Result<(), StoreError> {
    match store.ping().await {
        Ok(()) => Ok(()),
        Err(err) if err.is_unavailable() => store.ping().await,
        Err(err) => Err(err),
    }
}

/// Reports an infrastructure failure on the object: `Stalled=True`,
/// `Ready=False`, with the reason and the error's text (never a secret: store
/// and API errors carry no credentials).
async fn stall(obj: &AssetScan, mirror: &StatusMirror<'_>, err: &Error) {
    // On top of what this run last wrote, not of the object as it was read
    // at the start: that status is older, and writing it back would go
    // behind the fence (and be refused).
    let mut status: AssetScanStatus = mirror.current().unwrap_or_default();
    let message = err.to_string();
    let conditions = ConditionBuilder::new(obj.metadata.generation, Timestamp::now());
    for (type_, value) in [
        (ConditionType::Stalled, ConditionStatus::True),
        (ConditionType::Ready, ConditionStatus::False),
    ] {
        conditions.set(&mut status.conditions, type_, value, err.reason(), &message);
    }
    mirror.write(status).await;
}

/// Ends the object's runs for good (runs whose id carries its owner id):
/// `retire` leaves the owner's tombstone, fails each run still in progress
/// under a fresh token and removes the tickets, creating nothing. An
/// executor still driving a run (on another replica, or paused) finds its
/// ticket gone at its next write; one that read the object before the
/// deletion and acquires later is refused. Two replicas may clean up the
/// same object at once: retiring is idempotent.
async fn cleanup<E: Effects + 'static>(obj: &AssetScan, ctx: &Context<E>) -> Result<Action, Error> {
    let Ok(asset) = AssetId::new(obj.spec.asset_id.clone()) else {
        return Ok(Action::await_change());
    };
    let store = ctx.pipeline.store();
    if ctx.failures().contains_key(&object_key(obj)) {
        redis_ready(store).await?;
    }
    let owner = owner_id(obj);
    let holder = format!("{}:{}", ctx.holder_prefix, object_key(obj));
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
    ctx.failures().remove(&object_key(obj));
    Ok(Action::await_change())
}

/// The runs of `owner` that have a ticket.
async fn owned_runs(
    store: &crate::store::TicketStore,
    asset: &AssetId,
    owner: &str,
) -> Result<Vec<String>, StoreError> {
    let prefix = format!("{owner}-");
    let mut runs = store.runs(asset).await?;
    runs.retain(|run| run.starts_with(&prefix));
    Ok(runs)
}

/// Requeue after a failed reconcile: 1 s, doubling with each consecutive
/// failure of the object, up to 2 minutes.
const RECONCILE_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(120));

/// The same while Redis is unavailable, but up to 15 s: Redis outages end,
/// and an attempt while Redis is down costs one refused round trip, so
/// objects resume within seconds once it is back.
const REDIS_DOWN_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(15));

/// Backoff per object, reset by the next successful reconcile.
pub fn error_policy<E: Effects + 'static>(
    obj: Arc<AssetScan>,
    err: &Error,
    ctx: Arc<Context<E>>,
) -> Action {
    ctx.metrics.failed(err.reason());
    let failures = {
        let mut map = ctx.failures();
        let n = map.entry(object_key(&obj)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    };
    let backoff = match err {
        Error::Store(e) if e.is_unavailable() => REDIS_DOWN_BACKOFF,
        _ => RECONCILE_BACKOFF,
    };
    let delay = backoff.after(failures);
    warn!(object = %object_key(&obj), error = %err, failures, retry_in = ?delay, "reconcile error");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_assets_and_cover_them_all() {
        let settings = |shard| ControllerSettings {
            concurrency: 1,
            shard,
            namespace: None,
            instance: "i".into(),
            progress_every: Duration::ZERO,
        };
        let mut owners = vec![0; 3];
        for n in 0..300 {
            let asset = format!("asset-{n}");
            let mine: Vec<u32> = (0..3)
                .filter(|i| in_shard(&settings(Some((*i, 3))), &asset))
                .collect();
            assert_eq!(mine.len(), 1, "{asset} owned by {mine:?}");
            owners[mine[0] as usize] += 1;
            assert!(in_shard(&settings(None), &asset));
        }
        assert!(owners.iter().all(|n| *n > 50), "{owners:?}");
    }
}
