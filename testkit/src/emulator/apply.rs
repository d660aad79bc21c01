//! Server-side apply (PATCH with `application/apply-patch+yaml`): creates
//! the object when it is missing, else merges the applied configuration
//! with field ownership (`fieldmanager`) and finishes as every update does.

use serde_json::Value;

use super::body;
use super::create::{commit_create, prepare_create};
use super::error::ApiError;
use super::fieldmanager::Writer;
use super::meta;
use super::request::{Reply, Request};
use super::state::Locked;
use super::store::Operation;
use super::update::{Proposed, finish_update};

/// Server-side apply: create when missing, else merge with field ownership.
pub fn apply(
    state: &mut Locked<'_>,
    req: &Request<'_>,
    name: &str,
    mut applied: Value,
) -> Result<Reply, ApiError> {
    // Present: the options check requires it for apply.
    let manager = req.q("fieldManager").unwrap_or_default().to_string();
    body::check_type(&req.rt, &applied)?;
    body::check_name(&applied, name)?;
    meta::set_meta(&mut applied, "name", Value::String(name.to_string()));
    body::settle_namespace(req, &mut applied)?;
    let mut warnings = Vec::new();
    // Unknown fields in an applied configuration are neither stored nor owned.
    body::prune_applied(req, &mut applied, &mut warnings)?;
    let force = req.q("force") == Some("true");
    let api_version = req.rt.api_version();
    let now = meta::now_rfc3339();
    let writer = req.writer(&manager, &api_version, &now);
    let apply = |live: Option<&Value>, applied: &Value| {
        writer
            .apply(live, applied, force)
            .map_err(|conflicts| ApiError::ApplyConflict {
                resource: req.rt.group_resource(),
                name: name.to_string(),
                conflicts,
            })
    };
    let key = req.key(name);
    let Some(stored) = state.store.get(&key) else {
        if req.subresource.is_some() {
            return Err(ApiError::not_found(&req.rt.group_resource(), name));
        }
        let merged = apply(None, &applied)?;
        return create_applied(state, req, merged, warnings, &manager);
    };
    let old = req.rt.to_view(&stored);
    body::check_resource_version(req, name, &applied, &old)?;
    let mut applied_clean = applied.clone();
    meta::remove_meta(&mut applied_clean, "resourceVersion");
    let merged = apply(Some(&old), &applied_clean)?;
    let proposed = Proposed {
        key,
        old: &old,
        candidate: merged,
        operation: Operation::Apply,
        manager,
        managed_fields_done: true,
    };
    let mut reply = finish_update(state, req, proposed)?;
    reply.warnings.extend(warnings);
    Ok(reply)
}

/// An apply to a missing object creates it, owned as the apply worked out.
fn create_applied(
    state: &mut Locked<'_>,
    req: &Request<'_>,
    merged: Value,
    mut warnings: Vec<String>,
    manager: &str,
) -> Result<Reply, ApiError> {
    let managed = merged.pointer("/metadata/managedFields").cloned();
    let created = prepare_create(
        state,
        req,
        merged,
        &mut warnings,
        |_: &Writer<'_>, new: &mut Value| {
            if let Some(m) = managed {
                meta::set_meta(new, "managedFields", m);
            }
        },
        manager,
    )?;
    let view = commit_create(state, req, created, Operation::Apply, manager.to_string())?;
    Ok(Reply::with_warnings(201, view, warnings))
}
