//! The channels defined as objects: a watch on the NotificationChannels
//! (of the watched namespace, or of all) and, when every namespace is
//! watched, one on the ClusterNotificationChannels. Each is built with the
//! Secret it names ([`build`]) into the providers' channel objects, where
//! a run finds it (its namespace's own first, then the cluster's); a
//! cluster channel's `access` goes to the openings the channel check reads;
//! its conditions are written (`Ready`, `Delivered`), and a Warning Event
//! when it cannot be used.
//!
//! Secrets are read by name, one `get` per channel, and never watched or
//! listed: the operator needs no more than `get` on Secrets. So every
//! channel is built again each `teamChannels.resyncInterval`: a Secret
//! created, fixed or rotated is taken within that, and the `Delivered`
//! condition follows the deliveries at that pace.

mod build;
mod resource;

use super::settings::TeamChannelsSection;
use super::status::conditions::{ConditionBuilder, ConditionStatus};
use super::status::writer::FIELD_MANAGER;
use crate::kubernetes::channel_access::{ObjectChannels, Opening};
use crate::kubernetes::crd::{
    ClusterNotificationChannel, NotificationChannel, NotificationChannelStatus,
};
use crate::providers::egress::EgressPolicy;
use crate::providers::notify::{ChannelKey, ChannelObject};
use build::{Built, Problem, build};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, watcher};
use resource::{ChannelResource, Scope};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The condition types of a channel object.
const READY: &str = "Ready";
const DELIVERED: &str = "Delivered";

/// What the watches need: where to put the channels they build, the
/// policy the teams' destinations pass, and the namespace watched if one
/// (then the cluster's channels are not watched: a Role cannot grant
/// cluster-scoped objects).
pub struct ChannelWatch {
    pub client: Client,
    pub objects: ObjectChannels,
    pub egress: Arc<EgressPolicy>,
    pub namespace: Option<String>,
    pub settings: TeamChannelsSection,
}

impl ChannelWatch {
    /// Keeps the channel objects current until `shutdown` fires; `listed`
    /// turns true once every one has been listed and built.
    pub async fn run(self, shutdown: CancellationToken, listed: watch::Sender<bool>) {
        let (teams_listed, mut teams) = watch::channel(false);
        let (cluster_listed, mut cluster) = watch::channel(self.namespace.is_some());
        let both = async {
            let teams = teams.wait_for(|done| *done).await.is_ok();
            let cluster = cluster.wait_for(|done| *done).await.is_ok();
            if teams && cluster {
                listed.send_replace(true);
            }
        };
        let cluster_watch = async {
            if self.namespace.is_none() {
                self.watch::<ClusterNotificationChannel>(&shutdown, cluster_listed)
                    .await;
            }
        };
        futures::join!(
            self.watch::<NotificationChannel>(&shutdown, teams_listed),
            cluster_watch,
            both,
        );
    }

    /// Keeps the channel objects of kind `K` current until `shutdown`.
    async fn watch<K: ChannelResource>(
        &self,
        shutdown: &CancellationToken,
        listed: watch::Sender<bool>,
    ) {
        let api = K::api(self.client.clone(), self.namespace.as_deref());
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "assetscan-operator".into(),
                instance: None,
            },
        );
        let kind = K::kind(&());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut resync =
            tokio::time::interval(self.settings.resync_interval.max(Duration::from_secs(1)));
        let mut known: HashMap<ChannelKey, K> = HashMap::new();
        let mut seen: HashSet<ChannelKey> = HashSet::new();
        loop {
            // Shutdown also ends a step in flight (a Secret read, a status
            // write, an Event): a replica told to stop does not wait on them.
            let step = async {
                tokio::select! {
                    _ = resync.tick() => {
                        for channel in known.values() {
                            self.refresh(channel, &recorder).await;
                        }
                        true
                    }
                    event = events.next() => match event {
                        None => false,
                        Some(Err(err)) => {
                            warn!(error = %err, "cannot watch {kind}s: is the CRD installed (assetscan-operator crd | kubectl apply -f -)?");
                            true
                        }
                        Some(Ok(event)) => {
                            let listing = (&mut known, &mut seen);
                            if self.take(event, listing, &recorder).await {
                                info!(channels = known.len(), "{kind}s listed");
                                listed.send_replace(true);
                            }
                            true
                        }
                    },
                }
            };
            let go_on = tokio::select! {
                () = shutdown.cancelled() => false,
                go_on = step => go_on,
            };
            if !go_on {
                return;
            }
        }
    }

    /// Takes one event of the watch into `known` (the channels of the
    /// kind) and `seen` (those a new listing has shown so far); true when
    /// a listing is complete.
    async fn take<K: ChannelResource>(
        &self,
        event: watcher::Event<K>,
        (known, seen): (&mut HashMap<ChannelKey, K>, &mut HashSet<ChannelKey>),
        recorder: &Recorder,
    ) -> bool {
        match event {
            watcher::Event::Init => seen.clear(),
            watcher::Event::InitApply(channel) => {
                seen.insert(channel.key());
                self.refresh(&channel, recorder).await;
                known.insert(channel.key(), channel);
            }
            watcher::Event::InitDone => {
                known.retain(|key, _| seen.contains(key));
                let stale = |key: &ChannelKey| K::SCOPE.holds(key) && !seen.contains(key);
                self.objects.channels.retain(|key| !stale(key));
                if K::SCOPE == Scope::Cluster {
                    (self.objects.openings).retain(|name| !stale(&ChannelKey::cluster(name)));
                }
                return true;
            }
            watcher::Event::Apply(channel) => {
                self.refresh(&channel, recorder).await;
                known.insert(channel.key(), channel);
            }
            watcher::Event::Delete(channel) => {
                let key = channel.key();
                self.objects.channels.remove(&key);
                if K::SCOPE == Scope::Cluster {
                    self.objects.openings.remove(&key.name);
                }
                known.remove(&key);
            }
        }
        false
    }

    /// Builds `channel` again with its Secret as it is now, files it, and
    /// writes what changed of its conditions.
    async fn refresh<K: ChannelResource>(&self, channel: &K, recorder: &Recorder) {
        let key = channel.key();
        let ready = match self.built(channel).await {
            None => return,
            Some(Ok(Built {
                notifier,
                unresolved,
            })) => {
                self.objects
                    .channels
                    .set(key.clone(), ChannelObject::Ready(notifier));
                match unresolved {
                    None => (ConditionStatus::True, "Ready", K::READY.to_owned()),
                    Some(reason) => (
                        ConditionStatus::Unknown,
                        "HostNotResolved",
                        format!(
                            "the destination could not be checked yet ({reason}); each delivery checks it again"
                        ),
                    ),
                }
            }
            Some(Err(problem)) => {
                let message = problem.to_string();
                let refusal = format!("channel {}: {message}", key.name);
                self.objects
                    .channels
                    .set(key.clone(), ChannelObject::Refused(refusal));
                (ConditionStatus::False, problem.reason(), message)
            }
        };
        let delivered = self.objects.channels.last_delivery(&key);
        let mut conditions = channel.conditions();
        let before = conditions.clone();
        let set = ConditionBuilder::new(channel.meta().generation, Timestamp::now());
        set.set_named(&mut conditions, READY, ready.0, ready.1, &ready.2);
        if let Some(delivery) = delivered {
            let (status, reason) = match delivery.ok {
                true => (ConditionStatus::True, "Delivered"),
                false => (ConditionStatus::False, "DeliveryFailed"),
            };
            set.set_named(
                &mut conditions,
                DELIVERED,
                status,
                reason,
                &delivery.message,
            );
        }
        if conditions == before {
            return;
        }
        self.write_status(channel, conditions.clone()).await;
        if became_unusable(&before, &conditions) {
            let event = Event {
                type_: EventType::Warning,
                reason: ready.1.to_owned(),
                note: Some(ready.2),
                action: "Build".into(),
                secondary: None,
            };
            if let Err(err) = recorder.publish(&event, &channel.object_ref(&())).await {
                warn!(error = %err, "event not published");
            }
        }
    }

    /// The channel built with its Secret, or why it cannot be used; `None`
    /// when the Secret could not be read for a reason not the Secret's
    /// (what was built is kept, and looked at again at the next resync).
    /// A cluster channel's `access` is applied first: one that cannot be
    /// applied opens the channel to no one.
    async fn built<K: ChannelResource>(&self, channel: &K) -> Option<Result<Built, Problem>> {
        let key = channel.key();
        if let Some(access) = channel.access() {
            let opening = Opening::new("spec.access", access, None).map_err(|e| e.to_string());
            self.objects.openings.set(&key.name, opening.clone());
            if let Err(why) = opening {
                return Some(Err(Problem::Access(why)));
            }
        }
        let (namespace, name) = channel.secret_ref();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let egress = (K::SCOPE == Scope::Team).then_some(&self.egress);
        match secrets.get_opt(name).await {
            Ok(secret) => Some(
                build(
                    channel.settings(),
                    (namespace, name),
                    secret.as_ref(),
                    egress,
                )
                .await,
            ),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                Some(Err(Problem::SecretForbidden {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }))
            }
            Err(err) => {
                warn!(error = %err, channel = %key, "cannot read the channel's Secret");
                // Never built: pending until it is, so that a run naming it
                // waits and is retried rather than falling through to a
                // configured channel of that name, which the channel check
                // did not judge.
                if self.objects.channels.get(&key).is_none() {
                    let why = format!(
                        "channel {}: its Secret {namespace}/{name} could not be read yet; it is read again at the next resync",
                        key.name
                    );
                    self.objects.channels.set(key, ChannelObject::Pending(why));
                }
                None
            }
        }
    }

    async fn write_status<K: ChannelResource>(&self, channel: &K, conditions: Vec<Condition>) {
        let key = channel.key();
        let api = K::api(self.client.clone(), key.namespace.as_deref());
        let status = NotificationChannelStatus { conditions };
        let patch = serde_json::json!({ "status": status });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        if let Err(err) = api
            .patch_status(&key.name, &params, &Patch::Merge(&patch))
            .await
        {
            warn!(error = %err, channel = %key, "cannot write the channel's status");
        }
    }
}

/// `Ready` turned from anything but `False` (or nothing) to `False`, or
/// its reason changed while `False`.
fn became_unusable(before: &[Condition], after: &[Condition]) -> bool {
    let ready = |conditions: &[Condition]| {
        conditions
            .iter()
            .find(|c| c.type_ == READY)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    match (ready(before), ready(after)) {
        (old, Some((status, reason))) if status == "False" => old != Some((status, reason)),
        _ => false,
    }
}
