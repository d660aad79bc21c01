//! The verbs: get, list, create, update (PUT), patch, delete and
//! deletecollection, with kube-apiserver's semantics for what a write may
//! change:
//!
//! * the server owns `uid`, `creationTimestamp`, `resourceVersion`,
//!   `generation`, `deletionTimestamp` and `managedFields`;
//! * with a status subresource, writes to the main resource keep the stored
//!   `status` and writes to `/status` keep everything but `status`;
//! * `metadata.generation` is bumped only when something other than
//!   `metadata` and `status` changes;
//! * a stale `resourceVersion` is a `409 Conflict`; a no-op write is not
//!   stored and does not bump the resourceVersion;
//! * objects with finalizers are only marked for deletion; removing the last
//!   finalizer of a marked object deletes it (see `deletion`);
//! * the request's options are checked first (see `options`), and empty
//!   metadata fields are dropped as Go's `ObjectMeta` drops them.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::deletion;
use super::error::{ApiError, FieldError};
use super::fieldmanager::Writer;
use super::meta;
use super::options::{self, OptionsKind};
use super::patch::{self, PatchType};
use super::resources::{self, ResourceType, StorageId};
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{EventType, ObjKey, Operation, Store, WriteMeta};
use super::table;
use super::validation::{self, Scope};

/// The emulator's state as its writers hold it: locked, and unlocked again
/// while a write is validated (see `finish_update`).
pub type Locked<'a> = parking_lot::MutexGuard<'a, State>;

/// Everything the emulator keeps, behind one lock: the registry and the store.
#[derive(Debug)]
pub struct State {
    pub registry: resources::Registry,
    pub store: Store,
    /// Bumped when the set of served resources changes (OpenAPI hash).
    pub generation: u64,
}

/// A successful answer: status code, body, `Warning` headers.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Reply {
    pub(super) fn ok(body: Value) -> Self {
        Self {
            code: 200,
            body,
            warnings: Vec::new(),
        }
    }
}

/// One resource request, parsed.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub query: &'a HashMap<String, String>,
    pub user_agent: &'a str,
    pub accept: &'a str,
    pub content_type: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl Request<'_> {
    pub(super) fn q(&self, k: &str) -> Option<&str> {
        self.query
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// `dryRun=All` (any other value was refused by the options check).
    pub(super) fn dry_run(&self) -> bool {
        self.q("dryRun") == Some("All")
    }

    fn field_validation(&self) -> FieldValidation {
        match self.q("fieldValidation") {
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }

    /// The manager of a non-apply write: `fieldManager`, else the user agent's
    /// program name, as kube-apiserver derives it.
    fn update_manager(&self) -> String {
        if let Some(m) = self.q("fieldManager") {
            return m.to_string();
        }
        let ua = self.user_agent.split('/').next().unwrap_or_default();
        ua.chars().take(128).collect()
    }

    pub(super) fn key(&self, name: &str) -> ObjKey {
        ObjKey {
            storage: self.rt.storage.clone(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_string(),
        }
    }

    fn item_name(&self) -> Result<&str, ApiError> {
        self.name.as_deref().ok_or(ApiError::MethodNotAllowed)
    }

    fn subresource(&self) -> &str {
        self.subresource.as_deref().unwrap_or_default()
    }

    pub(super) fn meta(&self, operation: Operation, manager: Option<String>) -> WriteMeta {
        WriteMeta {
            operation,
            subresource: self.subresource.clone(),
            field_manager: manager,
        }
    }
}

/// Parses a request body (JSON, or YAML for apply and `application/yaml`).
pub fn parse_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::BadRequest(
            "the body of the request was empty".into(),
        ));
    }
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !media.is_empty() && !media.ends_with("json") && !media.ends_with("yaml") {
        // Protobuf and CBOR are not spoken; clients fall back to JSON on 415.
        return Err(ApiError::UnsupportedMediaType {
            accepted: "application/json, application/yaml".into(),
        });
    }
    let yaml = media.contains("yaml");
    let parsed = if yaml {
        serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        ApiError::BadRequest(format!("the body of the request could not be decoded: {e}"))
    })
}

// ---------------------------------------------------------------- reads

pub fn get(state: &State, req: &Request<'_>) -> Result<Reply, ApiError> {
    let name = req.item_name()?;
    let stored = state
        .store
        .get(&req.key(name))
        .ok_or_else(|| ApiError::not_found(&req.rt.group_resource(), name))?;
    let view = req.rt.to_view(&stored);
    if table::wants_table(req.accept) {
        let rv = json!({"resourceVersion": meta::resource_version(&view).unwrap_or_default()});
        return Ok(Reply::ok(table::render(
            &req.rt,
            &[view],
            rv,
            req.q("includeObject").unwrap_or("Metadata"),
        )));
    }
    Ok(Reply::ok(view))
}

/// Selectors of a list or watch request.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    has_selectors: bool,
}

impl Filter {
    pub fn from_query(
        rt: &ResourceType,
        query: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        let label_sel = query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default();
        let field_sel = query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default();
        let mut supported = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
        ];
        supported.extend(rt.selectable_fields.iter().cloned());
        Ok(Self {
            labels: LabelSelector::parse(label_sel)?,
            fields: FieldSelector::parse(field_sel, &supported)?,
            has_selectors: !label_sel.is_empty() || !field_sel.is_empty(),
        })
    }

    /// Matches a stored object.
    pub fn matches(&self, stored: &Value) -> bool {
        self.labels.matches(&meta::labels(stored)) && self.fields.matches(stored)
    }
}

const CONTINUE_VERSION: &str = "meta.k8s.io/v1";

fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let token = json!({"v": CONTINUE_VERSION, "rv": rv, "start": format!("{}/{}\u{0}", last.namespace, last.name)});
    base64::engine::general_purpose::STANDARD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
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
    Ok((rv, ns.to_string(), name.to_string()))
}

fn too_large(rv: u64, current: u64) -> ApiError {
    ApiError::Timeout(format!(
        "Too large resource version: {rv}, current: {current}"
    ))
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
    let (snapshot_rv, after) = match req.q("continue") {
        Some(token) => {
            let (rv, ns, name) = decode_continue(token)?;
            (rv, Some((ns, name)))
        }
        None => {
            let rv = match (req.q("resourceVersion"), req.q("resourceVersionMatch")) {
                (None | Some("0"), _) => current,
                (Some(v), m) => {
                    let rv = v.parse::<u64>().map_err(|_| {
                        ApiError::BadRequest(format!("invalid resource version {v:?}"))
                    })?;
                    if rv > current {
                        return Err(too_large(rv, current));
                    }
                    let exact = m == Some("Exact") || (m.is_none() && limit.is_some());
                    if exact { rv } else { current }
                }
            };
            (rv, None)
        }
    };
    let objects = state.store.list_at(&req.rt.storage, req.namespace.as_deref(), snapshot_rv).map_err(|e| {
        if after.is_some() {
            ApiError::Gone {
                message: "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into(),
                continue_token: None,
            }
        } else {
            ApiError::Gone { message: format!("too old resource version: {} ({})", e.requested, e.oldest), continue_token: None }
        }
    })?;
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
            let key = req.key(meta::name(last).unwrap_or_default());
            let key = ObjKey {
                namespace: meta::namespace(last).unwrap_or_default().to_string(),
                ..key
            };
            list_meta["continue"] = Value::String(encode_continue(snapshot_rv, &key));
            if !filter.has_selectors {
                list_meta["remainingItemCount"] = json!(remaining);
            }
        }
    }
    let views: Vec<Value> = items.iter().map(|o| req.rt.to_view(o)).collect();
    if table::wants_table(req.accept) {
        return Ok(Reply::ok(table::render(
            &req.rt,
            &views,
            list_meta,
            req.q("includeObject").unwrap_or("Metadata"),
        )));
    }
    Ok(Reply::ok(json!({
        "kind": req.rt.list_kind,
        "apiVersion": req.rt.api_version(),
        "metadata": list_meta,
        "items": views,
    })))
}

// ---------------------------------------------------------------- shared write steps

/// Checks `apiVersion`/`kind` of a body against the endpoint.
fn check_type(rt: &ResourceType, body: &Value) -> Result<(), ApiError> {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "Object 'Kind' is missing in '{body}'"
        )));
    }
    if kind != rt.kind {
        return Err(ApiError::BadRequest(format!(
            "the kind of the provided object ({kind}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    let api_version = body
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version != rt.api_version() {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    Ok(())
}

/// Checks the body's namespace against the URL and defaults it.
fn settle_namespace(req: &Request<'_>, obj: &mut Value) -> Result<(), ApiError> {
    match (&req.namespace, meta::namespace(obj).map(str::to_string)) {
        (Some(url), Some(body)) if *url != body => Err(ApiError::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        (Some(url), _) => {
            meta::set_meta(obj, "namespace", Value::String(url.clone()));
            Ok(())
        }
        (None, _) => {
            meta::remove_meta(obj, "namespace");
            Ok(())
        }
    }
}

/// Prunes unknown fields and applies defaults (custom resources); answers
/// `fieldValidation=Strict` with 400 and `Warn` with warnings.
fn prune(req: &Request<'_>, obj: &mut Value, warnings: &mut Vec<String>) -> Result<(), ApiError> {
    let Some(schema) = &req.rt.schema else {
        return Ok(());
    };
    let unknown = schema.prune_and_default(obj);
    if unknown.is_empty() {
        return Ok(());
    }
    match req.field_validation() {
        FieldValidation::Strict => {
            let fields: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect();
            Err(ApiError::BadRequest(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                fields.join(", "),
                kind = req.rt.kind,
                version = req.rt.version,
            )))
        }
        FieldValidation::Warn => {
            warnings.extend(unknown.iter().map(|f| format!("unknown field {f:?}")));
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// Built-in kinds must decode as their Go types do: a `stringData` value
/// that is not a string is a 400, not silently stored. The k8s-openapi
/// types stand in for the Go structs.
fn decode_check(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    use k8s_openapi::api::{coordination::v1::Lease, core::v1, events::v1::Event as EventV1};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    fn check<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<(), String> {
        T::deserialize(obj).map(|_| ()).map_err(|e| e.to_string())
    }
    let result = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "configmaps") => check::<v1::ConfigMap>(obj),
        ("", "secrets") => check::<v1::Secret>(obj),
        ("", "namespaces") => check::<v1::Namespace>(obj),
        ("", "events") => check::<v1::Event>(obj),
        ("events.k8s.io", "events") => check::<EventV1>(obj),
        ("coordination.k8s.io", "leases") => check::<Lease>(obj),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            check::<CustomResourceDefinition>(obj)
        }
        _ => Ok(()),
    };
    result.map_err(|e| {
        ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {e}",
            kind = rt.kind,
            version = rt.version
        ))
    })
}

/// Built-in defaulting the operator's kinds need.
fn default_builtin(rt: &ResourceType, obj: &mut Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "secrets") => {
            if let Some(map) = obj.as_object_mut() {
                if let Some(Value::Object(string_data)) = map.remove("stringData") {
                    let data = map.entry("data").or_insert_with(|| json!({}));
                    for (k, v) in string_data {
                        let raw = v.as_str().unwrap_or_default();
                        data[k] =
                            Value::String(base64::engine::general_purpose::STANDARD.encode(raw));
                    }
                }
                map.entry("type").or_insert_with(|| json!("Opaque"));
            }
        }
        ("", "namespaces") => {
            // Set by kube-apiserver on every namespace since 1.21.
            if let Some(name) = meta::name(obj).map(str::to_string) {
                let labels = meta::meta_mut(obj)
                    .entry("labels")
                    .or_insert_with(|| json!({}));
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
                }
            }
            if obj.pointer("/spec/finalizers").is_none() {
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
            }
            if obj.pointer("/status/phase").is_none() {
                obj["status"] = json!({"phase": "Active"});
            }
        }
        _ => {}
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
    !rt.custom && !is_crd(rt)
}

/// The object's etcd key, as storage errors quote it.
fn etcd_key(rt: &ResourceType, key: &ObjKey) -> String {
    let prefix = if rt.custom || is_crd(rt) {
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

fn namespace_check(state: &State, req: &Request<'_>) -> Result<(), ApiError> {
    let Some(ns) = req.namespace.as_deref() else {
        return Ok(());
    };
    let key = ObjKey {
        storage: ns_storage(),
        namespace: String::new(),
        name: ns.to_string(),
    };
    match state.store.get(&key) {
        None => Err(ApiError::not_found(
            &super::error::GroupResource {
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

pub(super) fn ns_storage() -> StorageId {
    StorageId {
        group: String::new(),
        resource: "namespaces".into(),
    }
}

pub(super) fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

/// Validates a CRD body by parsing it the way the registry will.
fn check_crd(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    resources::parse_crd(obj).map(|_| ()).map_err(|e| {
        let name = meta::name(obj).unwrap_or_default();
        validation::invalid(
            rt,
            name,
            vec![FieldError::invalid(
                "spec",
                &Value::String("object".into()),
                &e.to_string(),
            )],
        )
    })
}

// ---------------------------------------------------------------- create

pub fn create(state: &mut State, req: &Request<'_>, mut obj: Value) -> Result<Reply, ApiError> {
    // Namespaced kinds are created under /namespaces/<ns>/, never across namespaces.
    if req.name.is_some()
        || req.subresource.is_some()
        || (req.rt.namespaced && req.namespace.is_none())
    {
        return Err(ApiError::MethodNotAllowed);
    }
    check_type(&req.rt, &obj)?;
    settle_namespace(req, &mut obj)?;
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
    Ok(Reply {
        code: 201,
        body: view,
        warnings,
    })
}

/// Server-owned fields, defaulting, validation and name generation for a new object.
fn prepare_create(
    state: &State,
    req: &Request<'_>,
    mut obj: Value,
    warnings: &mut Vec<String>,
    record: impl FnOnce(&Writer<'_>, &mut Value),
    manager: &str,
) -> Result<Value, ApiError> {
    namespace_check(state, req)?;
    decode_check(&req.rt, &obj)?;
    if meta::name(&obj).is_none()
        && let Some(prefix) = meta::meta_str(&obj, "generateName").map(str::to_string)
    {
        let name = loop {
            let candidate = format!("{prefix}{}", meta::generate_name_suffix());
            if state.store.get(&req.key(&candidate)).is_none() {
                break candidate;
            }
        };
        meta::set_meta(&mut obj, "name", Value::String(name));
    }
    let now = meta::now_rfc3339();
    let m = meta::meta_mut(&mut obj);
    for field in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    ] {
        m.remove(field);
    }
    m.insert("uid".into(), Value::String(meta::new_uid()));
    m.insert("creationTimestamp".into(), Value::String(now.clone()));
    if req.rt.has_generation {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    if req.rt.status_subresource
        && !is_crd(&req.rt)
        && req.rt.plural != "namespaces"
        && let Some(map) = obj.as_object_mut()
    {
        map.remove("status");
    }
    default_builtin(&req.rt, &mut obj);
    prune(req, &mut obj, warnings)?;
    meta::drop_empty_metadata(&mut obj);
    if is_crd(&req.rt) {
        check_crd(&req.rt, &obj)?;
        obj["status"] = resources::established_crd_status(&obj, &now);
    }
    let api_version = req.rt.api_version();
    let writer = Writer {
        manager,
        api_version: &api_version,
        subresource: req.subresource(),
        now: &now,
        schema: req.rt.schema.as_ref().map(|s| &s.root),
        status_subresource: req.rt.status_subresource,
    };
    record(&writer, &mut obj);
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

fn commit_create(
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
    if is_crd(&req.rt) {
        register_crd(state, &stored)?;
    }
    Ok(req.rt.to_view(&stored))
}

fn register_crd(state: &mut State, crd: &Value) -> Result<(), ApiError> {
    state
        .registry
        .add_crd(crd)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    state.generation += 1;
    Ok(())
}

// ---------------------------------------------------------------- update & patch

pub(super) fn current(state: &State, req: &Request<'_>) -> Result<(ObjKey, Arc<Value>), ApiError> {
    let name = req.item_name()?;
    let key = req.key(name);
    let stored = state
        .store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&req.rt.group_resource(), name))?;
    Ok((key, stored))
}

pub fn update(state: &mut Locked<'_>, req: &Request<'_>, obj: Value) -> Result<Reply, ApiError> {
    check_type(&req.rt, &obj)?;
    let name = req.item_name()?;
    if let Some(body_name) = meta::name(&obj)
        && body_name != name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
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
    settle_namespace(req, &mut obj)?;
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
    let manager = req.update_manager();
    finish_update(
        state,
        req,
        key,
        &old,
        obj,
        Operation::Update,
        manager,
        false,
    )
}

pub fn patch(state: &mut Locked<'_>, req: &Request<'_>, body: &[u8]) -> Result<Reply, ApiError> {
    let patch_type = PatchType::from_content_type(req.content_type, req.rt.custom)?;
    options::check_write(
        OptionsKind::Patch,
        req.query,
        patch_type == PatchType::Apply,
    )?;
    let name = req.item_name()?.to_string();
    let patch_body = parse_body(body, req.content_type)?;
    let operation = match patch_type {
        PatchType::Apply => return apply(state, req, &name, patch_body),
        PatchType::Json => Operation::JsonPatch,
        PatchType::Merge => Operation::MergePatch,
        // Applied as a JSON merge patch; only offered for built-ins.
        PatchType::StrategicMerge => Operation::StrategicMergePatch,
    };
    let (key, stored) = current(state, req)?;
    let old = req.rt.to_view(&stored);
    let candidate = match operation {
        Operation::JsonPatch => patch::json_patch(&old, &patch_body)?,
        _ => patch::merge_patch(&old, &patch_body)?,
    };
    // A resourceVersion in the patch is a precondition, as with PUT.
    if let Some(rv) = meta::resource_version(&candidate)
        && Some(rv) != meta::resource_version(&old)
    {
        return Err(ApiError::stale(&req.rt.group_resource(), &name));
    }
    let manager = req.update_manager();
    finish_update(state, req, key, &old, candidate, operation, manager, false)
}

/// Server-side apply: create when missing, else merge with field ownership.
fn apply(
    state: &mut Locked<'_>,
    req: &Request<'_>,
    name: &str,
    mut applied: Value,
) -> Result<Reply, ApiError> {
    // Present: the options check requires it for apply.
    let manager = req.q("fieldManager").unwrap_or_default().to_string();
    check_type(&req.rt, &applied)?;
    if let Some(body_name) = meta::name(&applied)
        && body_name != name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    meta::set_meta(&mut applied, "name", Value::String(name.to_string()));
    settle_namespace(req, &mut applied)?;
    let mut warnings = Vec::new();
    // Unknown fields in an applied configuration are neither stored nor owned.
    prune_applied(req, &mut applied, &mut warnings)?;
    let force = req.q("force") == Some("true");
    let api_version = req.rt.api_version();
    let now = meta::now_rfc3339();
    let schema = req.rt.schema.as_ref().map(|s| &s.root);
    let writer = Writer {
        manager: &manager,
        api_version: &api_version,
        subresource: req.subresource(),
        now: &now,
        schema,
        status_subresource: req.rt.status_subresource,
    };
    let key = req.key(name);
    let Some(stored) = state.store.get(&key) else {
        if req.subresource.is_some() {
            return Err(ApiError::not_found(&req.rt.group_resource(), name));
        }
        let merged =
            writer
                .apply(None, &applied, force)
                .map_err(|conflicts| ApiError::ApplyConflict {
                    resource: req.rt.group_resource(),
                    name: name.to_string(),
                    conflicts,
                })?;
        let managed = merged.pointer("/metadata/managedFields").cloned();
        let created = prepare_create(
            state,
            req,
            merged,
            &mut warnings,
            |_, new| {
                if let Some(m) = managed {
                    meta::set_meta(new, "managedFields", m);
                }
            },
            &manager,
        )?;
        let view = commit_create(state, req, created, Operation::Apply, manager)?;
        return Ok(Reply {
            code: 201,
            body: view,
            warnings,
        });
    };
    let old = req.rt.to_view(&stored);
    if let Some(rv) = meta::resource_version(&applied)
        && Some(rv) != meta::resource_version(&old)
    {
        return Err(ApiError::stale(&req.rt.group_resource(), name));
    }
    let mut applied_clean = applied.clone();
    meta::remove_meta(&mut applied_clean, "resourceVersion");
    let merged = writer
        .apply(Some(&old), &applied_clean, force)
        .map_err(|conflicts| ApiError::ApplyConflict {
            resource: req.rt.group_resource(),
            name: name.to_string(),
            conflicts,
        })?;
    let mut reply = finish_update(
        state,
        req,
        key,
        &old,
        merged,
        Operation::Apply,
        manager,
        true,
    )?;
    reply.warnings.extend(warnings);
    Ok(reply)
}

/// Prunes an applied configuration with the `fieldValidation` policy.
fn prune_applied(
    req: &Request<'_>,
    applied: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let Some(schema) = &req.rt.schema else {
        return Ok(());
    };
    // Defaults are not part of what the manager applies: prune only.
    let mut defaulted = applied.clone();
    let unknown = schema.prune_and_default(&mut defaulted);
    for path in &unknown {
        remove_dotted(applied, path);
    }
    if unknown.is_empty() {
        return Ok(());
    }
    match req.field_validation() {
        FieldValidation::Strict => Err(ApiError::BadRequest(format!(
            "failed to create typed patch object ({}/{}; {}): {}",
            req.rt.api_version(),
            req.rt.kind,
            req.rt.kind,
            unknown
                .iter()
                .map(|f| format!(".{f}: field not declared in schema"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        FieldValidation::Warn => {
            warnings.extend(unknown.iter().map(|f| format!("unknown field {f:?}")));
            Ok(())
        }
        FieldValidation::Ignore => Ok(()),
    }
}

/// Removes `a.b[2].c`-style paths reported by pruning.
fn remove_dotted(obj: &mut Value, path: &str) {
    let (parent, last) = match path.rfind('.') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    };
    let mut cur = obj;
    for part in parent.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next() {
            match cur.get_mut(name) {
                Some(v) => cur = v,
                None => return,
            }
        }
        for idx in pieces {
            let Ok(i) = idx.trim_end_matches(']').parse::<usize>() else {
                return;
            };
            match cur.get_mut(i) {
                Some(v) => cur = v,
                None => return,
            }
        }
    }
    if let Some(map) = cur.as_object_mut() {
        map.remove(last);
    }
}

/// The common tail of PUT, PATCH and apply on an existing object.
#[allow(clippy::too_many_arguments)]
fn finish_update(
    state: &mut Locked<'_>,
    req: &Request<'_>,
    key: ObjKey,
    old: &Value,
    candidate: Value,
    operation: Operation,
    manager: String,
    managed_fields_done: bool,
) -> Result<Reply, ApiError> {
    let rt = &req.rt;
    let name = key.name.clone();
    if !candidate.is_object() {
        return Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ));
    }
    // A PUT's UID was a precondition (checked by `update`); a patch that
    // changes it changes an immutable field. Status writes keep all metadata.
    if let (Some(uid), Some(old_uid)) = (
        meta::meta_str(&candidate, "uid"),
        meta::meta_str(old, "uid"),
    ) && uid != old_uid
        && req.subresource() != "status"
    {
        return Err(validation::invalid(
            rt,
            &name,
            vec![FieldError::immutable(
                "metadata.uid",
                &Value::String(uid.to_string()),
            )],
        ));
    }
    let mut new = if req.subresource() == "status" {
        // Only status changes through /status (and managedFields of the writer).
        let mut n = old.clone();
        match candidate.get("status") {
            Some(s) => n["status"] = s.clone(),
            None => {
                if let Some(map) = n.as_object_mut() {
                    map.remove("status");
                }
            }
        }
        if managed_fields_done && let Some(m) = candidate.pointer("/metadata/managedFields") {
            meta::set_meta(&mut n, "managedFields", m.clone());
        }
        n
    } else {
        let mut n = candidate;
        if rt.status_subresource {
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(map) = n.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        }
        n
    };
    new["apiVersion"] = Value::String(rt.api_version());
    new["kind"] = Value::String(rt.kind.clone());
    for field in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "resourceVersion",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old.get("metadata").and_then(|m| m.get(field)) {
            Some(v) => meta::set_meta(&mut new, field, v.clone()),
            None => meta::remove_meta(&mut new, field),
        }
    }
    if !managed_fields_done {
        match old.pointer("/metadata/managedFields") {
            Some(m) => meta::set_meta(&mut new, "managedFields", m.clone()),
            None => meta::remove_meta(&mut new, "managedFields"),
        }
    }
    let mut warnings = Vec::new();
    decode_check(rt, &new)?;
    default_builtin(rt, &mut new);
    prune(req, &mut new, &mut warnings)?;
    meta::drop_empty_metadata(&mut new);

    if meta::is_deleting(old) {
        let before = meta::finalizers(old);
        let added: Vec<String> = meta::finalizers(&new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(validation::invalid(
                rt,
                &name,
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
            ));
        }
    }
    if rt.has_generation && spec_content(rt, old) != spec_content(rt, &new) {
        let generation = meta::generation(old).unwrap_or(0) + 1;
        meta::set_meta(&mut new, "generation", json!(generation));
    }
    // What only depends on the object as read (field ownership, schema and
    // CEL validation: most of a write's work) runs with the state unlocked,
    // so that writes to other objects go on meanwhile; the write is then
    // committed only if the object is still the one read, else redone
    // (`Shared::write`), as the API server validates before its storage
    // transaction and commits with a compare-and-swap on the revision.
    let scope = if req.subresource() == "status" {
        Scope::Status
    } else {
        Scope::Object
    };
    let admitted = Locked::unlocked(state, || {
        if !managed_fields_done {
            let now = meta::now_rfc3339();
            let api_version = rt.api_version();
            let writer = Writer {
                manager: &manager,
                api_version: &api_version,
                subresource: req.subresource(),
                now: &now,
                schema: rt.schema.as_ref().map(|s| &s.root),
                status_subresource: rt.status_subresource,
            };
            writer.record_update(Some(old), &mut new);
        }
        if is_crd(rt) {
            check_crd(rt, &new)?;
        }
        validation::admit(rt, &new, Some(old), scope)
    });
    let still = state.store.get(&key);
    if still.as_deref().and_then(meta::resource_version) != meta::resource_version(old) {
        return Err(ApiError::Raced {
            resource: rt.group_resource(),
            name,
        });
    }
    admitted?;

    if new == *old {
        return Ok(Reply {
            code: 200,
            body: old.clone(),
            warnings,
        });
    }
    if req.dry_run() {
        return Ok(Reply {
            code: 200,
            body: new,
            warnings,
        });
    }
    let how = req.meta(operation, Some(manager));
    if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() {
        // The last finalizer is gone: the object goes. Storage deletes it as
        // it was last stored (watchers see that state), while the writer is
        // answered with the object its write produced, finalizers gone.
        let stored = state
            .store
            .get(&key)
            .map(|s| (*s).clone())
            .unwrap_or_else(|| rt.to_storage(old));
        deletion::remove(state, rt, &key, stored, how);
        return Ok(Reply {
            code: 200,
            body: new,
            warnings,
        });
    }
    let stored = state
        .store
        .commit(key, EventType::Modified, rt.to_storage(&new), how);
    if is_crd(rt) {
        register_crd(state, &stored)?;
    }
    Ok(Reply {
        code: 200,
        body: rt.to_view(&stored),
        warnings,
    })
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
