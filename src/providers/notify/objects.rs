//! The channels defined as Kubernetes objects, kept current by the
//! Kubernetes side: a team's (a NotificationChannel and its Secret, in its
//! namespace) and the platform's (a ClusterNotificationChannel). A run
//! looks a name up first among its own namespace's channels, then among
//! the cluster's: it never reaches another namespace's.

use super::Notifier;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A channel object as the last look at it and its Secret left it.
#[derive(Debug)]
pub enum ChannelObject {
    /// Built, its destination allowed by the egress policy.
    Ready(Notifier),
    /// Not usable, and why (the channel's condition says the same): a run
    /// naming it fails its send with these words, it does not fall through
    /// to a configured channel of the same name.
    Refused(String),
    /// Seen, not built yet (its Secret could not be read for a reason not
    /// the Secret's): a send waits and is retried, it does not fall
    /// through either.
    Pending(String),
}

/// The last delivery on a channel object: its `Delivered` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub ok: bool,
    /// The receipt, or the error's summary (never the receiver's words).
    pub message: String,
}

/// Which kind of channel the channel check let a namespace's runs use
/// under a name, as it last judged (or that it refused the name). A send
/// finding another kind under that name now (an object created or deleted
/// since) waits for the next check instead of sending where no check
/// looked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// The namespace's own channel.
    Own,
    /// The cluster's channel, its access open to the namespace.
    Cluster,
    /// The configured channel, `channelAccess` open to the namespace.
    Configured,
    Refused,
}

impl std::fmt::Display for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Checked::Own => "the namespace's own channel",
            Checked::Cluster => "the cluster's channel",
            Checked::Configured => "the configured channel",
            Checked::Refused => "refused",
        })
    }
}

/// Which channel object: a namespace's (a team's) or the cluster's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChannelKey {
    /// `None`: the cluster's.
    pub namespace: Option<String>,
    pub name: String,
}

impl ChannelKey {
    pub fn team(namespace: &str, name: &str) -> ChannelKey {
        ChannelKey {
            namespace: Some(namespace.to_owned()),
            name: name.to_owned(),
        }
    }

    pub fn cluster(name: &str) -> ChannelKey {
        ChannelKey {
            namespace: None,
            name: name.to_owned(),
        }
    }

    /// The channel's pacing bucket: a team's channel has its own
    /// (`<namespace>/<name>`, a name no configured channel can take from
    /// it); the cluster's shares the name with the configured channel it
    /// stands in for.
    pub fn bucket(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl std::fmt::Display for ChannelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.name),
            None => write!(f, "cluster/{}", self.name),
        }
    }
}

/// Every channel object, teams' and the cluster's.
#[derive(Debug, Default)]
pub struct ChannelObjects {
    channels: RwLock<HashMap<ChannelKey, Arc<ChannelObject>>>,
    deliveries: Mutex<HashMap<ChannelKey, Delivery>>,
    /// By namespace and name; one entry for each pair the AssetScans name.
    checked: Mutex<HashMap<(String, String), Checked>>,
}

impl ChannelObjects {
    pub fn get(&self, key: &ChannelKey) -> Option<Arc<ChannelObject>> {
        self.read().get(key).cloned()
    }

    /// The channel `name` for a run of `namespace`: the namespace's own,
    /// else the cluster's. A run of no object (`None`) reaches neither: a
    /// cluster channel is open only to the namespaces its access names.
    pub fn find(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<(ChannelKey, Arc<ChannelObject>)> {
        let namespace = namespace?;
        [ChannelKey::team(namespace, name), ChannelKey::cluster(name)]
            .into_iter()
            .find_map(|key| Some((key.clone(), self.get(&key)?)))
    }

    pub fn set(&self, key: ChannelKey, channel: ChannelObject) {
        self.write().insert(key, Arc::new(channel));
    }

    pub fn remove(&self, key: &ChannelKey) {
        self.write().remove(key);
        self.deliveries().remove(key);
    }

    /// Notes how the last delivery on the channel went, while the channel
    /// is there (one removed meanwhile keeps no delivery for a namesake).
    pub fn record(&self, key: ChannelKey, delivery: Delivery) {
        let channels = self.read();
        if channels.contains_key(&key) {
            self.deliveries().insert(key, delivery);
        }
    }

    pub fn last_delivery(&self, key: &ChannelKey) -> Option<Delivery> {
        self.deliveries().get(key).cloned()
    }

    /// Keeps the channels `keep` says yes to, after a watch started over.
    pub fn retain(&self, keep: impl Fn(&ChannelKey) -> bool) {
        self.write().retain(|key, _| keep(key));
        self.deliveries().retain(|key, _| keep(key));
    }

    /// Notes what the channel check judged of `name` for `namespace`.
    pub fn note_checked(&self, namespace: &str, name: &str, checked: Checked) {
        let key = (namespace.to_owned(), name.to_owned());
        self.checked_by_name().insert(key, checked);
    }

    /// What the channel check last judged of `name` for `namespace`.
    pub fn checked(&self, namespace: &str, name: &str) -> Option<Checked> {
        let key = (namespace.to_owned(), name.to_owned());
        self.checked_by_name().get(&key).copied()
    }

    fn checked_by_name(&self) -> MutexGuard<'_, HashMap<(String, String), Checked>> {
        self.checked.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliveries(&self) -> MutexGuard<'_, HashMap<ChannelKey, Delivery>> {
        self.deliveries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<ChannelKey, Arc<ChannelObject>>> {
        self.channels.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<ChannelKey, Arc<ChannelObject>>> {
        self.channels.write().unwrap_or_else(|e| e.into_inner())
    }
}
