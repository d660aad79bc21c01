//! What every reconcile shares: the client, the pipeline, the Event
//! recorder, the metrics and the settings, and what the controller keeps
//! per object between reconciles (its consecutive failures, and the watch
//! cache that knows this process's own status writes); and the reconcile's
//! error.

use super::channels::ChannelGate;
use super::exceptions::ExceptionGate;
use crate::kubernetes::channel_access::{ChannelPolicy, ClusterOpenings, ObjectChannels};
use crate::kubernetes::controller::cache::WatchCache;
use crate::kubernetes::controller::fleet::members::Members;
use crate::kubernetes::controller::fleet::object_key;
use crate::kubernetes::controller::fleet::starts::StartGate;
use crate::kubernetes::controller::fleet::waiting::Waiting;
use crate::kubernetes::controller::settings::{
    EventsSection, ReportsSection, ScanStartsSection, TeamChannelsSection,
};
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::{Effects, Pipeline};
use crate::ports::{StoreDoors, StoreFailure};
use crate::providers::egress::{EgressConfig, EgressPolicy};
use crate::providers::{ProviderConfigError, Providers};
use crate::telemetry::Metrics;
use assetscan_domain::shard::Shard;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use rand::RngExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Controller settings (flags of `run`).
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// Reconciles in flight at once.
    pub concurrency: u16,
    /// This replica's share of the buckets (see the `fleet::shard` module).
    pub shard: Shard,
    /// Watch one namespace instead of all.
    pub namespace: Option<String>,
    /// This replica's id (pod name), the prefix of its lock holder ids.
    pub instance: String,
    /// See [`crate::kubernetes::controller::settings::StatusSection::progress_every`].
    pub progress_every: Duration,
    /// The start bound and the rescan spread ([`ScanStartsSection`]).
    pub scan_starts: ScanStartsSection,
    /// The bound on a report's size ([`ReportsSection`]).
    pub reports: ReportsSection,
    /// Which runs get an Event at their end ([`EventsSection`]).
    pub events: EventsSection,
    /// Which namespaces may use which channel (`channelAccess`).
    pub channels: ChannelPolicy,
    /// The channels teams define, when watched (`teamChannels.enabled`).
    pub team_channels: Option<TeamChannelSettings>,
}

/// Where the channel objects go and what they pass: the providers'
/// registry, which runs read, and the cluster channels' openings, which
/// the channel check reads; the online check's egress policy, which the
/// teams' destinations pass; the section's settings.
#[derive(Clone, Debug)]
pub struct TeamChannelSettings {
    pub objects: ObjectChannels,
    pub egress: Arc<EgressPolicy>,
    pub section: TeamChannelsSection,
}

impl TeamChannelSettings {
    /// The channel objects of `providers`, the teams' destinations passing
    /// `egress` (the online check's), when `section` enables them.
    pub fn new(
        section: &TeamChannelsSection,
        providers: &Providers,
        egress: &EgressConfig,
    ) -> Result<Option<TeamChannelSettings>, ProviderConfigError> {
        if !section.enabled {
            return Ok(None);
        }
        Ok(Some(TeamChannelSettings {
            objects: ObjectChannels {
                channels: providers.channel_objects.clone(),
                openings: Arc::new(ClusterOpenings::default()),
            },
            egress: Arc::new(EgressPolicy::new(egress)?),
            section: section.clone(),
        }))
    }
}

/// What every reconcile shares.
pub struct Context<E> {
    pub client: Client,
    /// Starts and resumes runs.
    pub pipeline: Pipeline<E>,
    /// What else the controller asks of the runs' store: the membership,
    /// a ticket read, whether it answers.
    pub store: StoreDoors,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub settings: ControllerSettings,
    /// Fires on shutdown: runs in flight stop and release their locks.
    pub shutdown: CancellationToken,
    /// Consecutive failures per object, for `error_policy`'s backoff and
    /// its Events.
    failures: Mutex<HashMap<String, Streak>>,
    /// The objects whose run this replica could not start, for the overdue
    /// gauge.
    pub(crate) waiting: Arc<Waiting>,
    /// The invalid shard label reported per object, so that it is reported
    /// once, not at every reconcile.
    invalid_labels: Mutex<HashMap<String, String>>,
    /// The watch's store, and this process's status writes it has not
    /// delivered yet.
    cache: WatchCache,
    /// The bound on runs started per second, which every reconcile about to
    /// claim or continue a run passes.
    pub(crate) starts: StartGate,
    /// The same bound on labelling new objects, which the reconcile of the
    /// unlabelled objects passes: a label leads to a run's start, and
    /// labels written in creation order would queue one namespace's few new
    /// objects behind another's mass creation.
    pub(crate) label_gate: StartGate,
    /// The channel policy, and the namespace labels it reads.
    pub(super) channels: ChannelGate,
    /// The namespaces' FindingExceptions, for each run's triage.
    pub(super) exceptions: ExceptionGate,
    /// The live replicas, as this one last heard of them.
    pub(crate) members: Arc<Members>,
    /// `<instance>#<random>`: lock holder ids are unique to this process, so
    /// a replacement with the same pod name can never re-enter a lock that a
    /// still-running old process holds.
    holder_prefix: String,
}

impl<E> Context<E> {
    pub fn new(
        client: Client,
        pipeline: Pipeline<E>,
        store: StoreDoors,
        metrics: Arc<Metrics>,
        settings: ControllerSettings,
        shutdown: CancellationToken,
    ) -> Context<E> {
        let cache = WatchCache::default();
        let waiting = Arc::new(Waiting::default());
        let holder_prefix = format!("{}#{:08x}", settings.instance, rand::rng().random::<u32>());
        let members = Arc::new(Members::new(
            settings.shard,
            holder_prefix.clone(),
            settings.scan_starts.membership_ttl,
            metrics.starts.members.clone(),
        ));
        let reporter = Reporter {
            controller: "assetscan-operator".into(),
            instance: Some(settings.instance.clone()),
        };
        Context {
            recorder: Recorder::new(client.clone(), reporter),
            starts: StartGate::new(&settings.scan_starts, &metrics.starts.runs),
            label_gate: StartGate::new(&settings.scan_starts, &metrics.starts.labels),
            channels: ChannelGate::new(
                settings.channels.clone(),
                settings.team_channels.as_ref().map(|t| t.objects.clone()),
                client.clone(),
            ),
            exceptions: ExceptionGate::new(client.clone()),
            client,
            pipeline,
            store,
            metrics,
            holder_prefix,
            members,
            settings,
            shutdown,
            failures: Mutex::new(HashMap::new()),
            invalid_labels: Mutex::new(HashMap::new()),
            waiting,
            cache,
        }
    }

    pub(crate) fn cache(&self) -> &WatchCache {
        &self.cache
    }

    /// The objects of the watch cache, as trimmed: what this replica holds
    /// in memory per AssetScan.
    pub fn cached(&self) -> Vec<Arc<AssetScan>> {
        self.cache.store().state()
    }

    /// The lock holder id of this process for `obj`. Stable per process and
    /// object: a reconcile of the same object in the same process may
    /// re-enter its own lock after an error.
    pub(super) fn holder(&self, obj: &AssetScan) -> String {
        format!("{}:{}", self.holder_prefix, object_key(obj))
    }

    /// Counts a failed reconcile of `obj` for `reason`; returns how many
    /// in a row, and whether `reason` is new to the streak (its first
    /// failure, or another reason than the last one).
    pub(super) fn failed(&self, obj: &AssetScan, reason: &'static str) -> (u32, bool) {
        let mut failures = self.failures();
        let streak = failures.entry(object_key(obj)).or_insert(Streak {
            count: 0,
            reason: "",
        });
        streak.count = streak.count.saturating_add(1);
        let new = std::mem::replace(&mut streak.reason, reason) != reason;
        (streak.count, new)
    }

    /// Forgets the failures of `obj`: it reconciled, or it is gone (nothing
    /// kept per object may outlive it).
    pub(super) fn forget(&self, obj: &AssetScan) {
        self.failures().remove(&object_key(obj));
    }

    /// Whether `value` is a new invalid shard label of the object `key`
    /// (then it is remembered, and reported by the caller).
    pub(super) fn first_invalid_label(&self, key: &str, value: &str) -> bool {
        let mut reported = self
            .invalid_labels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if reported.get(key).is_some_and(|v| v == value) {
            return false;
        }
        reported.insert(key.to_owned(), value.to_owned());
        true
    }

    /// Forgets everything kept of `obj`: it is gone.
    pub(super) fn forget_gone(&self, obj: &AssetScan) {
        self.forget(obj);
        self.waiting.cleared(obj);
        let mut reported = self
            .invalid_labels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        reported.remove(&object_key(obj));
    }

    fn failures(&self) -> MutexGuard<'_, HashMap<String, Streak>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<E: Effects> Context<E> {
    /// After a failed reconcile of `obj`, checks that Redis answers, on a
    /// live connection ([`crate::ports::Tickets::ready`]): a retry after a
    /// failure first pings, twice if need be, rather than losing the
    /// attempt (and another backoff period) to a stale connection.
    pub(super) async fn redis_ready_after_failure(
        &self,
        obj: &AssetScan,
    ) -> Result<(), StoreFailure> {
        if !self.failures().contains_key(&object_key(obj)) {
            return Ok(());
        }
        self.store.tickets.ready().await
    }
}

/// An object's consecutive failed reconciles, and the last one's reason.
struct Streak {
    count: u32,
    reason: &'static str,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("ticket store: {0}")]
    Store(#[from] StoreFailure),
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
