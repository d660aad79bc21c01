//! The channel policy applied to one object: which of the channels its
//! spec names its namespace may not use ([`ChannelPolicy`]); a channel its
//! own namespace defines (a NotificationChannel) is its own to use, and is
//! used in place of a configured one of that name. Those refused are left
//! out of the run (nothing is sent on them); the object's status
//! ([`Refused`]'s condition) and a Warning Event say which and why.

use crate::kubernetes::channel_access::ChannelPolicy;
use crate::kubernetes::controller::status::halt::Refused;
use crate::kubernetes::crd::AssetScan;
use crate::providers::notify::TeamChannels;
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

/// The policy, and the namespaces' labels its selectors read.
pub struct ChannelGate {
    policy: ChannelPolicy,
    team_channels: Option<Arc<TeamChannels>>,
    client: Client,
    labels: Mutex<HashMap<String, (Instant, Labels)>>,
}

impl ChannelGate {
    pub fn new(
        policy: ChannelPolicy,
        team_channels: Option<Arc<TeamChannels>>,
        client: Client,
    ) -> ChannelGate {
        ChannelGate {
            policy,
            team_channels,
            client,
            labels: Mutex::new(HashMap::new()),
        }
    }

    /// The channels `obj` names that its namespace may not use. Reads the
    /// namespace's labels only when a selector decides.
    pub async fn refused(&self, obj: &AssetScan) -> Result<Refused, kube::Error> {
        let namespace = obj.namespace().unwrap_or_default();
        let mut refused = Vec::new();
        let own = |channel: &str| {
            (self.team_channels.as_ref()).is_some_and(|t| t.get(&namespace, channel).is_some())
        };
        for channel in obj.spec.notify.iter().filter(|c| !own(c)) {
            let labels = match self.policy.needs_labels(channel, &namespace) {
                true => Some(self.labels_of(&namespace).await?),
                false => None,
            };
            if let Err(why) = self.policy.check(channel, &namespace, labels.as_deref()) {
                refused.push((channel.clone(), why));
            }
        }
        Ok(Refused(refused))
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
