//! PUT, and the common tail of every write to an existing object (PUT,
//! PATCH, server-side apply), with kube-apiserver's semantics for what a
//! write may change:
//!
//! * the server owns `uid`, `creationTimestamp`, `resourceVersion`,
//!   `generation`, `deletionTimestamp` and `managedFields`;
//! * with a status subresource, writes to the main resource keep the stored
//!   `status` and writes to `/status` keep everything but `status`;
//! * `metadata.generation` is bumped only when something other than
//!   `metadata` and `status` changes;
//! * a stale `resourceVersion` is a `409 Conflict`; a no-op write is not
//!   stored and does not bump the resourceVersion;
//! * removing the last finalizer of an object marked for deletion deletes
//!   it (see `removal`);
//! * empty metadata fields are dropped as Go's `ObjectMeta` drops them.

use serde_json::{Value, json};

use super::body;
use super::builtins;
use super::error::{ApiError, FieldError};
use super::keys::ObjKey;
use super::meta;
use super::removal;
use super::request::{Reply, Request};
use super::resources::ResourceType;
use super::state::Locked;
use super::store::{EventType, Operation};
use super::validation::{self, Scope};

/// A write proposed for an existing object, before the server's rules apply.
pub struct Proposed<'a> {
    pub key: ObjKey,
    /// The object as read, API representation.
    pub old: &'a Value,
    /// What the client's write makes of it.
    pub candidate: Value,
    pub operation: Operation,
    pub manager: String,
    /// `managedFields` were already worked out (server-side apply); else
    /// the write is recorded as an Update of `manager`.
    pub managed_fields_done: bool,
}

pub fn update(state: &mut Locked<'_>, req: &Request<'_>, obj: Value) -> Result<Reply, ApiError> {
    body::check_type(&req.rt, &obj)?;
    let name = req.item_name()?;
    body::check_name(&obj, name)?;
    let key = req.key(name);
    let stored = state.store.get(&key);
    // A UID in the body is a storage precondition, checked before anything
    // else: against a missing object it fails too (409, not 404).
    if let Some(uid) = meta::meta_str(&obj, "uid").filter(|u| !u.is_empty()) {
        let actual = stored
            .as_deref()
            .and_then(|s| meta::meta_str(s, "uid"))
            .unwrap_or_default();
        if uid != actual {
            return Err(ApiError::precondition(
                &req.rt.group_resource(),
                name,
                &etcd_key(&req.rt, &key),
                uid,
                actual,
            ));
        }
    }
    let stored = stored.ok_or_else(|| ApiError::not_found(&req.rt.group_resource(), name))?;
    let mut obj = obj;
    body::settle_namespace(req, &mut obj)?;
    meta::set_meta(&mut obj, "name", Value::String(name.to_string()));
    let old = req.rt.to_view(&stored);
    match meta::resource_version(&obj) {
        None if !allows_unconditional_update(&req.rt) => {
            let rt = &req.rt;
            return Err(ApiError::Invalid {
                kind: rt.group_resource().to_string(),
                group: rt.group.clone(),
                kind_name: rt.plural.clone(),
                name: name.to_string(),
                causes: vec![FieldError::new(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )],
            });
        }
        Some(rv) if Some(rv) != meta::resource_version(&old) => {
            return Err(ApiError::stale(&req.rt.group_resource(), name));
        }
        _ => {}
    }
    let proposed = Proposed {
        key,
        old: &old,
        candidate: obj,
        operation: Operation::Update,
        manager: req.update_manager(),
        managed_fields_done: false,
    };
    finish_update(state, req, proposed)
}

/// The common tail of PUT, PATCH and apply on an existing object.
pub fn finish_update(
    state: &mut Locked<'_>,
    req: &Request<'_>,
    proposed: Proposed<'_>,
) -> Result<Reply, ApiError> {
    let rt = &req.rt;
    let old = proposed.old;
    let name = proposed.key.name.clone();
    if !proposed.candidate.is_object() {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    }
    check_uid(req, &name, old, &proposed.candidate)?;
    let mut new = onto_stored(req, old, proposed.candidate, proposed.managed_fields_done);
    let mut warnings = Vec::new();
    builtins::decode_check(rt, &new)?;
    builtins::default_builtin(rt, &mut new);
    body::prune(req, &mut new, &mut warnings)?;
    meta::drop_empty_metadata(&mut new);
    check_no_new_finalizers(rt, &name, old, &new)?;
    if rt.has_generation && spec_content(rt, old) != spec_content(rt, &new) {
        let generation = meta::generation(old).unwrap_or(0) + 1;
        meta::set_meta(&mut new, "generation", json!(generation));
    }
    let write = Prepared {
        key: proposed.key,
        old,
        manager: proposed.manager,
        managed_fields_done: proposed.managed_fields_done,
    };
    write.admit(state, req, &mut new)?;
    if new == *old {
        return Ok(Reply::with_warnings(200, old.clone(), warnings));
    }
    if req.dry_run() {
        return Ok(Reply::with_warnings(200, new, warnings));
    }
    let body = write.store(state, req, proposed.operation, new)?;
    Ok(Reply::with_warnings(200, body, warnings))
}

/// A PUT's UID was a precondition (checked by `update`); a patch that
/// changes it changes an immutable field. Status writes keep all metadata.
fn check_uid(
    req: &Request<'_>,
    name: &str,
    old: &Value,
    candidate: &Value,
) -> Result<(), ApiError> {
    if let (Some(uid), Some(old_uid)) =
        (meta::meta_str(candidate, "uid"), meta::meta_str(old, "uid"))
        && uid != old_uid
        && req.subresource() != "status"
    {
        return Err(validation::invalid(
            &req.rt,
            name,
            vec![FieldError::immutable(
                "metadata.uid",
                &Value::String(uid.to_string()),
            )],
        ));
    }
    Ok(())
}

/// `obj`'s `status` set to `status`, or removed when there is none.
fn set_status(obj: &mut Value, status: Option<&Value>) {
    match status {
        Some(s) => obj["status"] = s.clone(),
        None => {
            if let Some(map) = obj.as_object_mut() {
                map.remove("status");
            }
        }
    }
}

/// `metadata.<field>` of `to` made what it is in `from` (absent included).
fn copy_meta(from: &Value, to: &mut Value, field: &str) {
    match from.get("metadata").and_then(|m| m.get(field)) {
        Some(v) => meta::set_meta(to, field, v.clone()),
        None => meta::remove_meta(to, field),
    }
}

/// The candidate with what the write may not change taken from the stored
/// object: through `/status` only `status` (and the writer's
/// `managedFields`) changes; on the main resource a status subresource's
/// `status` stays; identity and server-set metadata always stay.
fn onto_stored(
    req: &Request<'_>,
    old: &Value,
    candidate: Value,
    managed_fields_done: bool,
) -> Value {
    let rt = &req.rt;
    let mut new = if req.subresource() == "status" {
        let mut n = old.clone();
        set_status(&mut n, candidate.get("status"));
        if managed_fields_done && let Some(m) = candidate.pointer("/metadata/managedFields") {
            meta::set_meta(&mut n, "managedFields", m.clone());
        }
        n
    } else {
        let mut n = candidate;
        if rt.status_subresource {
            set_status(&mut n, old.get("status"));
        }
        n
    };
    new["apiVersion"] = Value::String(rt.api_version());
    new["kind"] = Value::String(rt.kind.clone());
    for field in meta::SERVER_OWNED {
        copy_meta(old, &mut new, field);
    }
    if !managed_fields_done {
        copy_meta(old, &mut new, "managedFields");
    }
    new
}

/// An object being deleted may lose finalizers, never gain one.
fn check_no_new_finalizers(
    rt: &ResourceType,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    if !meta::is_deleting(old) {
        return Ok(());
    }
    let before = meta::finalizers(old);
    let added: Vec<String> = meta::finalizers(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(validation::invalid(
        rt,
        name,
        vec![FieldError::forbidden(
            "metadata.finalizers",
            &format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                added
                    .iter()
                    .map(|f| format!("{f:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )],
    ))
}

/// A write the server's rules were applied to, on its way to admission
/// and storage.
struct Prepared<'a> {
    key: ObjKey,
    old: &'a Value,
    manager: String,
    managed_fields_done: bool,
}

impl Prepared<'_> {
    /// What only depends on the object as read (field ownership, schema and
    /// CEL validation: most of a write's work) runs with the state unlocked,
    /// so that writes to other objects go on meanwhile; the write is then
    /// committed only if the object is still the one read, else redone
    /// (`Shared::write`), as the API server validates before its storage
    /// transaction and commits with a compare-and-swap on the revision.
    fn admit(
        &self,
        state: &mut Locked<'_>,
        req: &Request<'_>,
        new: &mut Value,
    ) -> Result<(), ApiError> {
        let rt = &req.rt;
        let scope = if req.subresource() == "status" {
            Scope::Status
        } else {
            Scope::Object
        };
        let admitted = Locked::unlocked(state, || {
            if !self.managed_fields_done {
                let now = meta::now_rfc3339();
                let api_version = rt.api_version();
                req.writer(&self.manager, &api_version, &now)
                    .record_update(Some(self.old), new);
            }
            if rt.is_crd() {
                validation::check_crd(rt, new)?;
            }
            validation::admit(rt, new, Some(self.old), scope)
        });
        let still = state.store.get(&self.key);
        if still.as_deref().and_then(meta::resource_version) != meta::resource_version(self.old) {
            return Err(ApiError::Raced {
                resource: rt.group_resource(),
                name: self.key.name.clone(),
            });
        }
        admitted
    }

    /// Commits the write; returns the body to answer with.
    fn store(
        self,
        state: &mut Locked<'_>,
        req: &Request<'_>,
        operation: Operation,
        new: Value,
    ) -> Result<Value, ApiError> {
        let rt = &req.rt;
        let how = req.meta(operation, Some(self.manager));
        if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() {
            // The last finalizer is gone: the object goes. Storage deletes it as
            // it was last stored (watchers see that state), while the writer is
            // answered with the object its write produced, finalizers gone.
            let stored = state
                .store
                .get(&self.key)
                .map(|s| (*s).clone())
                .unwrap_or_else(|| rt.to_storage(self.old));
            removal::remove(state, rt, &self.key, stored, how);
            return Ok(new);
        }
        let stored = state
            .store
            .commit(self.key, EventType::Modified, rt.to_storage(&new), how);
        if rt.is_crd() {
            state.register_crd(&stored)?;
        }
        Ok(rt.to_view(&stored))
    }
}

/// Content outside `metadata` (and `status`, with a status subresource).
fn spec_content(rt: &ResourceType, obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(map) = v.as_object_mut() {
        map.remove("metadata");
        map.remove("apiVersion");
        map.remove("kind");
        if rt.status_subresource {
            map.remove("status");
        }
    }
    v
}

/// Whether a PUT without `resourceVersion` overwrites unconditionally:
/// never for custom resources and CRDs, always for the built-ins served here.
fn allows_unconditional_update(rt: &ResourceType) -> bool {
    !rt.custom && !rt.is_crd()
}

/// The object's etcd key, as storage errors quote it.
fn etcd_key(rt: &ResourceType, key: &ObjKey) -> String {
    let prefix = if rt.custom || rt.is_crd() {
        format!("{}/{}", rt.storage.group, rt.storage.resource)
    } else {
        rt.storage.resource.clone()
    };
    if key.namespace.is_empty() {
        format!("/registry/{prefix}/{}", key.name)
    } else {
        format!("/registry/{prefix}/{}/{}", key.namespace, key.name)
    }
}
