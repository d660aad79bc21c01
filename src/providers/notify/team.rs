//! The channels teams define as objects in their namespaces (a
//! NotificationChannel and its Secret), kept current by the Kubernetes
//! side and looked up at each send under the namespace of the object whose
//! run sends: a run reaches its own namespace's channels and no other's.

use super::Notifier;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A team's channel as the last look at its object and Secret left it.
#[derive(Debug)]
pub enum TeamChannel {
    /// Built, its destination allowed by the egress policy.
    Ready(Notifier),
    /// Not usable, and why (the channel's condition says the same): a run
    /// naming it fails its send with these words, it does not fall through
    /// to a configured channel of the same name.
    Refused(String),
}

/// The last delivery on a team's channel: its `Delivered` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub ok: bool,
    /// The receipt, or the error's summary (never the receiver's words).
    pub message: String,
}

type Key = (String, String);

/// Every team's channels, by namespace and name.
#[derive(Debug, Default)]
pub struct TeamChannels {
    channels: RwLock<HashMap<Key, Arc<TeamChannel>>>,
    deliveries: Mutex<HashMap<Key, Delivery>>,
}

impl TeamChannels {
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<TeamChannel>> {
        let key = (namespace.to_owned(), name.to_owned());
        self.read().get(&key).cloned()
    }

    pub fn set(&self, namespace: &str, name: &str, channel: TeamChannel) {
        let key = (namespace.to_owned(), name.to_owned());
        self.write().insert(key, Arc::new(channel));
    }

    pub fn remove(&self, namespace: &str, name: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        self.write().remove(&key);
        self.deliveries().remove(&key);
    }

    /// Notes how the last delivery on the channel went.
    pub fn record(&self, namespace: &str, name: &str, delivery: Delivery) {
        let key = (namespace.to_owned(), name.to_owned());
        self.deliveries().insert(key, delivery);
    }

    pub fn last_delivery(&self, namespace: &str, name: &str) -> Option<Delivery> {
        let key = (namespace.to_owned(), name.to_owned());
        self.deliveries().get(&key).cloned()
    }

    /// Keeps the channels `keep` names, after a watch started over.
    pub fn retain(&self, keep: impl Fn(&str, &str) -> bool) {
        self.write()
            .retain(|(namespace, name), _| keep(namespace, name));
        self.deliveries()
            .retain(|(namespace, name), _| keep(namespace, name));
    }

    fn deliveries(&self) -> MutexGuard<'_, HashMap<Key, Delivery>> {
        self.deliveries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<Key, Arc<TeamChannel>>> {
        self.channels.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<Key, Arc<TeamChannel>>> {
        self.channels.write().unwrap_or_else(|e| e.into_inner())
    }
}
