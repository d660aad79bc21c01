//! Sets of owned fields, as `metadata.managedFields` records them: paths in
//! the `FieldsV1` encoding (`f:spec`, `k:{"type":"Ready"}`, `v:"finalizer"`),
//! read off objects with the schema's `x-kubernetes-list-type` /
//! `x-kubernetes-list-map-keys` / `x-kubernetes-map-type` deciding what is
//! granular and what is atomic, as structured-merge-diff does; and the
//! lookups and removals of such paths in objects that `fieldmanager` needs.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::meta;
use super::schema::list_map_keys;

/// One path in `FieldsV1` element encoding.
pub type FieldPath = Vec<String>;

/// A set of owned field paths. Intermediate structs are implied by their
/// leaves; list-map items are members themselves (`"."`) as well.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<FieldPath>);

impl FromIterator<FieldPath> for FieldSet {
    fn from_iter<I: IntoIterator<Item = FieldPath>>(paths: I) -> Self {
        FieldSet(paths.into_iter().collect())
    }
}

impl FieldSet {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn paths(&self) -> impl Iterator<Item = &FieldPath> {
        self.0.iter()
    }

    pub fn contains(&self, p: &FieldPath) -> bool {
        self.0.contains(p)
    }

    /// Whether `p` or anything below it is in the set.
    pub fn touches(&self, p: &FieldPath) -> bool {
        self.0.iter().any(|q| q.starts_with(p))
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    /// Removes the paths in `other` and everything below them.
    pub fn without_subtrees(&self, other: &FieldSet) -> FieldSet {
        FieldSet(
            self.0
                .iter()
                .filter(|p| !other.0.iter().any(|q| p.starts_with(q)))
                .cloned()
                .collect(),
        )
    }

    /// The fields a value sets, below `schema`.
    pub fn of(value: &Value, schema: Option<&Value>) -> FieldSet {
        let mut set = BTreeSet::new();
        collect(value, schema, &mut Vec::new(), &mut set, true);
        FieldSet(set)
    }

    /// Only paths under `f:status` (`keep_status`) or only the others.
    pub fn scoped(&self, keep_status: bool) -> FieldSet {
        let status = "f:status";
        FieldSet(
            self.0
                .iter()
                .filter(|p| (p.first().map(String::as_str) == Some(status)) == keep_status)
                .cloned()
                .collect(),
        )
    }

    pub fn to_fields_v1(&self) -> Value {
        let mut root = json!({});
        for path in &self.0 {
            let mut node = &mut root;
            for el in path {
                node = &mut node[el.as_str()];
                if node.is_null() {
                    *node = json!({});
                }
            }
        }
        // A member that also has members below it is marked with ".".
        for path in &self.0 {
            if self
                .0
                .iter()
                .any(|q| q.len() > path.len() && q.starts_with(path))
            {
                let mut node = &mut root;
                for el in path {
                    node = &mut node[el.as_str()];
                }
                node["."] = json!({});
            }
        }
        root
    }

    pub fn from_fields_v1(v: &Value) -> FieldSet {
        fn walk(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
            let Some(map) = v.as_object() else { return };
            let children: Vec<_> = map.iter().filter(|(k, _)| k.as_str() != ".").collect();
            if (children.is_empty() || map.contains_key(".")) && !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            for (k, child) in children {
                prefix.push(k.clone());
                walk(child, prefix, out);
                prefix.pop();
            }
        }
        let mut out = BTreeSet::new();
        walk(v, &mut Vec::new(), &mut out);
        FieldSet(out)
    }
}

/// Metadata fields nobody owns: the object's identity, what the server
/// sets, and `managedFields`, `selfLink`, `generateName`.
fn unowned_meta(field: &str) -> bool {
    meta::SERVER_OWNED.contains(&field)
        || matches!(field, "managedFields" | "selfLink" | "generateName")
}

/// The schema of ObjectMeta as far as merging is concerned.
fn meta_schema() -> &'static Value {
    static META: OnceLock<Value> = OnceLock::new();
    META.get_or_init(|| {
        json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {"type": "array", "items": {"type": "object"},
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
        }})
    })
}

pub fn child_schema<'a>(schema: Option<&'a Value>, key: &str, root: bool) -> Option<&'a Value> {
    if root && key == "metadata" {
        return Some(meta_schema());
    }
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

pub enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

pub fn list_kind(schema: Option<&Value>) -> ListKind {
    let Some(s) = schema else {
        return ListKind::Atomic;
    };
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Map(list_map_keys(s)),
        _ => ListKind::Atomic,
    }
}

pub fn atomic_map(schema: Option<&Value>) -> bool {
    schema
        .and_then(|s| s.get("x-kubernetes-map-type"))
        .and_then(Value::as_str)
        == Some("atomic")
}

/// `k:{"type":"Ready"}` for a list-map item.
pub fn item_key(item: &Value, keys: &[String]) -> String {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), item.get(k).cloned().unwrap_or(Value::Null));
    }
    format!("k:{}", Value::Object(m))
}

fn collect(
    value: &Value,
    schema: Option<&Value>,
    prefix: &mut FieldPath,
    out: &mut BTreeSet<FieldPath>,
    root: bool,
) {
    match value {
        Value::Object(map) if !map.is_empty() && !atomic_map(schema) => {
            for (k, v) in map {
                if root && matches!(k.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                let in_meta = prefix.len() == 1 && prefix[0] == "f:metadata";
                if in_meta && unowned_meta(k) {
                    continue;
                }
                prefix.push(format!("f:{k}"));
                collect(v, child_schema(schema, k, root), prefix, out, false);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match list_kind(schema) {
            ListKind::Atomic => {
                out.insert(prefix.clone());
            }
            ListKind::Set => {
                for item in items {
                    prefix.push(format!("v:{item}"));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            ListKind::Map(keys) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                for item in items {
                    prefix.push(item_key(item, &keys));
                    out.insert(prefix.clone());
                    collect(item, item_schema, prefix, out, false);
                    prefix.pop();
                }
            }
        },
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

/// Resolves a field path in an object (None when absent).
pub fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = step(cur, el)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, el: &str) -> Option<&'a Value> {
    if let Some(f) = el.strip_prefix("f:") {
        return cur.get(f);
    }
    let items = cur.as_array()?;
    if let Some(k) = el.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items.iter().find(|it| {
            key.iter()
                .all(|(kk, kv)| it.get(kk).unwrap_or(&Value::Null) == kv)
        });
    }
    if let Some(v) = el.strip_prefix("v:") {
        let v: Value = serde_json::from_str(v).ok()?;
        return items.iter().find(|it| **it == v);
    }
    None
}

pub fn is_empty_container(v: &Value) -> bool {
    matches!(v, Value::Array(a) if a.is_empty()) || matches!(v, Value::Object(m) if m.is_empty())
}

/// Removes the field at `path` from `obj` (no-op when absent).
pub fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for el in parent_path {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            let idx =
                step(cur, el).and_then(|found| cur.as_array()?.iter().position(|it| it == found));
            match idx {
                Some(i) => cur.get_mut(i),
                None => None,
            }
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(map) = cur.as_object_mut() {
            map.remove(f);
        }
    } else if let Some(found) = step(cur, last).cloned()
        && let Some(items) = cur.as_array_mut()
    {
        items.retain(|it| *it != found);
    }
}

/// `.spec.port`, `.status.conditions[type="Ready"].status` for conflict messages.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        }
    }
    out
}
