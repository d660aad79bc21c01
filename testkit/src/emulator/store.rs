//! The object store: what etcd is to kube-apiserver.
//!
//! One global, strictly increasing resourceVersion counter (etcd's revision)
//! stamps every accepted write. Each write is also appended to a bounded
//! change log, which serves three purposes, as etcd's history does:
//! resuming watches from a resourceVersion, consistent paginated lists at the
//! resourceVersion of their first page, and `410 Gone` once a version has
//! fallen out of the window ("compacted"). A per-object history of accepted
//! writes is kept without bound, for tests' invariant checks.
//!
//! Objects are kept in key order (storage, namespace, name), so a list of
//! one resource or one namespace is a range, not a scan; the owner graph of
//! the garbage collector and the per-namespace counts are indexes kept up to
//! date by every commit, so no write costs time proportional to the number of
//! objects stored.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

use super::error::ApiError;
use super::keys::{ObjKey, StorageId};
use super::meta;
use super::owner_graph::Graph;

/// The watch event type a write produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// Which API call produced an accepted write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    /// PUT.
    Update,
    MergePatch,
    JsonPatch,
    StrategicMergePatch,
    /// Server-side apply.
    Apply,
    /// DELETE: either the final removal or, with finalizers, setting `deletionTimestamp`.
    Delete,
}

/// One accepted write of one object, as recorded for tests.
#[derive(Debug, Clone)]
pub struct WriteRecord {
    pub resource_version: u64,
    pub event: EventType,
    pub operation: Operation,
    /// `Some("status")` for writes through the status subresource.
    pub subresource: Option<String>,
    pub field_manager: Option<String>,
    /// The object as stored after the write (for `Deleted`: its last state),
    /// shared with the store and the watch log rather than copied.
    pub object: Arc<Value>,
}

/// One committed change, the unit of the watch log.
#[derive(Debug)]
pub struct Change {
    pub rv: u64,
    pub key: ObjKey,
    pub event: EventType,
    /// Stored form after the change; for deletions the last state, stamped with the deletion's RV.
    pub object: Arc<Value>,
    /// Stored form before the change (None for creations).
    pub previous: Option<Arc<Value>>,
}

/// How a write came in, for the history record.
#[derive(Debug, Clone)]
pub struct WriteMeta {
    pub operation: Operation,
    pub subresource: Option<String>,
    pub field_manager: Option<String>,
}

/// The requested version is no longer in the change log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    pub requested: u64,
    pub oldest: u64,
}

impl TooOld {
    /// The `410` a list or watch at this version answers with.
    pub fn gone(self) -> ApiError {
        ApiError::Gone {
            message: format!(
                "too old resource version: {} ({})",
                self.requested, self.oldest
            ),
            continue_token: None,
        }
    }
}

#[derive(Debug)]
pub struct Store {
    rv: u64,
    objects: BTreeMap<ObjKey, Arc<Value>>,
    log: VecDeque<Arc<Change>>,
    window: usize,
    /// Every change with rv <= compacted has left the log.
    compacted: u64,
    /// Watches from an older version answer 410: the watch cache of a
    /// restarted API server starts at the version it came back with, while
    /// lists at exact versions are still served (by etcd, which kept them).
    watch_floor: u64,
    history: HashMap<ObjKey, Vec<WriteRecord>>,
    /// Whether `history` is kept.
    keep_history: bool,
    tx: broadcast::Sender<Arc<Change>>,
    /// Objects per namespace, so that a terminating namespace knows at once
    /// whether it is empty.
    per_namespace: HashMap<String, usize>,
    graph: Graph,
}

impl Store {
    pub fn new(window: usize, keep_history: bool) -> Self {
        let (tx, _) = broadcast::channel(16 * 1024);
        Self {
            rv: 1,
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            window: window.max(1),
            compacted: 1,
            watch_floor: 1,
            history: HashMap::new(),
            keep_history,
            tx,
            per_namespace: HashMap::new(),
            graph: Graph::default(),
        }
    }

    /// The ownership graph the garbage collector works from.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn graph_mut(&mut self) -> &mut Graph {
        &mut self.graph
    }

    /// The stored objects of one storage (and namespace), in key order.
    fn range<'a>(
        &'a self,
        storage: &'a StorageId,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a {
        let start = ObjKey {
            storage: storage.clone(),
            namespace: namespace.unwrap_or_default().to_string(),
            name: String::new(),
        };
        self.objects
            .range((Bound::Included(start), Bound::Unbounded))
            .take_while(move |(k, _)| {
                k.storage == *storage && namespace.is_none_or(|ns| k.namespace == ns)
            })
    }

    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    pub fn get(&self, key: &ObjKey) -> Option<Arc<Value>> {
        self.objects.get(key).cloned()
    }

    /// Current objects of one storage, optionally one namespace, in key order.
    pub fn list(&self, storage: &StorageId, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.range(storage, namespace)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The objects as they were at `rv`, rebuilt by undoing later changes.
    pub fn list_at(
        &self,
        storage: &StorageId,
        namespace: Option<&str>,
        rv: u64,
    ) -> Result<Vec<Arc<Value>>, TooOld> {
        if rv >= self.rv {
            return Ok(self.list(storage, namespace));
        }
        if rv < self.compacted {
            return Err(TooOld {
                requested: rv,
                oldest: self.compacted,
            });
        }
        let mut snapshot: BTreeMap<&ObjKey, Arc<Value>> = self
            .range(storage, namespace)
            .map(|(k, v)| (k, v.clone()))
            .collect();
        for change in self.log.iter().rev().take_while(|c| c.rv > rv) {
            let k = &change.key;
            if k.storage != *storage || namespace.is_some_and(|ns| k.namespace != ns) {
                continue;
            }
            match (&change.event, &change.previous) {
                (EventType::Added, _) => {
                    snapshot.remove(k);
                }
                (_, Some(prev)) => {
                    snapshot.insert(k, prev.clone());
                }
                (_, None) => {}
            }
        }
        Ok(snapshot.into_values().collect())
    }

    /// Changes after `rv`, oldest first, for a watch.
    pub fn changes_since(&self, rv: u64) -> Result<Vec<Arc<Change>>, TooOld> {
        let oldest = self.compacted.max(self.watch_floor);
        if rv < oldest {
            return Err(TooOld {
                requested: rv,
                oldest,
            });
        }
        let start = self.log.partition_point(|c| c.rv <= rv);
        Ok(self.log.iter().skip(start).cloned().collect())
    }

    /// Subscribe to changes committed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.tx.subscribe()
    }

    /// Commits a write: stamps a new resourceVersion, stores (or removes, for
    /// `Deleted`) the object, logs and broadcasts the change, records history.
    pub fn commit(
        &mut self,
        key: ObjKey,
        event: EventType,
        mut object: Value,
        how: WriteMeta,
    ) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        meta::set_meta(
            &mut object,
            "resourceVersion",
            Value::String(rv.to_string()),
        );
        let object = Arc::new(object);
        let (previous, current) = match event {
            EventType::Deleted => (self.objects.remove(&key), None),
            _ => (
                self.objects.insert(key.clone(), object.clone()),
                Some(object.as_ref()),
            ),
        };
        let count = self.per_namespace.entry(key.namespace.clone()).or_default();
        match (&previous, current) {
            (None, Some(_)) => *count += 1,
            (Some(_), None) => *count = count.saturating_sub(1),
            _ => {}
        }
        self.graph.observe(&key, previous.as_deref(), current);
        if self.keep_history {
            self.history
                .entry(key.clone())
                .or_default()
                .push(WriteRecord {
                    resource_version: rv,
                    event,
                    operation: how.operation,
                    subresource: how.subresource,
                    field_manager: how.field_manager,
                    object: object.clone(),
                });
        }
        let change = Arc::new(Change {
            rv,
            key,
            event,
            object: object.clone(),
            previous,
        });
        self.log.push_back(change.clone());
        while self.log.len() > self.window {
            if let Some(old) = self.log.pop_front() {
                self.compacted = old.rv;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(change);
        object
    }

    /// Forgets the whole change log, like an etcd compaction at the current
    /// revision: every older resourceVersion now answers 410 Gone.
    pub fn compact(&mut self) {
        self.log.clear();
        self.compacted = self.rv;
    }

    /// What a restart of the API server does to its watch cache: it is
    /// rebuilt at the current version, so watches can resume from it but not
    /// from anything older.
    pub fn restart_watch_cache(&mut self) {
        self.watch_floor = self.rv;
    }

    pub fn history(&self, key: &ObjKey) -> Vec<WriteRecord> {
        self.history.get(key).cloned().unwrap_or_default()
    }

    /// Keys of all objects in a namespace (any storage), for namespace
    /// deletion: one range per storage in use, not a scan of every object.
    pub fn keys_in_namespace(&self, namespace: &str) -> Vec<ObjKey> {
        let mut keys = Vec::new();
        let mut next = self.objects.keys().next().map(|k| k.storage.clone());
        while let Some(storage) = next {
            keys.extend(
                self.range(&storage, Some(namespace))
                    .map(|(k, _)| k.clone()),
            );
            let after = ObjKey {
                storage: StorageId {
                    group: storage.group.clone(),
                    resource: format!("{}\u{0}", storage.resource),
                },
                namespace: String::new(),
                name: String::new(),
            };
            next = self
                .objects
                .range((Bound::Included(after), Bound::Unbounded))
                .next()
                .map(|(k, _)| k.storage.clone());
        }
        keys
    }

    /// Whether a namespace holds no object at all.
    pub fn namespace_is_empty(&self, namespace: &str) -> bool {
        self.per_namespace.get(namespace).is_none_or(|n| *n == 0)
    }

    /// Keys of all objects of one storage, for CRD deletion.
    pub fn keys_of(&self, storage: &StorageId) -> Vec<ObjKey> {
        self.range(storage, None).map(|(k, _)| k.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> ObjKey {
        ObjKey {
            storage: StorageId {
                group: "g".into(),
                resource: "things".into(),
            },
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn how() -> WriteMeta {
        WriteMeta {
            operation: Operation::Create,
            subresource: None,
            field_manager: None,
        }
    }

    #[test]
    fn snapshots_and_compaction() {
        let mut s = Store::new(100, true);
        let storage = key("a").storage;
        s.commit(
            key("a"),
            EventType::Added,
            json!({"metadata": {"name": "a"}, "v": 1}),
            how(),
        );
        let rv_a = s.current_rv();
        s.commit(
            key("a"),
            EventType::Modified,
            json!({"metadata": {"name": "a"}, "v": 2}),
            how(),
        );
        s.commit(
            key("b"),
            EventType::Added,
            json!({"metadata": {"name": "b"}}),
            how(),
        );
        let then = s.list_at(&storage, None, rv_a).expect("in window");
        assert_eq!(then.len(), 1);
        assert_eq!(then[0]["v"], 1);
        assert_eq!(s.changes_since(rv_a).expect("in window").len(), 2);
        s.compact();
        assert!(s.list_at(&storage, None, rv_a).is_err());
        assert!(s.changes_since(rv_a).is_err());
        assert!(s.changes_since(s.current_rv()).expect("now").is_empty());
    }
}
