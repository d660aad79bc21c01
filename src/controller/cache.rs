//! The controller's watch cache, trimmed of what the operator never reads.
//!
//! Every cached AssetScan would otherwise carry its `metadata.managedFields`
//! (about 22 KB each once a few managers have written it) and, when applied
//! with `kubectl apply`, a copy of itself in the last-applied annotation: at
//! 10 000 objects that is most of a replica's memory. Both are dropped as
//! each object arrives from the watch, before it enters the store. Nothing
//! the operator writes depends on them: status and finalizer patches carry
//! only their own fields, and conditional writes use the resourceVersion.

use crate::crd::AssetScan;
use futures::Stream;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

/// Set by `kubectl apply`: a full copy of the object the operator never reads.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops the fields of `obj` the operator never reads.
pub fn trim(obj: &mut AssetScan) {
    obj.metadata.managed_fields = None;
    if let Some(annotations) = obj.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            obj.metadata.annotations = None;
        }
    }
}

/// The store the controller reads and the stream of changed objects that
/// triggers its reconciles, both of trimmed objects.
pub fn trimmed_watch(
    api: Api<AssetScan>,
) -> (
    Store<AssetScan>,
    impl Stream<Item = Result<AssetScan, watcher::Error>> + Send + 'static,
) {
    let (reader, writer) = reflector::store();
    let objects = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(trim)
        .reflect(writer)
        .applied_objects();
    (reader, objects)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use std::collections::BTreeMap;

    #[test]
    fn trim_drops_managed_fields_and_last_applied_only() {
        let spec = serde_json::json!({"assetId": "asset-1", "target": {}});
        let mut obj = AssetScan::new("a", serde_json::from_value(spec).expect("spec"));
        obj.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        obj.metadata.annotations = Some(BTreeMap::from([
            (LAST_APPLIED.to_owned(), "{}".to_owned()),
            ("keep".to_owned(), "yes".to_owned()),
        ]));
        trim(&mut obj);
        assert_eq!(obj.metadata.managed_fields, None);
        assert_eq!(
            obj.metadata.annotations,
            Some(BTreeMap::from([("keep".to_owned(), "yes".to_owned())]))
        );
    }
}
