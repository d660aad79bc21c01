//! What every write checks and normalises in the body it was sent before
//! the body becomes an object: `apiVersion`/`kind` and name against the
//! endpoint, the namespace against the URL, a `resourceVersion` as a
//! precondition, and pruning of unknown fields with the request's
//! `fieldValidation` policy.

use serde_json::Value;

use super::error::ApiError;
use super::meta;
use super::request::{FieldValidation, Request};
use super::resources::ResourceType;

/// Checks `apiVersion`/`kind` of a body against the endpoint.
pub fn check_type(rt: &ResourceType, body: &Value) -> Result<(), ApiError> {
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

/// A name in the body must be the one on the URL.
pub fn check_name(body: &Value, name: &str) -> Result<(), ApiError> {
    match meta::name(body) {
        Some(body_name) if body_name != name => Err(ApiError::BadRequest(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        ))),
        _ => Ok(()),
    }
}

/// A `resourceVersion` in a patched or applied body is a precondition, as
/// with PUT: it must be the stored one.
pub fn check_resource_version(
    req: &Request<'_>,
    name: &str,
    body: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    match meta::resource_version(body) {
        Some(rv) if Some(rv) != meta::resource_version(old) => {
            Err(ApiError::stale(&req.rt.group_resource(), name))
        }
        _ => Ok(()),
    }
}

/// Checks the body's namespace against the URL and defaults it.
pub fn settle_namespace(req: &Request<'_>, obj: &mut Value) -> Result<(), ApiError> {
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
pub fn prune(
    req: &Request<'_>,
    obj: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let unknown = prune_and_default(req, obj);
    unknown_fields(req, &unknown, warnings, || {
        let fields: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect();
        format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
            fields.join(", "),
            kind = req.rt.kind,
            version = req.rt.version,
        )
    })
}

/// Prunes an applied configuration with the `fieldValidation` policy.
pub fn prune_applied(
    req: &Request<'_>,
    applied: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    // Defaults are not part of what the manager applies: prune a copy and
    // only take the unknown fields it reports away.
    let unknown = prune_and_default(req, &mut applied.clone());
    for path in &unknown {
        remove_dotted(applied, path);
    }
    unknown_fields(req, &unknown, warnings, || {
        format!(
            "failed to create typed patch object ({}/{}; {}): {}",
            req.rt.api_version(),
            req.rt.kind,
            req.rt.kind,
            unknown
                .iter()
                .map(|f| format!(".{f}: field not declared in schema"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Prunes and defaults by the resource's schema (custom resources);
/// returns the paths of the unknown fields it dropped.
fn prune_and_default(req: &Request<'_>, obj: &mut Value) -> Vec<String> {
    req.rt
        .schema
        .as_ref()
        .map(|schema| schema.prune_and_default(obj))
        .unwrap_or_default()
}

/// The `fieldValidation` policy for the unknown fields pruning found:
/// `Strict` refuses the write (400, worded by `strict`), `Warn` warns.
fn unknown_fields(
    req: &Request<'_>,
    unknown: &[String],
    warnings: &mut Vec<String>,
    strict: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    if unknown.is_empty() {
        return Ok(());
    }
    match req.field_validation() {
        FieldValidation::Strict => Err(ApiError::BadRequest(strict())),
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
