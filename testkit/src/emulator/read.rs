//! The read verbs, get and list, as kube-apiserver 1.28 serves them: as the
//! object or list itself, or as a server-side `Table`; lists with
//! selectors, `limit`/`continue` pagination and `resourceVersion` +
//! `resourceVersionMatch` semantics.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::error::ApiError;
use super::keys::ObjKey;
use super::meta;
use super::options;
use super::request::{Reply, Request};
use super::selectors::Filter;
use super::state::State;
use super::store::TooOld;
use super::table;

pub fn get(state: &State, req: &Request<'_>) -> Result<Reply, ApiError> {
    let name = req.item_name()?;
    let stored = state
        .store
        .get(&req.key(name))
        .ok_or_else(|| ApiError::not_found(&req.rt.group_resource(), name))?;
    let view = req.rt.to_view(&stored);
    if table::wants_table(req.accept) {
        let rv = json!({"resourceVersion": meta::resource_version(&view).unwrap_or_default()});
        return Ok(as_table(req, &[view], rv));
    }
    Ok(Reply::ok(view))
}

/// Objects rendered as the `Table` the request asked for.
fn as_table(req: &Request<'_>, views: &[Value], list_meta: Value) -> Reply {
    Reply::ok(table::render(
        &req.rt,
        views,
        list_meta,
        req.q("includeObject").unwrap_or("Metadata"),
    ))
}

const CONTINUE_VERSION: &str = "meta.k8s.io/v1";

fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let token = json!({"v": CONTINUE_VERSION, "rv": rv, "start": format!("{}/{}\u{0}", last.namespace, last.name)});
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

/// Where a continued list resumes: its snapshot's version and the last
/// (namespace, name) already served.
fn decode_continue(token: &str) -> Result<(u64, (String, String)), ApiError> {
    let bad = || ApiError::BadRequest(format!("invalid continue token: {token:?}"));
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(bad)?
        .trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

fn too_large(rv: u64, current: u64) -> ApiError {
    ApiError::Timeout(format!(
        "Too large resource version: {rv}, current: {current}"
    ))
}

/// The version a list is served at, and where a continued list resumes.
fn snapshot(
    req: &Request<'_>,
    current: u64,
    limit: Option<usize>,
) -> Result<(u64, Option<(String, String)>), ApiError> {
    if let Some(token) = req.q("continue") {
        let (rv, after) = decode_continue(token)?;
        return Ok((rv, Some(after)));
    }
    let rv = match (req.q("resourceVersion"), req.q("resourceVersionMatch")) {
        (None | Some("0"), _) => current,
        (Some(v), m) => {
            let rv = v
                .parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version {v:?}")))?;
            if rv > current {
                return Err(too_large(rv, current));
            }
            let exact = m == Some("Exact") || (m.is_none() && limit.is_some());
            if exact { rv } else { current }
        }
    };
    Ok((rv, None))
}

/// The answer to a list at a version that left the change log.
fn expired(continued: bool, e: TooOld) -> ApiError {
    if !continued {
        return e.gone();
    }
    ApiError::Gone {
        message: "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
        continue_token: None,
    }
}

/// A list, served the way kube-apiserver 1.28 serves it: `resourceVersion=0`
/// comes from the watch cache, which ignores `limit` (one page, no continue
/// token); an exact version, a legacy version with a `limit`, and `continue`
/// read a consistent snapshot from the change log, as etcd would.
pub fn list(state: &State, req: &Request<'_>) -> Result<Reply, ApiError> {
    options::check_list(req.query, false)?;
    let filter = Filter::from_query(&req.rt, req.query)?;
    let current = state.store.current_rv();
    let from_cache = req.q("resourceVersion") == Some("0") && req.q("continue").is_none();
    let limit = req
        .q("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0 && !from_cache);
    let (snapshot_rv, after) = snapshot(req, current, limit)?;
    let objects = state
        .store
        .list_at(&req.rt.storage, req.namespace.as_deref(), snapshot_rv)
        .map_err(|e| expired(after.is_some(), e))?;
    let mut items: Vec<&Arc<Value>> = objects
        .iter()
        .filter(|o| {
            after.as_ref().is_none_or(|(ns, name)| {
                let ons = meta::namespace(o).unwrap_or_default();
                let oname = meta::name(o).unwrap_or_default();
                (ons, oname) > (ns.as_str(), name.as_str())
            })
        })
        .filter(|o| filter.matches(o))
        .collect();
    let mut list_meta = json!({"resourceVersion": snapshot_rv.to_string()});
    if let Some(limit) = limit
        && items.len() > limit
    {
        let remaining = items.len() - limit;
        items.truncate(limit);
        if let Some(last) = items.last() {
            let key = ObjKey::of_object(&req.rt.storage, last);
            list_meta["continue"] = Value::String(encode_continue(snapshot_rv, &key));
            if !filter.has_selectors() {
                list_meta["remainingItemCount"] = json!(remaining);
            }
        }
    }
    let views: Vec<Value> = items.iter().map(|o| req.rt.to_view(o)).collect();
    if table::wants_table(req.accept) {
        return Ok(as_table(req, &views, list_meta));
    }
    Ok(Reply::ok(json!({
        "kind": req.rt.list_kind,
        "apiVersion": req.rt.api_version(),
        "metadata": list_meta,
        "items": views,
    })))
}
