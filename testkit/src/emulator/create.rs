//! POST: creating an object, with what the server owns (`uid`,
//! `creationTimestamp`, `generation`, `managedFields`), `generateName`,
//! namespace defaulting, built-in defaults, pruning, admission and `409
//! AlreadyExists`. Server-side apply creates through the same steps.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::body;
use super::builtins;
use super::crd;
use super::error::{ApiError, GroupResource};
use super::fieldmanager::Writer;
use super::keys::{ObjKey, StorageId};
use super::meta;
use super::request::{Reply, Request};
use super::resources::ResourceType;
use super::state::State;
use super::store::{EventType, Operation};
use super::validation::{self, Scope};

pub fn create(state: &mut State, req: &Request<'_>, mut obj: Value) -> Result<Reply, ApiError> {
    // Namespaced kinds are created under /namespaces/<ns>/, never across namespaces.
    if req.name.is_some()
        || req.subresource.is_some()
        || (req.rt.namespaced && req.namespace.is_none())
    {
        return Err(ApiError::MethodNotAllowed);
    }
    body::check_type(&req.rt, &obj)?;
    body::settle_namespace(req, &mut obj)?;
    if meta::resource_version(&obj).is_some() {
        return Err(ApiError::BadRequest(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    let mut warnings = Vec::new();
    let manager = req.update_manager();
    let created = prepare_create(
        state,
        req,
        obj,
        &mut warnings,
        |w, new| w.record_update(None, new),
        &manager,
    )?;
    let view = commit_create(state, req, created, Operation::Create, manager)?;
    Ok(Reply::with_warnings(201, view, warnings))
}

/// Creates an object directly (startup seeding and `Emulator` helpers).
pub fn seed(state: &mut State, rt: Arc<ResourceType>, obj: Value) -> Result<Value, ApiError> {
    let query = HashMap::new();
    let req = Request {
        namespace: if rt.namespaced {
            meta::namespace(&obj).map(str::to_string)
        } else {
            None
        },
        rt,
        name: None,
        subresource: None,
        query: &query,
        user_agent: "kube-emulator",
        accept: "application/json",
        content_type: "application/json",
    };
    create(state, &req, obj).map(|r| r.body)
}

/// New content needs its namespace, and one that is not terminating.
fn namespace_check(state: &State, req: &Request<'_>) -> Result<(), ApiError> {
    let Some(ns) = req.namespace.as_deref() else {
        return Ok(());
    };
    let key = ObjKey {
        storage: StorageId::namespaces(),
        namespace: String::new(),
        name: ns.to_string(),
    };
    match state.store.get(&key) {
        None => Err(ApiError::not_found(
            &GroupResource {
                group: String::new(),
                resource: "namespaces".into(),
            },
            ns,
        )),
        Some(n) if meta::is_deleting(&n) => Err(ApiError::Forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            req.rt.group_resource(),
            req.name.as_deref().or(meta::name(&n)).unwrap_or_default()
        ))),
        Some(_) => Ok(()),
    }
}

/// A name from `generateName` that no stored object has.
fn generate_name(state: &State, req: &Request<'_>, prefix: &str) -> String {
    loop {
        let candidate = format!("{prefix}{}", meta::generate_name_suffix());
        if state.store.get(&req.key(&candidate)).is_none() {
            return candidate;
        }
    }
}

/// What the server sets on every new object: `uid`, `creationTimestamp`,
/// `generation` (where kept), and none of what only it may set later.
fn stamp_new(req: &Request<'_>, obj: &mut Value, now: &str) {
    let m = meta::meta_mut(obj);
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        m.remove(field);
    }
    m.insert("uid".into(), Value::String(meta::new_uid()));
    m.insert("creationTimestamp".into(), Value::String(now.to_string()));
    if req.rt.has_generation {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    if req.rt.status_subresource
        && !req.rt.is_crd()
        && req.rt.plural != "namespaces"
        && let Some(map) = obj.as_object_mut()
    {
        map.remove("status");
    }
}

/// Server-owned fields, defaulting, validation and name generation for a new object.
pub fn prepare_create(
    state: &State,
    req: &Request<'_>,
    mut obj: Value,
    warnings: &mut Vec<String>,
    record: impl FnOnce(&Writer<'_>, &mut Value),
    manager: &str,
) -> Result<Value, ApiError> {
    namespace_check(state, req)?;
    builtins::decode_check(&req.rt, &obj)?;
    if meta::name(&obj).is_none()
        && let Some(prefix) = meta::meta_str(&obj, "generateName").map(str::to_string)
    {
        let name = generate_name(state, req, &prefix);
        meta::set_meta(&mut obj, "name", Value::String(name));
    }
    let now = meta::now_rfc3339();
    stamp_new(req, &mut obj, &now);
    builtins::default_builtin(&req.rt, &mut obj);
    body::prune(req, &mut obj, warnings)?;
    meta::drop_empty_metadata(&mut obj);
    if req.rt.is_crd() {
        validation::check_crd(&req.rt, &obj)?;
        obj["status"] = crd::established_crd_status(&obj, &now);
    }
    let api_version = req.rt.api_version();
    record(&req.writer(manager, &api_version, &now), &mut obj);
    validation::admit(&req.rt, &obj, None, Scope::Object)?;
    let name = meta::name(&obj).unwrap_or_default();
    if state.store.get(&req.key(name)).is_some() {
        return Err(ApiError::AlreadyExists {
            resource: req.rt.group_resource(),
            name: name.to_string(),
        });
    }
    Ok(obj)
}

/// Stores a prepared object (unless dry) and returns it as the API shows it.
pub fn commit_create(
    state: &mut State,
    req: &Request<'_>,
    view: Value,
    operation: Operation,
    manager: String,
) -> Result<Value, ApiError> {
    if req.dry_run() {
        return Ok(view);
    }
    let name = meta::name(&view).unwrap_or_default().to_string();
    let stored = state.store.commit(
        req.key(&name),
        EventType::Added,
        req.rt.to_storage(&view),
        req.meta(operation, Some(manager)),
    );
    if req.rt.is_crd() {
        state.register_crd(&stored)?;
    }
    Ok(req.rt.to_view(&stored))
}
