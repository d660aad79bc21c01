//! Admission of a write: metadata checks, CRD bodies, the structural schema and
//! `x-kubernetes-validations` CEL rules of custom resources (transition
//! rules get the stored object as `oldSelf`), and the few built-in
//! validations the operator's writes depend on (events.k8s.io/v1 Events).
//!
//! CEL is evaluated by kube's own `kube::core::cel` (kube-cel), with
//! Kubernetes' CEL extension functions, not by a hand-rolled interpreter.
//!
//! Like kube-apiserver (CRDValidationRatcheting, on by default since 1.30),
//! an update is not rejected for a field it did not change.

use serde_json::Value;

use super::crd;
use super::error::{ApiError, FieldError, go_value};
use super::meta;
use super::resources::{Conversion, ResourceType};
use super::schema::{StructuralSchema, schema_type};

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Create, or a write to the main resource.
    Object,
    /// A write through the status subresource.
    Status,
}

/// Validates `new` (defaulted and pruned, API representation) before it is stored.
pub fn admit(
    rt: &ResourceType,
    new: &Value,
    old: Option<&Value>,
    scope: Scope,
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    let name = meta::name(new).unwrap_or_default().to_string();
    if old.is_none() {
        if name.is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        } else {
            errs.extend(meta::validate_name(&name, rt.plural == "namespaces"));
        }
    }
    errs.extend(meta::validate_labels(new));
    if let Some(schema) = &rt.schema {
        errs.extend(schema_errors(schema, new, old, scope));
    }
    if rt.conversion == Conversion::EventsV1 {
        errs.extend(match old {
            None => validate_events_v1(new),
            Some(old) => events_v1_immutable(new, old),
        });
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid(rt, &name, errs))
    }
}

/// OpenAPI schema errors, then (unless a type error blocks them) CEL rule
/// errors. A status write is checked against the status schema alone, with
/// paths relative to it; CEL rules always see the whole object.
fn schema_errors(
    schema: &StructuralSchema,
    new: &Value,
    old: Option<&Value>,
    scope: Scope,
) -> Vec<FieldError> {
    let (mut errs, base) = match scope {
        Scope::Object => (schema.validate(new), (Some(new), old)),
        Scope::Status => (
            schema.validate_status(new),
            (new.get("status"), old.and_then(|o| o.get("status"))),
        ),
    };
    if let (Some(new_base), Some(old_base)) = base {
        errs.retain(|e| !unchanged(e, new_base, old_base));
    }
    if errs.iter().any(|e| e.reason == "FieldValueTypeInvalid") {
        return errs;
    }
    let mut cel = cel_errors(schema, new, old);
    if let Some(old) = old {
        // Like kube-apiserver's ratcheting, a transition rule (one that
        // reads `oldSelf`) is never ratcheted: comparing with the stored
        // object is its whole point, whichever field it names.
        cel.retain(|(e, transition)| *transition || !unchanged(e, new, old));
    }
    errs.extend(cel.into_iter().map(|(e, _)| e));
    errs
}

/// Builds the `Invalid` error for a resource.
///
/// Both Event APIs are served by the registry of core Events, whose errors
/// name that kind: `Event "x" is invalid`, also for events.k8s.io/v1.
pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<FieldError>) -> ApiError {
    let (kind, group) = if rt.storage.group.is_empty() && rt.storage.resource == "events" {
        ("Event".to_string(), String::new())
    } else {
        (rt.kind.clone(), rt.group.clone())
    };
    ApiError::Invalid {
        kind: if group.is_empty() {
            kind.clone()
        } else {
            format!("{kind}.{group}")
        },
        group,
        kind_name: kind,
        name: name.to_string(),
        causes,
    }
}

/// Validates a CRD body by parsing it the way the registry will.
pub fn check_crd(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    crd::parse_crd(obj).map(|_| ()).map_err(|e| {
        let name = meta::name(obj).unwrap_or_default();
        invalid(
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

thread_local! {
    /// Registering the Kubernetes CEL functions is not free: once per thread.
    static CEL: kube::core::cel::Validator = kube::core::cel::Validator::new();
}

/// Runs the CEL rules; maps kube-cel's errors to kube-apiserver's field
/// errors, each with whether its rule is a transition rule.
fn cel_errors(
    schema: &StructuralSchema,
    new: &Value,
    old: Option<&Value>,
) -> Vec<(FieldError, bool)> {
    let new = without_nulls(new, &schema.root);
    let old = old.map(|o| without_nulls(o, &schema.root));
    let Err(errors) = CEL.with(|cel| cel.validate_compiled(schema.rules(), &new, old.as_deref()))
    else {
        return Vec::new();
    };
    let new = new.as_ref();
    errors
        .into_iter()
        .map(|e| {
            let field = if e.field_path.is_empty() {
                "<nil>".to_string()
            } else {
                e.field_path.clone()
            };
            let type_name = schema
                .node_at(&e.field_path)
                .and_then(schema_type)
                .unwrap_or("object");
            let transition = e.rule.contains("oldSelf");
            let error = match e.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(&field, &e.message),
                Some("FieldValueRequired") => FieldError::required(&field, &e.message),
                Some("FieldValueDuplicate") => {
                    let v = value_at(new, &e.field_path).cloned().unwrap_or(Value::Null);
                    FieldError::new(
                        "FieldValueDuplicate",
                        field,
                        format!("Duplicate value: {}", go_value(&v)),
                    )
                }
                _ => FieldError::invalid(&field, &Value::String(type_name.to_string()), &e.message),
            };
            (error, transition)
        })
        .collect()
}

/// `absent_nulls`, copying only when there is a null to drop.
fn without_nulls<'a>(value: &'a Value, schema: &Value) -> std::borrow::Cow<'a, Value> {
    fn has_null(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Array(items) => items.iter().any(has_null),
            Value::Object(map) => map.values().any(has_null),
            _ => false,
        }
    }
    if has_null(value) {
        std::borrow::Cow::Owned(absent_nulls(value, schema))
    } else {
        std::borrow::Cow::Borrowed(value)
    }
}

/// The object as kube-apiserver's CEL sees it: in objects with declared
/// properties a `null` field is absent (`has(self.x)` is false), nullable or
/// not. Maps (`additionalProperties`) and list items keep their nulls.
fn absent_nulls(value: &Value, schema: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let out = map
                .iter()
                .filter(|(_, v)| props.is_none() || !v.is_null())
                .map(|(k, v)| {
                    let child = props.and_then(|p| p.get(k)).or(additional);
                    let v = child.map_or_else(|| v.clone(), |c| absent_nulls(v, c));
                    (k.clone(), v)
                })
                .collect();
            Value::Object(out)
        }
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) => items.iter().map(|i| absent_nulls(i, item_schema)).collect(),
            None => value.clone(),
        },
        _ => value.clone(),
    }
}

/// Ratcheting: an error on a value the update left as it was is not reported.
fn unchanged(err: &FieldError, new: &Value, old: &Value) -> bool {
    let path = if err.field == "<nil>" {
        ""
    } else {
        err.field.as_str()
    };
    let path = if err.reason == "FieldValueRequired" {
        parent_path(path)
    } else {
        path
    };
    match (value_at(new, path), value_at(old, path)) {
        (Some(a), Some(b)) => a == b,
        (None, None) => err.reason == "FieldValueRequired",
        _ => false,
    }
}

fn parent_path(path: &str) -> &str {
    match path.rfind(['.', '[']) {
        Some(i) => &path[..i],
        None => "",
    }
}

/// Resolves a kube field path (`status.conditions[0].type`, `spec.labels[key]`).
pub fn value_at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next().filter(|n| !n.is_empty()) {
            cur = cur.get(name)?;
        }
        for idx in pieces {
            let idx = idx.trim_end_matches(']');
            cur = match idx.parse::<usize>() {
                Ok(i) if cur.is_array() => cur.get(i)?,
                _ => cur.get(idx)?,
            };
        }
    }
    Some(cur)
}

/// events.k8s.io/v1 `ValidateEventCreate`: the fields the new Events API
/// requires. Paths name the stored (core) fields: `message`, not `note`.
fn validate_events_v1(ev: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let s = |k: &str| ev.get(k).and_then(Value::as_str).unwrap_or_default();
    let empty = Value::String(String::new());
    if ev.get("eventTime").is_none_or(Value::is_null) {
        errs.push(FieldError::required("eventTime", ""));
    }
    for (field, stored, max) in [
        ("reportingController", "reportingController", 316usize),
        ("reportingInstance", "reportingInstance", 128),
        ("action", "action", 128),
        ("reason", "reason", 128),
    ] {
        let v = s(field);
        if v.is_empty() {
            errs.push(FieldError::required(stored, ""));
        } else if v.len() > max {
            errs.push(FieldError::invalid(
                stored,
                &empty,
                &format!("can have at most {max} characters"),
            ));
        }
    }
    if s("note").len() > 1024 {
        errs.push(FieldError::invalid(
            "message",
            &empty,
            "can have at most 1024 characters",
        ));
    }
    let ty = s("type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            &empty,
            &format!("has invalid value: {ty}"),
        ));
    }
    errs
}

/// events.k8s.io/v1 `ValidateEventUpdate`: an Event is a record; only its
/// `series` (and metadata) may change. (The core/v1 API keeps the old,
/// lenient rules.)
fn events_v1_immutable(new: &Value, old: &Value) -> Vec<FieldError> {
    const IMMUTABLE: &[(&str, &str)] = &[
        ("regarding", "involvedObject"),
        ("reason", "reason"),
        ("note", "message"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("action", "action"),
        ("related", "related"),
        ("reportingController", "reportingController"),
        ("reportingInstance", "reportingInstance"),
    ];
    IMMUTABLE
        .iter()
        .filter(|(view, _)| new.get(view) != old.get(view))
        .map(|(view, stored)| {
            FieldError::immutable(
                stored,
                new.get(view).unwrap_or(&Value::String(String::new())),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_resolve() {
        let obj = json!({"status": {"conditions": [{"type": "Ready"}]}, "spec": {"m": {"k": 1}}});
        assert_eq!(
            value_at(&obj, "status.conditions[0].type"),
            Some(&json!("Ready"))
        );
        assert_eq!(value_at(&obj, "spec.m[k]"), Some(&json!(1)));
        assert_eq!(parent_path("spec.a.b"), "spec.a");
    }
}
