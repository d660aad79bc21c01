//! Structural-schema handling of custom resources, in the order
//! kube-apiserver applies it to every write: prune unknown fields and
//! non-nullable nulls, apply `default`s, then validate against the OpenAPI v3
//! constraints (types, required, enum, pattern, bounds, lengths, list
//! types). CEL rules are evaluated separately (see `validation`).
//!
//! Error wording follows kube-openapi as converted by apiextensions-apiserver,
//! e.g. `spec.port: Invalid value: 70000: spec.port in body should be less
//! than or equal to 65535`, so that assertions written against the emulator
//! hold against a real cluster.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use super::error::{FieldError, go_value};

/// The fields kube-apiserver keeps in `metadata` of any object; anything
/// else a client sends there is dropped.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// One served version's `openAPIV3Schema`, with compiled regexes cached.
#[derive(Debug)]
pub struct StructuralSchema {
    pub root: Value,
    patterns: Mutex<HashMap<String, Option<Regex>>>,
    /// The CEL rules, compiled on first use: compiling them for every write
    /// would cost more than everything else a write does.
    rules: OnceLock<kube::core::cel::CompiledSchema>,
}

impl StructuralSchema {
    pub fn new(root: Value) -> Self {
        Self {
            root,
            patterns: Mutex::new(HashMap::new()),
            rules: OnceLock::new(),
        }
    }

    /// The compiled `x-kubernetes-validations` rules.
    pub fn rules(&self) -> &kube::core::cel::CompiledSchema {
        self.rules
            .get_or_init(|| kube::core::cel::compile_schema(&self.root))
    }

    /// Drops unknown fields (returning their paths, for `fieldValidation`)
    /// and `null`s in non-nullable fields, then applies defaults.
    pub fn prune_and_default(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        if let Some(map) = obj.as_object_mut() {
            if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| {
                    let keep = OBJECT_META_FIELDS.contains(&k.as_str());
                    if !keep {
                        pruned.push(format!("metadata.{k}"));
                    }
                    keep
                });
            }
            prune_object(map, &self.root, "", true, &mut pruned);
        }
        default_value(obj, &self.root);
        pruned
    }

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

    /// The schema node at a dotted/indexed field path such as
    /// `status.conditions[0].type`, for messages that name the node type.
    pub fn node_at(&self, path: &str) -> Option<&Value> {
        let mut node = &self.root;
        for seg in split_path(path) {
            node = match seg {
                PathSeg::Field(f) => node
                    .get("properties")
                    .and_then(|p| p.get(f))
                    .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?,
                PathSeg::Index => node.get("items")?,
            };
        }
        Some(node)
    }

    fn regex(&self, pattern: &str) -> Option<Regex> {
        let mut cache = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(pattern.to_string())
            .or_insert_with(|| Regex::new(pattern).ok())
            .clone()
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
        let int_or_string = is_true(schema, "x-kubernetes-int-or-string");
        if int_or_string {
            if !(value.is_string() || is_integer(value)) {
                errs.push(FieldError::new(
                    "FieldValueTypeInvalid",
                    path,
                    format!(
                        "Invalid value: {}: {} in body must be of type integer,string: {}",
                        go_type_name(value),
                        display_path(path),
                        go_type_name(value)
                    ),
                ));
                return;
            }
        } else if let Some(ty) = schema_type(schema)
            && !type_matches(ty, value)
        {
            errs.push(type_error(path, value, ty));
            return;
        }

        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            let supported: Vec<String> = allowed
                .iter()
                .map(|v| match v {
                    Value::String(s) => format!("{s:?}"),
                    other => format!("\"{other}\""),
                })
                .collect();
            errs.push(FieldError::new(
                "FieldValueNotSupported",
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    go_value(value),
                    supported.join(", ")
                ),
            ));
        }

        match value {
            Value::String(s) => self.validate_string(s, value, schema, path, errs),
            Value::Number(_) => validate_number(value, schema, path, errs),
            Value::Array(items) => self.validate_array(items, schema, path, errs),
            Value::Object(map) => self.validate_object(map, schema, path, root, errs),
            _ => {}
        }

        for keyword in ["allOf", "anyOf", "oneOf"] {
            let Some(branches) = schema.get(keyword).and_then(Value::as_array) else {
                continue;
            };
            let results: Vec<Vec<FieldError>> = branches
                .iter()
                .map(|b| {
                    let mut e = Vec::new();
                    self.validate_node(value, b, path, root, &mut e);
                    e
                })
                .collect();
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
        if let Some(not) = schema.get("not") {
            let mut e = Vec::new();
            self.validate_node(value, not, path, root, &mut e);
            if e.is_empty() {
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
        let len = items.len() as u64;
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && len > max
        {
            errs.push(FieldError::new(
                "FieldValueTooMany",
                path,
                format!("Too many: {len}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && len < min
        {
            errs.push(FieldError::invalid(
                path,
                &Value::from(len),
                &format!(
                    "{} in body should have at least {min} items",
                    display_path(path)
                ),
            ));
        }
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
                    errs.push(FieldError::required(&join(path, field), ""));
                }
            }
        }
        let count = map.len() as u64;
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            errs.push(FieldError::new(
                "FieldValueTooMany",
                path,
                format!("Too many: {count}: must have at most {max} items"),
            ));
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            errs.push(FieldError::invalid(
                path,
                &Value::from(count),
                &format!(
                    "{} in body should have at least {min} properties",
                    display_path(path)
                ),
            ));
        }
        let props = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        for (key, child) in map {
            if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child_schema) = props.and_then(|p| p.get(key)) {
                self.validate_node(child, child_schema, &join(path, key), false, errs);
            } else if let Some(add) = additional {
                self.validate_node(child, add, &format!("{path}[{key}]"), false, errs);
            }
        }
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

/// Prunes one object node. `embedded` keeps apiVersion/kind/metadata
/// (the root, and nodes marked `x-kubernetes-embedded-resource`).
fn prune_object(
    map: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    embedded: bool,
    pruned: &mut Vec<String>,
) {
    if is_true(schema, "x-kubernetes-preserve-unknown-fields") && schema.get("properties").is_none()
    {
        // Unknown fields are kept, but nulls are still dropped where declared children say so.
        return;
    }
    let preserve = is_true(schema, "x-kubernetes-preserve-unknown-fields");
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let child_schema = props.and_then(|p| p.get(&key)).or(additional);
        let child_path = join(path, &key);
        match child_schema {
            Some(cs) => {
                let drop_null =
                    map.get(&key).is_some_and(Value::is_null) && !is_true(cs, "nullable");
                if drop_null {
                    map.remove(&key);
                } else if let Some(child) = map.get_mut(&key) {
                    prune_value(child, cs, &child_path, pruned);
                }
            }
            None if preserve => {}
            None => {
                map.remove(&key);
                pruned.push(child_path);
            }
        }
    }
}

fn prune_value(value: &mut Value, schema: &Value, path: &str, pruned: &mut Vec<String>) {
    match value {
        Value::Object(map) => prune_object(
            map,
            schema,
            path,
            is_true(schema, "x-kubernetes-embedded-resource"),
            pruned,
        ),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_value(item, item_schema, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// Applies `default`s to missing (or, after pruning, removed-null) fields
/// of objects that exist, recursing into defaulted values too.
fn default_value(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (key, child_schema) in props {
                    if !map.contains_key(key)
                        && let Some(default) = child_schema.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, child_schema) in props {
                    if let Some(child) = map.get_mut(key) {
                        default_value(child, child_schema);
                    }
                }
            }
            if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let known = schema.get("properties").and_then(Value::as_object);
                for (key, child) in map.iter_mut() {
                    if known.is_none_or(|k| !k.contains_key(key)) {
                        default_value(child, additional);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default_value(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

pub fn is_true(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

pub fn schema_type(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

/// `x-kubernetes-list-map-keys` of a `map` list.
pub fn list_map_keys(schema: &Value) -> Vec<String> {
    schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
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

/// The JSON type name Go's decoder reports for a value.
pub fn go_type_name(v: &Value) -> String {
    let name = match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!("{name:?}")
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

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// kube-openapi names the root `body`; children keep their path.
fn display_path(path: &str) -> &str {
    if path.is_empty() { "body" } else { path }
}

enum PathSeg<'a> {
    Field(&'a str),
    Index,
}

fn split_path(path: &str) -> Vec<PathSeg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            out.push(PathSeg::Field(name));
        }
        for _ in rest.split('[').filter(|s| !s.is_empty()) {
            out.push(PathSeg::Index);
        }
    }
    out
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
