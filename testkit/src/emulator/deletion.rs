//! DELETE and deletecollection, as kube-apiserver's generic registry does
//! them:
//!
//! * `DeleteOptions` come from the body, else from the query, and are
//!   checked first (`propagationPolicy` xor `orphanDependents`, `dryRun`);
//!   preconditions are checked against the stored object;
//! * the garbage-collection policy becomes a finalizer: `Orphan` adds
//!   `orphan`, `Foreground` adds `foregroundDeletion`, `Background` removes
//!   both (the garbage collector, `gc`, does the rest);
//! * an object with finalizers is only marked (`deletionTimestamp`, grace 0,
//!   `generation` + 1); the removal of its last finalizer deletes it;
//! * an object removed at once is answered with a `Status` (Success, with
//!   name, group, resource and uid), not with the object;
//! * follow-ups of a removal: a CRD takes its objects with it; the last
//!   object of a terminating namespace lets the namespace go; deleting a
//!   namespace deletes its contents (the namespace controller).

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::ApiError;
use super::handlers::{self, Filter, Reply, Request, State};
use super::meta;
use super::options;
use super::resources::ResourceType;
use super::store::{EventType, ObjKey, Operation, WriteMeta};

/// The garbage collector's finalizer for `propagationPolicy: Orphan`.
pub const ORPHAN: &str = "orphan";
/// The garbage collector's finalizer for `propagationPolicy: Foreground`.
pub const FOREGROUND: &str = "foregroundDeletion";

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

/// The parts of `DeleteOptions` the emulator acts on.
#[derive(Debug)]
struct DeleteOptions {
    propagation: Propagation,
    dry_run: bool,
    uid: Option<String>,
    resource_version: Option<String>,
}

impl DeleteOptions {
    /// From the body when there is one, else from the query parameters.
    fn parse(req: &Request<'_>, body: &Value) -> Result<Self, ApiError> {
        let from_body = !body.is_null();
        let text = |key: &str| -> Option<String> {
            if from_body {
                body.get(key).and_then(Value::as_str).map(str::to_string)
            } else {
                req.q(key).map(str::to_string)
            }
        };
        let policy = text("propagationPolicy");
        let orphan = if from_body {
            body.get("orphanDependents").and_then(Value::as_bool)
        } else {
            req.q("orphanDependents").map(|v| v == "true")
        };
        let dry_run: Vec<String> = if from_body {
            body.get("dryRun")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            req.q("dryRun").map(str::to_string).into_iter().collect()
        };
        let shown: Vec<&str> = dry_run.iter().map(String::as_str).collect();
        options::check_delete(policy.as_deref(), orphan, &shown)?;
        let propagation = match (policy.as_deref(), orphan) {
            (Some("Foreground"), _) => Propagation::Foreground,
            (Some("Orphan"), _) | (None, Some(true)) => Propagation::Orphan,
            (Some(_), _) | (None, Some(false)) => Propagation::Background,
            (None, None) => Propagation::Unset,
        };
        let precondition = |field: &str| {
            body.pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        Ok(Self {
            propagation,
            dry_run: !dry_run.is_empty(),
            uid: precondition("uid"),
            resource_version: precondition("resourceVersion"),
        })
    }
}

/// The finalizers after a delete with `propagation`.
fn gc_finalizers(existing: Vec<String>, propagation: Propagation) -> Vec<String> {
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

pub fn delete(state: &mut State, req: &Request<'_>, body: &Value) -> Result<Reply, ApiError> {
    let opts = DeleteOptions::parse(req, body)?;
    let (key, stored) = handlers::current(state, req)?;
    let rt = req.rt.clone();
    // Named `Kind.group`, as the registry's early precondition check names it.
    let conflict = |detail: String| ApiError::Conflict {
        resource: super::error::GroupResource {
            group: rt.group.clone(),
            resource: rt.kind.clone(),
        },
        name: key.name.clone(),
        detail,
    };
    let uid = meta::meta_str(&stored, "uid").unwrap_or_default();
    if let Some(expected) = opts.uid.as_deref().filter(|e| *e != uid) {
        return Err(conflict(format!(
            "the UID in the precondition ({expected}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )));
    }
    let stored_rv = meta::resource_version(&stored).unwrap_or_default();
    if let Some(expected) = opts.resource_version.as_deref().filter(|e| *e != stored_rv) {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({expected}) does not match the ResourceVersion in record ({stored_rv}). The object might have been modified"
        )));
    }
    let dry_run = req.dry_run() || opts.dry_run;
    let how = req.meta(Operation::Delete, None);
    let body = match delete_key(state, &rt, &key, how, dry_run, opts.propagation) {
        Some(Deleted {
            removed: false,
            object,
        }) => rt.to_view(&object),
        _ => removed_status(&rt, &key.name, uid),
    };
    Ok(Reply::ok(body))
}

/// What a delete that removed the object answers.
fn removed_status(rt: &ResourceType, name: &str, uid: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": uid},
    })
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
    let is_namespace = rt.storage == handlers::ns_storage();
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
    if handlers::is_crd(rt) {
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
        storage: handlers::ns_storage(),
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

pub fn delete_collection(
    state: &mut State,
    req: &Request<'_>,
    body: &Value,
) -> Result<Reply, ApiError> {
    if req.rt.namespaced && req.namespace.is_none() {
        return Err(ApiError::MethodNotAllowed);
    }
    options::check_list(req.query, false)?;
    let opts = DeleteOptions::parse(req, body)?;
    let filter = Filter::from_query(&req.rt, req.query)?;
    let keys: Vec<ObjKey> = state
        .store
        .list(&req.rt.storage, req.namespace.as_deref())
        .iter()
        .filter(|o| filter.matches(o))
        .map(|o| ObjKey {
            storage: req.rt.storage.clone(),
            namespace: meta::namespace(o).unwrap_or_default().to_string(),
            name: meta::name(o).unwrap_or_default().to_string(),
        })
        .collect();
    let dry_run = req.dry_run() || opts.dry_run;
    let mut items = Vec::new();
    for key in keys {
        if let Some(done) = delete_key(
            state,
            &req.rt,
            &key,
            req.meta(Operation::Delete, None),
            dry_run,
            opts.propagation,
        ) {
            items.push(req.rt.to_view(&done.object));
        }
    }
    Ok(Reply::ok(json!({
        "kind": req.rt.list_kind,
        "apiVersion": req.rt.api_version(),
        "metadata": {"resourceVersion": state.store.current_rv().to_string()},
        "items": items,
    })))
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
