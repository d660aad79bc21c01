//! The garbage collector of kube-controller-manager, for `ownerReferences`.
//!
//! A real cluster deletes an object's dependents after the object is gone
//! from storage; controllers rely on it (a custom resource's ConfigMaps and
//! Leases go with it) and tests of them must see it happen. Like the real
//! one, this collector runs apart from the requests, after the owner's
//! deletion was answered, so clients see the owner's `DELETED` before the
//! dependents' and must not assume the dependents are gone when the DELETE
//! returns.
//!
//! * An object whose owners (by `uid`) are all gone is deleted (background
//!   propagation: its own dependents follow once it is gone). If some owners
//!   remain, only the dangling references are removed.
//! * `propagationPolicy: Orphan` (finalizer `orphan`): the references to the
//!   owner are removed from its dependents, then the finalizer.
//! * `propagationPolicy: Foreground` (finalizer `foregroundDeletion`): the
//!   dependents are deleted (in the foreground too), and the finalizer is
//!   removed once none is left.
//!
//! Approximations: an owner is found by `uid` alone (the real collector also
//! checks kind and name, and treats a namespaced owner in another namespace
//! as absent); `blockOwnerDeletion` is not looked at: in the foreground every
//! dependent holds the owner back. An owner of a kind the emulator does not
//! serve (a Pod, a Deployment) is never taken for absent, as the real
//! collector cannot resolve such a kind either and deletes nothing.
//!
//! It works from the ownership graph (`owner_graph`), an index the store
//! keeps up to date on every commit, so it never scans all objects.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::keys::ObjKey;
use super::meta;
use super::owner_graph::{FOREGROUND, ORPHAN, uid};
use super::removal::{self, Propagation};
use super::shared::Shared;
use super::state::State;
use super::store::{EventType, Operation, WriteMeta};

fn how(operation: Operation) -> WriteMeta {
    WriteMeta {
        operation,
        subresource: None,
        field_manager: Some("generic-garbage-collector".into()),
    }
}

/// Does everything queued, cascades included.
pub fn collect(state: &mut State) {
    while let Some(key) = state.store.graph_mut().next_pending() {
        let Some(obj) = state.store.get(&key) else {
            continue;
        };
        let Some(object_uid) = uid(&obj).map(str::to_string) else {
            continue;
        };
        if meta::is_deleting(&obj) {
            let finalizers = meta::finalizers(&obj);
            if finalizers.iter().any(|f| f == ORPHAN) {
                orphan_dependents(state, &object_uid);
                release(state, &key, ORPHAN);
                continue;
            }
            if finalizers.iter().any(|f| f == FOREGROUND) {
                delete_dependents(state, &object_uid);
                if state.store.graph().dependents_of(&object_uid).is_empty() {
                    release(state, &key, FOREGROUND);
                }
                continue;
            }
        }
        drop_dangling(state, &key, &obj);
    }
}

/// Owner references as (uid, whether that owner may still exist): it does,
/// or it is of a kind this emulator does not serve.
fn owners_alive(state: &State, obj: &Value) -> Vec<(String, bool)> {
    let refs = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    refs.iter()
        .filter_map(|r| {
            let uid = r.get("uid").and_then(Value::as_str)?;
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            let alive = state.store.graph().is_live(uid)
                || !state.registry.serves_kind(text("apiVersion"), text("kind"));
            Some((uid.to_string(), alive))
        })
        .collect()
}

/// Deletes the object if none of its owners is left, else forgets the
/// owners that are gone.
fn drop_dangling(state: &mut State, key: &ObjKey, obj: &Value) {
    let owners = owners_alive(state, obj);
    let (solid, dangling): (Vec<_>, Vec<_>) = owners.iter().partition(|(_, alive)| *alive);
    if dangling.is_empty() {
        return;
    }
    if solid.is_empty() {
        if !meta::is_deleting(obj)
            && let Some(rt) = state.registry.by_storage(&key.storage)
        {
            removal::delete_key(
                state,
                &rt,
                key,
                how(Operation::Delete),
                false,
                Propagation::Background,
            );
        }
        return;
    }
    let kept: Vec<&String> = solid.into_iter().map(|(uid, _)| uid).collect();
    rewrite_owner_refs(state, key, obj, |uid| kept.iter().any(|k| *k == uid));
}

/// Orphan: the dependents keep living, without the reference to the owner.
fn orphan_dependents(state: &mut State, owner_uid: &str) {
    for dep in state.store.graph().dependents_of(owner_uid) {
        if let Some(obj) = state.store.get(&dep) {
            rewrite_owner_refs(state, &dep, &obj, |uid| uid != owner_uid);
        }
    }
}

/// Foreground: delete every dependent not already on its way out.
fn delete_dependents(state: &mut State, owner_uid: &str) {
    for dep in state.store.graph().dependents_of(owner_uid) {
        let Some(obj) = state.store.get(&dep) else {
            continue;
        };
        if meta::is_deleting(&obj) {
            continue;
        }
        if let Some(rt) = state.registry.by_storage(&dep.storage) {
            removal::delete_key(
                state,
                &rt,
                &dep,
                how(Operation::Delete),
                false,
                Propagation::Foreground,
            );
        }
    }
}

/// Keeps the owner references whose uid `keep` accepts.
fn rewrite_owner_refs(state: &mut State, key: &ObjKey, obj: &Value, keep: impl Fn(&str) -> bool) {
    let mut updated = obj.clone();
    let refs: Vec<Value> = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r.get("uid").and_then(Value::as_str).is_some_and(&keep))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    meta::set_meta(&mut updated, "ownerReferences", json!(refs));
    meta::drop_empty_metadata(&mut updated);
    if updated != *obj {
        state.store.commit(
            key.clone(),
            EventType::Modified,
            updated,
            how(Operation::MergePatch),
        );
    }
}

/// Removes the collector's finalizer; the object goes if it was the last.
fn release(state: &mut State, key: &ObjKey, finalizer: &str) {
    let Some(obj) = state.store.get(key) else {
        return;
    };
    let mut updated = (*obj).clone();
    let rest: Vec<String> = meta::finalizers(&obj)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    if rest.is_empty() {
        if let Some(rt) = state.registry.by_storage(&key.storage) {
            removal::remove(state, &rt, key, updated, how(Operation::MergePatch));
        }
        return;
    }
    meta::set_meta(&mut updated, "finalizers", json!(rest));
    state.store.commit(
        key.clone(),
        EventType::Modified,
        updated,
        how(Operation::MergePatch),
    );
}

/// The collector's task: wakes when work is queued, stops with the server.
pub async fn run(
    shared: Arc<Shared>,
    wake: Arc<Notify>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = wake.notified() => collect(&mut shared.lock()),
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
