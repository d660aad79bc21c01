//! The ownership graph: who owns whom by `ownerReferences` uid, and which
//! objects the garbage collector (`gc`) has to look at. The store keeps it
//! up to date on every commit, so the collector never scans all objects.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Notify;

use super::keys::ObjKey;
use super::meta;

/// The garbage collector's finalizer for `propagationPolicy: Orphan`.
pub const ORPHAN: &str = "orphan";
/// The garbage collector's finalizer for `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";

/// Who owns whom, by uid, plus the objects the collector must look at.
#[derive(Debug, Default)]
pub struct Graph {
    /// Live objects by uid.
    uids: HashMap<String, ObjKey>,
    /// Owner uid → live objects that reference it.
    dependents: HashMap<String, BTreeSet<ObjKey>>,
    /// Objects to look at: dependents of a removed owner, objects with
    /// dangling references, owners waiting on the collector.
    pending: BTreeSet<ObjKey>,
    wake: Arc<Notify>,
}

pub fn uid(obj: &Value) -> Option<&str> {
    meta::meta_str(obj, "uid").filter(|u| !u.is_empty())
}

fn owner_uids(obj: &Value) -> Vec<String> {
    meta::each_str(obj.pointer("/metadata/ownerReferences"), "uid")
        .map(str::to_string)
        .collect()
}

/// Whether the object waits for the collector to release it.
fn awaits_collector(obj: &Value) -> bool {
    meta::is_deleting(obj)
        && meta::finalizers(obj)
            .iter()
            .any(|f| f == ORPHAN || f == FOREGROUND)
}

impl Graph {
    /// Keeps the index current for one committed change and queues what the
    /// change gives the collector to do.
    pub fn observe(&mut self, key: &ObjKey, previous: Option<&Value>, current: Option<&Value>) {
        if let Some(prev) = previous {
            if let Some(u) = uid(prev) {
                self.uids.remove(u);
            }
            for owner in owner_uids(prev) {
                if let Some(set) = self.dependents.get_mut(&owner) {
                    set.remove(key);
                    if set.is_empty() {
                        self.dependents.remove(&owner);
                    }
                }
            }
        }
        match (previous, current) {
            (_, Some(cur)) => {
                if let Some(u) = uid(cur) {
                    self.uids.insert(u.to_string(), key.clone());
                }
                let owners = owner_uids(cur);
                let dangling = owners.iter().any(|o| !self.uids.contains_key(o));
                for owner in owners {
                    self.dependents
                        .entry(owner)
                        .or_default()
                        .insert(key.clone());
                }
                if dangling || awaits_collector(cur) {
                    self.pending.insert(key.clone());
                }
            }
            (Some(prev), None) => {
                if let Some(set) = uid(prev).and_then(|u| self.dependents.get(u)) {
                    self.pending.extend(set.iter().cloned());
                }
                // An owner deleting in the foreground may now be free to go.
                for owner in owner_uids(prev) {
                    if let Some(k) = self.uids.get(&owner) {
                        self.pending.insert(k.clone());
                    }
                }
            }
            (None, None) => {}
        }
        if !self.pending.is_empty() {
            self.wake.notify_one();
        }
    }

    /// Woken whenever work is queued.
    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Whether an object with this uid is stored.
    pub fn is_live(&self, uid: &str) -> bool {
        self.uids.contains_key(uid)
    }

    /// The next object the collector must look at, taken off the queue.
    pub fn next_pending(&mut self) -> Option<ObjKey> {
        self.pending.pop_first()
    }

    /// The stored objects that reference `owner_uid`.
    pub fn dependents_of(&self, owner_uid: &str) -> Vec<ObjKey> {
        self.dependents
            .get(owner_uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}
