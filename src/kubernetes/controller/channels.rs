//! The channel policy applied to one object: which of the channels its
//! spec names its namespace may not use ([`ChannelPolicy`]). Those are left
//! out of the run (nothing is sent on them); the object's status and a
//! Warning Event say which and why.

use super::conditions::{ConditionBuilder, ConditionStatus, ConditionType};
use crate::kubernetes::channel_access::ChannelPolicy;
use crate::kubernetes::crd::{AssetScan, AssetScanStatus};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
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
    client: Client,
    labels: Mutex<HashMap<String, (Instant, Labels)>>,
}

/// The channels of one object its namespace may not use, each with why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Refused(pub Vec<(String, String)>);

impl Refused {
    pub fn contains(&self, channel: &str) -> bool {
        self.0.iter().any(|(c, _)| c == channel)
    }

    /// What the condition and the Event say.
    pub fn message(&self) -> String {
        let whys: Vec<&str> = self.0.iter().map(|(_, why)| why.as_str()).collect();
        format!("nothing is sent on these channels: {}", whys.join("; "))
    }
}

impl ChannelGate {
    pub fn new(policy: ChannelPolicy, client: Client) -> ChannelGate {
        ChannelGate {
            policy,
            client,
            labels: Mutex::new(HashMap::new()),
        }
    }

    /// The channels `obj` names that its namespace may not use. Reads the
    /// namespace's labels only when a selector decides.
    pub async fn refused(&self, obj: &AssetScan) -> Result<Refused, kube::Error> {
        let namespace = obj.namespace().unwrap_or_default();
        let mut refused = Vec::new();
        for channel in &obj.spec.notify {
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

/// Sets `ChannelRefused` on `status` while a channel is refused, and
/// removes it once none is (absent means false).
pub fn channel_condition(status: &mut AssetScanStatus, refused: &Refused, now: Timestamp) {
    let type_ = ConditionType::ChannelRefused;
    if refused.0.is_empty() {
        status.conditions.retain(|c| c.type_ != type_.as_str());
        return;
    }
    ConditionBuilder::new(status.observed_generation, now).set(
        &mut status.conditions,
        type_,
        ConditionStatus::True,
        "ChannelNotAllowed",
        &refused.message(),
    );
}
