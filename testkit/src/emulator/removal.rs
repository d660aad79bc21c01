//! Deleting one stored object, as kube-apiserver's generic registry and the
//! controllers behind it do, for the DELETE verbs (`deletion`), the garbage
//! collector (`gc`) and writes that remove the last finalizer:
//!
//! * the garbage-collection policy becomes a finalizer: `Orphan` adds
//!   `orphan`, `Foreground` adds `foregroundDeletion`, `Background` removes
//!   both (the garbage collector does the rest);
//! * an object with finalizers is only marked (`deletionTimestamp`, grace 0,
//!   `generation` + 1); the removal of its last finalizer deletes it;
//! * follow-ups of a removal: a CRD takes its objects with it; the last
//!   object of a terminating namespace lets the namespace go; deleting a
//!   namespace deletes its contents (the namespace controller).

use std::sync::Arc;

use serde_json::{Value, json};

use super::keys::{ObjKey, StorageId};
use super::meta;
use super::owner_graph::{FOREGROUND, ORPHAN};
use super::resources::ResourceType;
use super::state::State;
use super::store::{EventType, Operation, WriteMeta};

/// What a delete asked the garbage collector to do with dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// No policy given: the object's own GC finalizer, if any, decides;
    /// otherwise background.
    Unset,
    Background,
    Foreground,
    Orphan,
}

/// The finalizers after a delete with `propagation`.
pub fn gc_finalizers(existing: Vec<String>, propagation: Propagation) -> Vec<String> {
    let added = match propagation {
        Propagation::Unset => return existing,
        Propagation::Background => None,
        Propagation::Foreground => Some(FOREGROUND),
        Propagation::Orphan => Some(ORPHAN),
    };
    let mut out: Vec<String> = existing
        .into_iter()
        .filter(|f| f != ORPHAN && f != FOREGROUND)
        .collect();
    out.extend(added.map(str::to_string));
    out
}

/// What a delete did (or, dry, would have done) to one object.
#[derive(Debug)]
pub struct Deleted {
    /// The object marked, or as it was removed.
    pub object: Value,
    /// Gone from storage, not just marked.
    pub removed: bool,
}

/// Deletes one object: marks it when it has (or the policy gives it)
/// finalizers, removes it otherwise. None when there is no such object.
pub fn delete_key(
    state: &mut State,
    rt: &Arc<ResourceType>,
    key: &ObjKey,
    how: WriteMeta,
    dry_run: bool,
    propagation: Propagation,
) -> Option<Deleted> {
    let stored = state.store.get(key)?;
    let mut obj = (*stored).clone();
    let is_namespace = rt.storage == StorageId::namespaces();
    if !is_namespace {
        let before = meta::finalizers(&obj);
        let after = gc_finalizers(before.clone(), propagation);
        if after != before {
            meta::set_meta(&mut obj, "finalizers", json!(after));
        }
    }
    let has_finalizers = !meta::finalizers(&obj).is_empty()
        || (is_namespace
            && obj
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty()));
    if !has_finalizers {
        let object = if dry_run {
            obj
        } else {
            remove(state, rt, key, obj, how)
        };
        return Some(Deleted {
            object,
            removed: true,
        });
    }
    if !meta::is_deleting(&obj) {
        meta::set_meta(
            &mut obj,
            "deletionTimestamp",
            Value::String(meta::now_rfc3339()),
        );
        meta::set_meta(&mut obj, "deletionGracePeriodSeconds", json!(0));
        // Controllers must notice that the object is going away.
        if let Some(generation) = meta::generation(&obj).filter(|g| *g > 0) {
            meta::set_meta(&mut obj, "generation", json!(generation + 1));
        }
        if is_namespace {
            obj["status"] = json!({"phase": "Terminating"});
        }
    }
    meta::drop_empty_metadata(&mut obj);
    let marked = |object| Deleted {
        object,
        removed: false,
    };
    if dry_run || obj == *stored {
        return Some(marked(obj));
    }
    let committed = state
        .store
        .commit(key.clone(), EventType::Modified, obj, how);
    if is_namespace {
        // Answered as marked, as the real server answers: its namespace
        // controller finishes the deletion later (here it may be at once).
        terminate_namespace(state, &key.name);
        let now = state.store.get(key).map(|o| (*o).clone());
        return Some(marked(now.unwrap_or_else(|| (*committed).clone())));
    }
    Some(marked((*committed).clone()))
}

/// Removes an object from storage and runs the follow-ups; returns it as
/// removed (stamped with the deletion's resourceVersion).
pub fn remove(
    state: &mut State,
    rt: &ResourceType,
    key: &ObjKey,
    last: Value,
    how: WriteMeta,
) -> Value {
    let gone = state
        .store
        .commit(key.clone(), EventType::Deleted, last, how);
    after_delete(state, rt, key);
    (*gone).clone()
}

/// Follow-ups of a removal: a CRD takes its resources and objects with it;
/// the last object of a terminating namespace lets the namespace go.
fn after_delete(state: &mut State, rt: &ResourceType, key: &ObjKey) {
    if rt.is_crd() {
        if let Some(storage) = state.registry.remove_crd(&key.name) {
            let mut namespaces = std::collections::BTreeSet::new();
            for k in state.store.keys_of(&storage) {
                if let Some(obj) = state.store.get(&k) {
                    let how = WriteMeta {
                        operation: Operation::Delete,
                        subresource: None,
                        field_manager: None,
                    };
                    namespaces.insert(k.namespace.clone());
                    state
                        .store
                        .commit(k, EventType::Deleted, (*obj).clone(), how);
                }
            }
            for ns in namespaces.iter().filter(|ns| !ns.is_empty()) {
                finish_namespace_if_empty(state, ns);
            }
        }
        state.generation += 1;
    }
    if !key.namespace.is_empty() {
        finish_namespace_if_empty(state, &key.namespace);
    }
}

/// The namespace controller: delete everything in a terminating namespace.
fn terminate_namespace(state: &mut State, namespace: &str) {
    for key in state.store.keys_in_namespace(namespace) {
        let Some(rt) = state.registry.by_storage(&key.storage) else {
            continue;
        };
        let how = WriteMeta {
            operation: Operation::Delete,
            subresource: None,
            field_manager: Some("namespace-controller".into()),
        };
        // Objects with finalizers stay until their controllers release them.
        delete_key(state, &rt, &key, how, false, Propagation::Background);
    }
    finish_namespace_if_empty(state, namespace);
}

fn finish_namespace_if_empty(state: &mut State, namespace: &str) {
    let key = ObjKey {
        storage: StorageId::namespaces(),
        namespace: String::new(),
        name: namespace.to_string(),
    };
    let Some(ns) = state.store.get(&key) else {
        return;
    };
    if !meta::is_deleting(&ns) || !state.store.namespace_is_empty(namespace) {
        return;
    }
    let how = WriteMeta {
        operation: Operation::Delete,
        subresource: None,
        field_manager: Some("namespace-controller".into()),
    };
    let mut last = (*ns).clone();
    if let Some(spec) = last.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("finalizers");
    }
    state.store.commit(key, EventType::Deleted, last, how);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_become_finalizers() {
        let existing = vec!["example.com/cleanup".to_string(), ORPHAN.to_string()];
        assert_eq!(
            gc_finalizers(existing.clone(), Propagation::Unset),
            existing
        );
        assert_eq!(
            gc_finalizers(existing.clone(), Propagation::Background),
            vec!["example.com/cleanup"]
        );
        assert_eq!(
            gc_finalizers(existing, Propagation::Foreground),
            vec!["example.com/cleanup", FOREGROUND]
        );
    }
}
