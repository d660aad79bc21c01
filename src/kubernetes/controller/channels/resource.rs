//! The two kinds of channel object, as the watch reads them: where runs
//! find each, what it asks for, and the API that serves it.

use crate::kubernetes::channel_access::ChannelAccess;
use crate::kubernetes::crd::{ChannelSettings, ClusterNotificationChannel, NotificationChannel};
use crate::providers::notify::ChannelKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// Whose channels a kind holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A namespace's team's: its destination passes the egress policy.
    Team,
    /// The platform's: trusted as a configured channel is (it may point at
    /// the cluster's own Alertmanager), opened by its `access`.
    Cluster,
}

impl Scope {
    /// Whether `key` names a channel of this scope.
    pub fn holds(self, key: &ChannelKey) -> bool {
        match self {
            Scope::Team => key.namespace.is_some(),
            Scope::Cluster => key.namespace.is_none(),
        }
    }
}

/// A channel object of one kind.
pub trait ChannelResource:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
    const SCOPE: Scope;
    /// The `Ready` condition's message when it is usable.
    const READY: &'static str;

    /// Where runs find it.
    fn key(&self) -> ChannelKey;
    fn settings(&self) -> &ChannelSettings;
    /// The namespace and name of the Secret with its credentials.
    fn secret_ref(&self) -> (&str, &str);
    /// Who may name it, when the object says (the cluster's).
    fn access(&self) -> Option<&ChannelAccess>;
    fn conditions(&self) -> Vec<Condition>;
    /// The objects of `namespace` if one (and if the kind has namespaces),
    /// else of all.
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;
}

impl ChannelResource for NotificationChannel {
    const SCOPE: Scope = Scope::Team;
    const READY: &'static str =
        "the channel delivers the alerts of this namespace's AssetScans that name it";

    fn key(&self) -> ChannelKey {
        ChannelKey::team(
            self.metadata.namespace.as_deref().unwrap_or_default(),
            &self.name_any(),
        )
    }

    fn settings(&self) -> &ChannelSettings {
        &self.spec.settings
    }

    fn secret_ref(&self) -> (&str, &str) {
        let namespace = self.metadata.namespace.as_deref().unwrap_or_default();
        (namespace, &self.spec.secret_ref.name)
    }

    fn access(&self) -> Option<&ChannelAccess> {
        None
    }

    fn conditions(&self) -> Vec<Condition> {
        (self.status.as_ref()).map_or_else(Vec::new, |s| s.conditions.clone())
    }

    fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
        match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }
}

impl ChannelResource for ClusterNotificationChannel {
    const SCOPE: Scope = Scope::Cluster;
    const READY: &'static str = "the channel delivers the alerts of the AssetScans that name it, in the namespaces its access opens it to";

    fn key(&self) -> ChannelKey {
        ChannelKey::cluster(&self.name_any())
    }

    fn settings(&self) -> &ChannelSettings {
        &self.spec.settings
    }

    fn secret_ref(&self) -> (&str, &str) {
        let secret = &self.spec.secret_ref;
        (&secret.namespace, &secret.name)
    }

    fn access(&self) -> Option<&ChannelAccess> {
        Some(&self.spec.access)
    }

    fn conditions(&self) -> Vec<Condition> {
        (self.status.as_ref()).map_or_else(Vec::new, |s| s.conditions.clone())
    }

    fn api(client: Client, _: Option<&str>) -> Api<Self> {
        Api::all(client)
    }
}
