//! The channels teams define: a watch on the NotificationChannels (of the
//! watched namespace, or of all), each built with the Secret it names
//! ([`build`]) into the providers' [`TeamChannels`], where a run of that
//! namespace finds it; its conditions written (`Ready`, `Delivered`) and a
//! Warning Event when it cannot be used.
//!
//! Secrets are read by name, one `get` per channel, and never watched or
//! listed: the operator needs no more than `get` on Secrets. So every
//! channel is built again each `teamChannels.resyncInterval`: a Secret
//! created, fixed or rotated is taken within that, and the `Delivered`
//! condition follows the deliveries at that pace.

mod build;

use super::settings::TeamChannelsSection;
use super::status::conditions::{ConditionBuilder, ConditionStatus};
use super::status::writer::FIELD_MANAGER;
use crate::kubernetes::crd::{NotificationChannel, NotificationChannelStatus};
use crate::providers::egress::EgressPolicy;
use crate::providers::notify::{TeamChannel, TeamChannels};
use build::{Built, Problem, build};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, watcher};
use kube::{Client, Resource, ResourceExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The condition types of a NotificationChannel.
const READY: &str = "Ready";
const DELIVERED: &str = "Delivered";

/// What the watch needs: where to put the channels it builds, the policy
/// their destinations pass, and the namespace it watches if one.
pub struct ChannelWatch {
    pub client: Client,
    pub channels: Arc<TeamChannels>,
    pub egress: Arc<EgressPolicy>,
    pub namespace: Option<String>,
    pub settings: TeamChannelsSection,
}

type Key = (String, String);

impl ChannelWatch {
    /// Keeps the team channels current until `shutdown` fires; `listed`
    /// turns true once every channel has been listed and built.
    pub async fn run(self, shutdown: CancellationToken, listed: tokio::sync::watch::Sender<bool>) {
        let api: Api<NotificationChannel> = match &self.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "assetscan-operator".into(),
                instance: None,
            },
        );
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut resync =
            tokio::time::interval(self.settings.resync_interval.max(Duration::from_secs(1)));
        let mut known: HashMap<Key, NotificationChannel> = HashMap::new();
        let mut seen: HashSet<Key> = HashSet::new();
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
                            warn!(error = %err, "cannot watch NotificationChannels: is the CRD installed (assetscan-operator crd | kubectl apply -f -)?");
                            true
                        }
                        Some(Ok(watcher::Event::Init)) => {
                            seen.clear();
                            true
                        }
                        Some(Ok(watcher::Event::InitApply(channel))) => {
                            seen.insert(key_of(&channel));
                            self.refresh(&channel, &recorder).await;
                            known.insert(key_of(&channel), channel);
                            true
                        }
                        Some(Ok(watcher::Event::InitDone)) => {
                            known.retain(|key, _| seen.contains(key));
                            self.channels.retain(|ns, name| seen.contains(&(ns.to_owned(), name.to_owned())));
                            info!(channels = known.len(), "team channels listed");
                            listed.send_replace(true);
                            true
                        }
                        Some(Ok(watcher::Event::Apply(channel))) => {
                            self.refresh(&channel, &recorder).await;
                            known.insert(key_of(&channel), channel);
                            true
                        }
                        Some(Ok(watcher::Event::Delete(channel))) => {
                            let (namespace, name) = key_of(&channel);
                            self.channels.remove(&namespace, &name);
                            known.remove(&(namespace, name));
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

    /// Builds `channel` again with its Secret as it is now, files it, and
    /// writes what changed of its conditions.
    async fn refresh(&self, channel: &NotificationChannel, recorder: &Recorder) {
        let (namespace, name) = key_of(channel);
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let secret_name = &channel.spec.secret_ref.name;
        let built = match secrets.get_opt(secret_name).await {
            Ok(secret) => build(channel, secret.as_ref(), &self.egress).await,
            Err(kube::Error::Api(status)) if status.code == 403 => Err(Problem::SecretForbidden {
                namespace: namespace.clone(),
                name: secret_name.clone(),
            }),
            Err(err) => {
                // Not the Secret's: keep what was built, and look again at
                // the next resync.
                warn!(error = %err, channel = %format!("{namespace}/{name}"), "cannot read the channel's Secret");
                return;
            }
        };
        let ready = match built {
            Ok(Built {
                notifier,
                unresolved,
            }) => {
                self.channels
                    .set(&namespace, &name, TeamChannel::Ready(notifier));
                match unresolved {
                    None => (ConditionStatus::True, "Ready", "the channel delivers the alerts of this namespace's AssetScans that name it".to_owned()),
                    Some(reason) => (ConditionStatus::Unknown, "HostNotResolved", format!("the destination could not be checked yet ({reason}); each delivery checks it again")),
                }
            }
            Err(problem) => {
                let message = problem.to_string();
                let refusal = format!("channel {name}: {message}");
                self.channels
                    .set(&namespace, &name, TeamChannel::Refused(refusal));
                (ConditionStatus::False, problem.reason(), message)
            }
        };
        let delivered = self.channels.last_delivery(&namespace, &name);
        let mut conditions = channel
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let before = conditions.clone();
        let set = ConditionBuilder::new(channel.metadata.generation, Timestamp::now());
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

    async fn write_status(&self, channel: &NotificationChannel, conditions: Vec<Condition>) {
        let (namespace, name) = key_of(channel);
        let api: Api<NotificationChannel> = Api::namespaced(self.client.clone(), &namespace);
        let status = NotificationChannelStatus { conditions };
        let patch = serde_json::json!({ "status": status });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        if let Err(err) = api
            .patch_status(&name, &params, &Patch::Merge(&patch))
            .await
        {
            warn!(error = %err, channel = %format!("{namespace}/{name}"), "cannot write the channel's status");
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

fn key_of(channel: &NotificationChannel) -> Key {
    (channel.namespace().unwrap_or_default(), channel.name_any())
}
