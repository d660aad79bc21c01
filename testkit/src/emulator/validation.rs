//! Admission of a write: metadata checks, the structural schema and
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

use super::error::{ApiError, FieldError, go_value};
use super::meta;
use super::resources::{Conversion, ResourceType};
use super::schema::{StructuralSchema, schema_type};

/// Validates `new` (defaulted and pruned, API representation) before it is stored.
pub fn admit(rt: &ResourceType, new: &Value, old: Option<&Value>) -> Result<(), ApiError> {
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
        let mut schema_errs = schema.validate(new);
        let blocking = schema_errs
            .iter()
            .any(|e| e.reason == "FieldValueTypeInvalid");
        if !blocking {
            schema_errs.extend(cel_errors(schema, new, old));
        }
        if let Some(old) = old {
            schema_errs.retain(|e| !unchanged(e, new, old));
        }
        errs.extend(schema_errs);
    }
    if rt.conversion == Conversion::EventsV1 && old.is_none() {
        errs.extend(validate_events_v1(new));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid(rt, &name, errs))
    }
}

/// Builds the `Invalid` error for a resource.
pub fn invalid(rt: &ResourceType, name: &str, causes: Vec<FieldError>) -> ApiError {
    ApiError::Invalid {
        kind: rt.qualified_kind(),
        group: rt.group.clone(),
        kind_name: rt.kind.clone(),
        name: name.to_string(),
        causes,
    }
}

thread_local! {
    /// Registering the Kubernetes CEL functions is not free: once per thread.
    static CEL: kube::core::cel::Validator = kube::core::cel::Validator::new();
}

/// Runs the CEL rules; maps kube-cel's errors to kube-apiserver's field errors.
fn cel_errors(schema: &StructuralSchema, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let Err(errors) = CEL.with(|cel| cel.validate(&schema.root, new, old)) else {
        return Vec::new();
    };
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
            match e.reason.as_deref() {
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
            }
        })
        .collect()
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

/// events.k8s.io/v1 `ValidateEventCreate`: the fields the new Events API requires.
fn validate_events_v1(ev: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let s = |k: &str| ev.get(k).and_then(Value::as_str).unwrap_or_default();
    if ev.get("eventTime").is_none_or(Value::is_null) {
        errs.push(FieldError::required("eventTime", ""));
    }
    for (field, max) in [
        ("reportingController", 316usize),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ] {
        let v = s(field);
        if v.is_empty() {
            errs.push(FieldError::required(field, ""));
        } else if v.len() > max {
            errs.push(FieldError::invalid(
                field,
                &Value::String(v.to_string()),
                &format!("can have at most {max} characters"),
            ));
        }
    }
    if s("note").len() > 1024 {
        errs.push(FieldError::invalid(
            "note",
            &Value::String(String::new()),
            "can have at most 1024 characters",
        ));
    }
    let ty = s("type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            &Value::String(ty.to_string()),
            "has invalid value",
        ));
    }
    errs
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
