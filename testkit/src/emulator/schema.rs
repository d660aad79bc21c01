//! Structural schemas of custom resources, and the first two steps
//! kube-apiserver takes with one on every write: prune unknown fields and
//! non-nullable nulls, then apply `default`s. The third step, validation
//! against the OpenAPI v3 constraints, is `schema_checks`; CEL rules are
//! evaluated by `validation`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use super::meta;

/// Whether kube-apiserver keeps a field in `metadata` (ObjectMeta has it);
/// anything else a client sends there is dropped.
fn is_object_meta_field(field: &str) -> bool {
    meta::SERVER_OWNED.contains(&field)
        || matches!(
            field,
            "generateName"
                | "selfLink"
                | "labels"
                | "annotations"
                | "ownerReferences"
                | "finalizers"
                | "managedFields"
        )
}

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
                    let keep = is_object_meta_field(k);
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

    /// The compiled `pattern`, cached; None when it does not compile.
    pub fn regex(&self, pattern: &str) -> Option<Regex> {
        let mut cache = self.patterns.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(pattern.to_string())
            .or_insert_with(|| Regex::new(pattern).ok())
            .clone()
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
        let child_path = field_path(path, &key);
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
    meta::strings(schema.get("x-kubernetes-list-map-keys"))
}

/// `path.field`, or `field` at the root.
pub fn field_path(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
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
