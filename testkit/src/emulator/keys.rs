//! How stored objects are identified: by the storage they live in (shared
//! by the API resources that represent the same objects) and by namespace
//! and name within it. The store, its ownership graph and every verb speak
//! these keys, so they sit below all of them.

use serde_json::Value;

use super::meta;

/// Where objects of a resource are stored. Two API resources can share one
/// storage: `events.k8s.io/v1` events and core `v1` events are the same
/// objects seen through two representations, as in kube-apiserver.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageId {
    pub group: String,
    pub resource: String,
}

impl StorageId {
    /// The storage of core `v1` Namespaces, which the namespace controller
    /// and every namespaced write look up.
    pub fn namespaces() -> Self {
        Self {
            group: String::new(),
            resource: "namespaces".into(),
        }
    }
}

/// Storage key: resource storage, namespace (empty for cluster scope), name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub storage: StorageId,
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    /// The key of a stored object, read from its own metadata.
    pub fn of_object(storage: &StorageId, obj: &Value) -> Self {
        Self {
            storage: storage.clone(),
            namespace: meta::namespace(obj).unwrap_or_default().to_string(),
            name: meta::name(obj).unwrap_or_default().to_string(),
        }
    }
}
