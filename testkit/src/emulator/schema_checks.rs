//! Validation of custom resources against the value constraints of their
//! OpenAPI v3 schema (types, required, enum, pattern, bounds, lengths, list
//! types, `allOf`/`anyOf`/`oneOf`/`not`): the last of the schema steps of a
//! write, after pruning and defaulting (`schema`).
//!
//! Error wording follows kube-openapi as converted by apiextensions-apiserver,
//! e.g. `spec.port: Invalid value: 70000: spec.port in body should be less
//! than or equal to 65535`, so that assertions written against the emulator
//! hold against a real cluster.

use serde_json::{Map, Value};

use super::error::{FieldError, go_type_name, go_value};
use super::schema::{StructuralSchema, field_path, is_true, list_map_keys, schema_type};

impl StructuralSchema {
    /// Validates the object (everything except apiVersion/kind/metadata)
    /// against the schema's value constraints.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        self.validate_node(obj, &self.root, "", true, &mut errs);
        errs
    }

    /// Validates a write through the status subresource the way
    /// kube-apiserver does: only `status`, against the `status` schema alone,
    /// so paths start below it (`phase`, not `status.phase`).
    pub fn validate_status(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let (Some(status), Some(schema)) = (
            obj.get("status"),
            self.root.get("properties").and_then(|p| p.get("status")),
        ) {
            self.validate_node(status, schema, "", false, &mut errs);
        }
        errs
    }

    fn validate_node(
        &self,
        value: &Value,
        schema: &Value,
        path: &str,
        root: bool,
        errs: &mut Vec<FieldError>,
    ) {
        if value.is_null() {
            if !is_true(schema, "nullable") && !path.is_empty() {
                errs.push(type_error(
                    path,
                    value,
                    schema_type(schema).unwrap_or("object"),
                ));
            }
            return;
        }
        if let Some(mismatch) = type_mismatch(value, schema, path) {
            errs.push(mismatch);
            return;
        }
        errs.extend(enum_error(value, schema, path));
        match value {
            Value::String(s) => self.validate_string(s, value, schema, path, errs),
            Value::Number(_) => validate_number(value, schema, path, errs),
            Value::Array(items) => self.validate_array(items, schema, path, errs),
            Value::Object(map) => self.validate_object(map, schema, path, root, errs),
            _ => {}
        }
        let branch = |b: &Value| {
            let mut e = Vec::new();
            self.validate_node(value, b, path, root, &mut e);
            e
        };
        combinator_errors(value, schema, path, branch, errs);
    }

    fn validate_string(
        &self,
        s: &str,
        value: &Value,
        schema: &Value,
        path: &str,
        errs: &mut Vec<FieldError>,
    ) {
        let chars = s.chars().count() as u64;
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && chars > max
        {
            errs.push(FieldError::new(
                "FieldValueTooLong",
                path,
                format!("Too long: may not be longer than {max}"),
            ));
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && chars < min
        {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!(
                    "{} in body should be at least {min} chars long",
                    display_path(path)
                ),
            ));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
            && let Some(re) = self.regex(pattern)
            && !re.is_match(s)
        {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!("{} in body should match '{pattern}'", display_path(path)),
            ));
        }
        if schema.get("format").and_then(Value::as_str) == Some("date-time")
            && s.parse::<jiff::Timestamp>().is_err()
        {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!(
                    "{} in body must be of type date-time: {s:?}",
                    display_path(path)
                ),
            ));
        }
    }

    fn validate_array(
        &self,
        items: &[Value],
        schema: &Value,
        path: &str,
        errs: &mut Vec<FieldError>,
    ) {
        check_count(
            schema,
            path,
            items.len() as u64,
            ("maxItems", "minItems"),
            "items",
            errs,
        );
        list_type_errors(items, schema, path, errs);
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.validate_node(item, item_schema, &format!("{path}[{i}]"), false, errs);
            }
        }
    }

    fn validate_object(
        &self,
        map: &Map<String, Value>,
        schema: &Value,
        path: &str,
        root: bool,
        errs: &mut Vec<FieldError>,
    ) {
        let embedded = root || is_true(schema, "x-kubernetes-embedded-resource");
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for field in required.iter().filter_map(Value::as_str) {
                let metadata_of_embedded = embedded && field == "metadata";
                if !map.contains_key(field) && !metadata_of_embedded {
                    errs.push(FieldError::required(&field_path(path, field), ""));
                }
            }
        }
        check_count(
            schema,
            path,
            map.len() as u64,
            ("maxProperties", "minProperties"),
            "properties",
            errs,
        );
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (key, child) in map {
            if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child_schema) = props.and_then(|p| p.get(key)) {
                self.validate_node(child, child_schema, &field_path(path, key), false, errs);
            } else if let Some(add) = additional {
                self.validate_node(child, add, &format!("{path}[{key}]"), false, errs);
            }
        }
    }
}

/// `allOf`, `anyOf`, `oneOf` and `not`; `branch` validates the value
/// against one of their schemas.
fn combinator_errors(
    value: &Value,
    schema: &Value,
    path: &str,
    branch: impl Fn(&Value) -> Vec<FieldError>,
    errs: &mut Vec<FieldError>,
) {
    for keyword in ["allOf", "anyOf", "oneOf"] {
        let Some(branches) = schema.get(keyword).and_then(Value::as_array) else {
            continue;
        };
        let results: Vec<Vec<FieldError>> = branches.iter().map(&branch).collect();
        let passing = results.iter().filter(|e| e.is_empty()).count();
        match keyword {
            "allOf" => errs.extend(results.into_iter().flatten()),
            "anyOf" if passing == 0 => errs.push(FieldError::invalid(
                path,
                value,
                &format!(
                    "{} in body must validate at least one schema (anyOf)",
                    display_path(path)
                ),
            )),
            "oneOf" if passing != 1 => errs.push(FieldError::invalid(
                path,
                value,
                &format!(
                    "{} in body must validate one and only one schema (oneOf)",
                    display_path(path)
                ),
            )),
            _ => {}
        }
    }
    if let Some(not) = schema.get("not")
        && branch(not).is_empty()
    {
        errs.push(FieldError::invalid(
            path,
            value,
            &format!(
                "{} in body must not validate the schema (not)",
                display_path(path)
            ),
        ));
    }
}

/// The type error of a value that is not of the schema's `type` (or, with
/// `x-kubernetes-int-or-string`, neither an integer nor a string).
fn type_mismatch(value: &Value, schema: &Value, path: &str) -> Option<FieldError> {
    if is_true(schema, "x-kubernetes-int-or-string") {
        if value.is_string() || is_integer(value) {
            return None;
        }
        return Some(FieldError::new(
            "FieldValueTypeInvalid",
            path,
            format!(
                "Invalid value: {}: {} in body must be of type integer,string: {}",
                go_type_name(value),
                display_path(path),
                go_type_name(value)
            ),
        ));
    }
    let ty = schema_type(schema)?;
    (!type_matches(ty, value)).then(|| type_error(path, value, ty))
}

/// A value outside the schema's `enum`.
fn enum_error(value: &Value, schema: &Value, path: &str) -> Option<FieldError> {
    let allowed = schema.get("enum").and_then(Value::as_array)?;
    if allowed.contains(value) {
        return None;
    }
    let supported: Vec<String> = allowed
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("{s:?}"),
            other => format!("\"{other}\""),
        })
        .collect();
    Some(FieldError::new(
        "FieldValueNotSupported",
        path,
        format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            supported.join(", ")
        ),
    ))
}

/// The bounds on a member count: `maxItems`/`minItems` of arrays,
/// `maxProperties`/`minProperties` of objects (`noun` names the members in
/// the lower bound's message; the upper bound's says `items` for both, as
/// kube-openapi does).
fn check_count(
    schema: &Value,
    path: &str,
    count: u64,
    (max_key, min_key): (&str, &str),
    noun: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64)
        && count > max
    {
        errs.push(FieldError::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {count}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64)
        && count < min
    {
        errs.push(FieldError::invalid(
            path,
            &Value::from(count),
            &format!(
                "{} in body should have at least {min} {noun}",
                display_path(path)
            ),
        ));
    }
}

/// Duplicates in `x-kubernetes-list-type: map` (by key) and `set` lists.
fn list_type_errors(items: &[Value], schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys = list_map_keys(schema);
            let mut seen: Vec<Vec<Value>> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let key: Vec<Value> = keys
                    .iter()
                    .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                    .collect();
                if seen.contains(&key) {
                    let shown: Vec<String> = keys
                        .iter()
                        .zip(&key)
                        .map(|(k, v)| format!("{k:?}:{}", go_value(v)))
                        .collect();
                    errs.push(FieldError::new(
                        "FieldValueDuplicate",
                        format!("{path}[{i}]"),
                        format!(
                            "Duplicate value: map[string]interface {{}}{{{}}}",
                            shown.join(", ")
                        ),
                    ));
                } else {
                    seen.push(key);
                }
            }
        }
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    errs.push(FieldError::new(
                        "FieldValueDuplicate",
                        format!("{path}[{i}]"),
                        format!("Duplicate value: {}", go_value(item)),
                    ));
                }
            }
        }
        _ => {}
    }
}

fn validate_number(value: &Value, schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(n) = value.as_f64() else { return };
    let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
    let shown = |k: &str| schema.get(k).map(Value::to_string).unwrap_or_default();
    let p = display_path(path);
    if let Some(max) = bound("maximum") {
        if is_true(schema, "exclusiveMaximum") && n >= max {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!("{p} in body should be less than {}", shown("maximum")),
            ));
        } else if n > max {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!(
                    "{p} in body should be less than or equal to {}",
                    shown("maximum")
                ),
            ));
        }
    }
    if let Some(min) = bound("minimum") {
        if is_true(schema, "exclusiveMinimum") && n <= min {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!("{p} in body should be greater than {}", shown("minimum")),
            ));
        } else if n < min {
            errs.push(FieldError::invalid(
                path,
                value,
                &format!(
                    "{p} in body should be greater than or equal to {}",
                    shown("minimum")
                ),
            ));
        }
    }
    if let Some(m) = bound("multipleOf")
        && m != 0.0
        && (n / m).fract() != 0.0
    {
        errs.push(FieldError::invalid(
            path,
            value,
            &format!(
                "{p} in body should be a multiple of {}",
                shown("multipleOf")
            ),
        ));
    }
}

fn is_integer(v: &Value) -> bool {
    v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => is_integer(v),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

fn type_error(path: &str, value: &Value, expected: &str) -> FieldError {
    let got = go_type_name(value);
    FieldError::new(
        "FieldValueTypeInvalid",
        path,
        format!(
            "Invalid value: {got}: {} in body must be of type {expected}: {got}",
            display_path(path)
        ),
    )
}

/// kube-openapi names the root `body`; children keep their path.
fn display_path(path: &str) -> &str {
    if path.is_empty() { "body" } else { path }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> StructuralSchema {
        StructuralSchema::new(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["port"],
                    "properties": {
                        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                    }
                }
            }
        }))
    }

    #[test]
    fn prunes_defaults_and_validates() {
        let s = schema();
        let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a", "junk": 1},
            "spec": {"port": 70000, "extra": true, "name": "ABCDEFG"}});
        let pruned = s.prune_and_default(&mut obj);
        assert_eq!(
            pruned,
            vec!["metadata.junk".to_string(), "spec.extra".to_string()]
        );
        assert_eq!(obj["spec"]["mode"], "a");
        let errs = s.validate(&obj);
        let lines: Vec<String> = errs.iter().map(FieldError::line).collect();
        assert!(lines.contains(
            &"spec.port: Invalid value: 70000: spec.port in body should be less than or equal to 65535".to_string()
        ));
        assert!(lines.contains(&"spec.name: Too long: may not be longer than 5".to_string()));
        assert!(lines.iter().any(|l| {
            l.starts_with("spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match")
        }));
    }

    #[test]
    fn type_and_required() {
        let s = schema();
        let obj = json!({"spec": {"port": "x"}});
        let errs = s.validate(&obj);
        assert_eq!(
            errs[0].line(),
            "spec.port: Invalid value: \"string\": spec.port in body must be of type integer: \"string\""
        );
        let errs = s.validate(&json!({"spec": {}}));
        assert_eq!(errs[0].line(), "spec.port: Required value");
    }
}
