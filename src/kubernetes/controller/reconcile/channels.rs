//! The channel rules applied to one object: which of the channels its
//! spec names its namespace may not use. A channel its own namespace
//! defines (a NotificationChannel) is its own to use, in place of any
//! other of that name; a ClusterNotificationChannel is open to the
//! namespaces its `access` names; a configured channel to those
//! `channelAccess` names ([`ChannelPolicy`]). Those refused are left out
//! of the run (nothing is sent on them); the object's status
//! ([`Refused`]'s condition) and a Warning Event say which and why.

use crate::kubernetes::channel_access::{ChannelPolicy, ObjectChannels, Opening};
use crate::kubernetes::controller::status::halt::Refused;
use crate::kubernetes::crd::AssetScan;
use crate::providers::notify::{ChannelKey, Checked};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client, ResourceExt};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a namespace's labels are trusted once read: a label change
/// opens or closes a channel within this long, at one GET per namespace
/// (not per object) per period.
const LABELS_TTL: Duration = Duration::from_secs(30);

type Labels = Arc<BTreeMap<String, String>>;

/// Which rule decides on one channel for one namespace.
enum Rule {
    /// The namespace's own channel.
    Own,
    /// A cluster channel's `access`, or why it opens to no one.
    Cluster(Result<Opening, String>),
    /// `channelAccess`.
    Configured,
}

/// The rules, and the namespaces' labels their selectors read.
pub struct ChannelGate {
    policy: ChannelPolicy,
    objects: Option<ObjectChannels>,
    client: Client,
    labels: Mutex<HashMap<String, (Instant, Labels)>>,
}

impl ChannelGate {
    pub fn new(
        policy: ChannelPolicy,
        objects: Option<ObjectChannels>,
        client: Client,
    ) -> ChannelGate {
        ChannelGate {
            policy,
            objects,
            client,
            labels: Mutex::new(HashMap::new()),
        }
    }

    /// The channels `obj` names that its namespace may not use. Reads the
    /// namespace's labels only when a selector decides. Each judgement is
    /// noted where the sends read it ([`Checked`]): a send that finds
    /// another kind of channel under the name waits for the next one.
    pub async fn refused(&self, obj: &AssetScan) -> Result<Refused, kube::Error> {
        let namespace = obj.namespace().unwrap_or_default();
        let mut refused = Vec::new();
        for channel in &obj.spec.notify {
            let judged = match self.judge(&namespace, channel).await? {
                Ok(kind) => kind,
                Err(why) => {
                    refused.push((channel.clone(), why));
                    Checked::Refused
                }
            };
            if let Some(objects) = &self.objects {
                (objects.channels).note_checked(&namespace, channel, judged);
            }
        }
        Ok(Refused(refused))
    }

    /// Whether `namespace` may use `channel`: the kind it uses, or why not.
    async fn judge(
        &self,
        namespace: &str,
        channel: &str,
    ) -> Result<Result<Checked, String>, kube::Error> {
        let opening = match self.rule(namespace, channel) {
            Rule::Own => return Ok(Ok(Checked::Own)),
            Rule::Cluster(Err(why)) => {
                return Ok(Err(format!(
                    "channel {channel} is open to no namespace: its ClusterNotificationChannel's {why}"
                )));
            }
            Rule::Cluster(Ok(opening)) => Some(opening),
            Rule::Configured => None,
        };
        let needs_labels = match &opening {
            Some(opening) => opening.needs_labels(namespace),
            None => self.policy.needs_labels(channel, namespace),
        };
        let labels = match needs_labels {
            true => match self.labels_of(namespace).await {
                Ok(labels) => Some(labels),
                // Closed, and said: an RBAC that lacks the read (a chart
                // edited by hand) refuses the channel, not the object.
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    return Ok(Err(format!(
                        "channel {channel} refuses namespace {namespace}: its namespaceSelector needs the namespace's labels, and the operator may not read them (forbidden)"
                    )));
                }
                Err(err) => return Err(err),
            },
            false => None,
        };
        let labels = labels.as_deref();
        Ok(match &opening {
            Some(opening) => {
                let source = format!("ClusterNotificationChannel {channel} spec.access");
                (opening.check(channel, namespace, labels, &source)).map(|()| Checked::Cluster)
            }
            None => (self.policy.check(channel, namespace, labels)).map(|()| Checked::Configured),
        })
    }

    fn rule(&self, namespace: &str, channel: &str) -> Rule {
        let Some(objects) = &self.objects else {
            return Rule::Configured;
        };
        if objects
            .channels
            .get(&ChannelKey::team(namespace, channel))
            .is_some()
        {
            return Rule::Own;
        }
        match objects.openings.get(channel) {
            Some(opening) => Rule::Cluster(opening),
            None => Rule::Configured,
        }
    }

    async fn labels_of(&self, namespace: &str) -> Result<Labels, kube::Error> {
        let cached = self.known().get(namespace).cloned();
        if let Some((at, labels)) = cached
            && at.elapsed() < LABELS_TTL
        {
            return Ok(labels);
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        let labels = Arc::new(api.get(namespace).await?.labels().clone());
        self.known()
            .insert(namespace.to_owned(), (Instant::now(), labels.clone()));
        Ok(labels)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Labels)>> {
        self.labels.lock().unwrap_or_else(|e| e.into_inner())
    }
}
