//! DELETE and deletecollection, as kube-apiserver's generic registry
//! answers them:
//!
//! * `DeleteOptions` come from the body, else from the query, and are
//!   checked first (`propagationPolicy` xor `orphanDependents`, `dryRun`);
//!   preconditions are checked against the stored object;
//! * what happens to the object (marked or removed, and what follows) is
//!   `removal`'s;
//! * an object removed at once is answered with a `Status` (Success, with
//!   name, group, resource and uid), not with the object.

use serde_json::{Value, json};

use super::error::{ApiError, GroupResource};
use super::keys::ObjKey;
use super::meta;
use super::options;
use super::removal::{Deleted, Propagation, delete_key};
use super::request::{Reply, Request};
use super::resources::ResourceType;
use super::selectors::Filter;
use super::state::State;
use super::store::Operation;

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
            meta::strings(body.get("dryRun"))
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

pub fn delete(state: &mut State, req: &Request<'_>, body: &Value) -> Result<Reply, ApiError> {
    let opts = DeleteOptions::parse(req, body)?;
    let (key, stored) = req.current(state)?;
    let rt = req.rt.clone();
    // Named `Kind.group`, as the registry's early precondition check names it.
    let conflict = |detail: String| ApiError::Conflict {
        resource: GroupResource {
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
        .map(|o| ObjKey::of_object(&req.rt.storage, o))
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
