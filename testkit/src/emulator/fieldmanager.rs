//! Field management: `metadata.managedFields` and server-side apply.
//!
//! Ownership is tracked as sets of field paths in the `FieldsV1` encoding
//! (`f:spec`, `k:{"type":"Ready"}`, `v:"finalizer"`), using the schema's
//! `x-kubernetes-list-type` / `x-kubernetes-list-map-keys` /
//! `x-kubernetes-map-type` to decide what is granular and what is atomic,
//! as structured-merge-diff does. An apply:
//!
//! * merges the applied configuration into the live object (maps by key,
//!   list-maps by their keys, sets by value, everything else replaced);
//! * fails with `409 Conflict` when it would change a field another manager
//!   owns, unless `force=true` (which takes the field over);
//! * removes fields the manager applied before and no longer applies,
//!   unless another manager owns them too.
//!
//! Updates (PUT, patches) give the updating manager the fields they changed
//! and take those fields away from everyone else, without conflicts.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::error::ApplyConflict;

/// One path in `FieldsV1` element encoding.
pub type FieldPath = Vec<String>;

/// A set of owned field paths. Intermediate structs are implied by their
/// leaves; list-map items are members themselves (`"."`) as well.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<FieldPath>);

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

/// Metadata fields nobody owns (set by the server or identity).
const UNOWNED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generateName",
];

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

fn child_schema<'a>(schema: Option<&'a Value>, key: &str, root: bool) -> Option<&'a Value> {
    if root && key == "metadata" {
        return Some(meta_schema());
    }
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

fn list_kind(schema: Option<&Value>) -> ListKind {
    let Some(s) = schema else {
        return ListKind::Atomic;
    };
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListKind::Set,
        Some("map") => ListKind::Map(super::schema::list_map_keys(s)),
        _ => ListKind::Atomic,
    }
}

fn atomic_map(schema: Option<&Value>) -> bool {
    schema
        .and_then(|s| s.get("x-kubernetes-map-type"))
        .and_then(Value::as_str)
        == Some("atomic")
}

/// `k:{"type":"Ready"}` for a list-map item.
fn item_key(item: &Value, keys: &[String]) -> String {
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
                if in_meta && UNOWNED_META.contains(&k.as_str()) {
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
fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
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

fn is_empty_container(v: &Value) -> bool {
    matches!(v, Value::Array(a) if a.is_empty()) || matches!(v, Value::Object(m) if m.is_empty())
}

/// Removes the field at `path` from `obj` (no-op when absent).
fn remove_path(obj: &mut Value, path: &[String]) {
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

/// Merges an applied configuration into the live object.
pub fn merge_applied(live: &Value, applied: &Value, schema: Option<&Value>) -> Value {
    merge_node(live, applied, schema, true)
}

fn merge_node(live: &Value, applied: &Value, schema: Option<&Value>, root: bool) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) if !atomic_map(schema) => {
            let mut out = l.clone();
            for (k, av) in a {
                let merged = match l.get(k) {
                    Some(lv) => merge_node(lv, av, child_schema(schema, k, root), false),
                    None => av.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => match list_kind(schema) {
            ListKind::Atomic => applied.clone(),
            ListKind::Set => {
                let mut out = l.clone();
                for v in a {
                    if !out.contains(v) {
                        out.push(v.clone());
                    }
                }
                Value::Array(out)
            }
            ListKind::Map(keys) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                let mut out = l.clone();
                for item in a {
                    let key = item_key(item, &keys);
                    match out.iter().position(|x| item_key(x, &keys) == key) {
                        Some(i) => out[i] = merge_node(&out[i], item, item_schema, false),
                        None => out.push(item.clone()),
                    }
                }
                Value::Array(out)
            }
        },
        _ => applied.clone(),
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

impl ManagedEntry {
    fn same_slot(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if !self.subresource.is_empty() {
            v["subresource"] = Value::String(self.subresource.clone());
        }
        v
    }
}

/// Reads `metadata.managedFields`.
pub fn read_entries(obj: &Value) -> Vec<ManagedEntry> {
    let s = |e: &Value, k: &str| {
        e.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    obj.get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| ManagedEntry {
                    manager: s(e, "manager"),
                    operation: s(e, "operation"),
                    api_version: s(e, "apiVersion"),
                    time: s(e, "time"),
                    subresource: s(e, "subresource"),
                    fields: e
                        .get("fieldsV1")
                        .map(FieldSet::from_fields_v1)
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `metadata.managedFields` (removed when empty).
pub fn write_entries(obj: &mut Value, entries: &[ManagedEntry]) {
    let kept: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(ManagedEntry::to_json)
        .collect();
    let meta = super::meta::meta_mut(obj);
    if kept.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(kept));
    }
}

/// Who is writing, through which endpoint.
#[derive(Debug, Clone)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: &'a str,
    pub schema: Option<&'a Value>,
    /// Fields under `status` are owned through the status subresource only.
    pub status_subresource: bool,
}

impl Writer<'_> {
    fn scope(&self, set: FieldSet) -> FieldSet {
        if !self.status_subresource {
            set
        } else {
            set.scoped(self.subresource == "status")
        }
    }

    fn upsert(&self, entries: &mut Vec<ManagedEntry>, operation: &str, fields: FieldSet) {
        match entries
            .iter_mut()
            .find(|e| e.same_slot(self.manager, operation, self.subresource))
        {
            Some(e) => {
                if e.fields != fields {
                    e.fields = fields;
                    e.time = self.now.to_string();
                    e.api_version = self.api_version.to_string();
                }
            }
            None => entries.push(ManagedEntry {
                manager: self.manager.to_string(),
                operation: operation.to_string(),
                api_version: self.api_version.to_string(),
                time: self.now.to_string(),
                subresource: self.subresource.to_string(),
                fields,
            }),
        }
    }

    /// Records an Update (create, PUT, patch) from `old` (None: creation) to `new`.
    pub fn record_update(&self, old: Option<&Value>, new: &mut Value) {
        let mut entries = old.map(read_entries).unwrap_or_default();
        let new_set = self.scope(FieldSet::of(new, self.schema));
        let (changed, removed) = match old {
            None => (new_set.clone(), FieldSet::default()),
            Some(old) => {
                let old_set = self.scope(FieldSet::of(old, self.schema));
                let changed = FieldSet(
                    new_set
                        .paths()
                        .filter(|p| get_path(old, p) != get_path(new, p))
                        .cloned()
                        .collect(),
                );
                (changed, old_set.difference(&new_set))
            }
        };
        if changed.is_empty() && removed.is_empty() {
            write_entries(new, &entries);
            return;
        }
        for e in entries.iter_mut() {
            e.fields = e.fields.difference(&changed).without_subtrees(&removed);
        }
        let mine = entries
            .iter()
            .find(|e| e.same_slot(self.manager, "Update", self.subresource))
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        self.upsert(
            &mut entries,
            "Update",
            mine.union(&changed).without_subtrees(&removed),
        );
        entries.retain(|e| !e.fields.is_empty());
        write_entries(new, &entries);
    }

    /// Server-side apply of `applied` over `live` (None: creation).
    /// Returns the merged object with managedFields, or the conflicts.
    pub fn apply(
        &self,
        live: Option<&Value>,
        applied: &Value,
        force: bool,
    ) -> Result<Value, Vec<ApplyConflict>> {
        let empty = json!({});
        let live_obj = live.unwrap_or(&empty);
        let mut entries = live.map(read_entries).unwrap_or_default();
        let applied_set = self.scope(FieldSet::of(applied, self.schema));
        let mut merged = merge_applied(live_obj, applied, self.schema);

        let mut conflicts = Vec::new();
        for path in applied_set.paths() {
            if get_path(live_obj, path) == get_path(applied, path)
                || get_path(live_obj, path).is_none()
            {
                continue;
            }
            for e in entries
                .iter()
                .filter(|e| !e.same_slot(self.manager, "Apply", self.subresource))
            {
                if e.fields.contains(path) {
                    conflicts.push((e.manager.clone(), e.api_version.clone(), path.clone()));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return Err(conflicts
                .into_iter()
                .map(|(manager, api_version, p)| ApplyConflict {
                    manager,
                    api_version,
                    field: display_path(&p),
                })
                .collect());
        }
        let taken = FieldSet(conflicts.into_iter().map(|(_, _, p)| p).collect());
        for e in entries.iter_mut() {
            if !e.same_slot(self.manager, "Apply", self.subresource) {
                e.fields = e.fields.difference(&taken);
            }
        }

        // Fields this manager applied before but no longer does: drop them
        // unless someone else still owns them.
        let previous = entries
            .iter()
            .find(|e| e.same_slot(self.manager, "Apply", self.subresource))
            .map(|e| e.fields.clone())
            .unwrap_or_default();
        let dropped = previous.difference(&applied_set);
        let others: Vec<&ManagedEntry> = entries
            .iter()
            .filter(|e| !e.same_slot(self.manager, "Apply", self.subresource))
            .collect();
        let mut to_remove: Vec<&FieldPath> = dropped
            .paths()
            .filter(|p| !others.iter().any(|e| e.fields.touches(p)))
            .collect();
        to_remove.sort_by_key(|p| std::cmp::Reverse(p.len()));
        let owned_by_anyone = |p: &[String]| {
            let p = p.to_vec();
            applied_set.touches(&p) || others.iter().any(|e| e.fields.touches(&p))
        };
        for p in to_remove {
            remove_path(&mut merged, p);
            // Containers left empty by the removal go too, unless someone owns them.
            let mut parent = &p[..p.len() - 1];
            while !parent.is_empty()
                && get_path(&merged, parent).is_some_and(is_empty_container)
                && !owned_by_anyone(parent)
            {
                remove_path(&mut merged, parent);
                parent = &parent[..parent.len() - 1];
            }
        }
        self.upsert(&mut entries, "Apply", applied_set);
        entries.retain(|e| !e.fields.is_empty());
        write_entries(&mut merged, &entries);
        Ok(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
            "status": {"type": "object", "properties": {
                "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}}
            }}
        }})
    }

    fn writer<'a>(manager: &'a str, schema: &'a Value) -> Writer<'a> {
        Writer {
            manager,
            api_version: "g/v1",
            subresource: "",
            now: "t",
            schema: Some(schema),
            status_subresource: false,
        }
    }

    #[test]
    fn fields_v1_round_trip() {
        let s = schema();
        let obj = json!({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"a": 1},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let set = FieldSet::of(&obj, Some(&s));
        let v1 = set.to_fields_v1();
        assert_eq!(v1["status"], Value::Null);
        assert_eq!(
            v1["f:status"]["f:conditions"]["k:{\"type\":\"Ready\"}"]["."],
            json!({})
        );
        assert_eq!(v1["f:metadata"], json!({"f:labels": {"f:a": {}}}));
        assert_eq!(FieldSet::from_fields_v1(&v1), set);
    }

    #[test]
    fn apply_conflicts_force_and_removal() {
        let s = schema();
        let live = writer("one", &s)
            .apply(None, &json!({"spec": {"a": 1, "b": 2}}), false)
            .expect("create");
        let err = writer("two", &s)
            .apply(Some(&live), &json!({"spec": {"a": 5}}), false)
            .expect_err("conflict");
        assert_eq!(err[0].field, ".spec.a");
        let forced = writer("two", &s)
            .apply(Some(&live), &json!({"spec": {"a": 5}}), true)
            .expect("forced");
        assert_eq!(forced["spec"], json!({"a": 5, "b": 2}));
        // "one" re-applies without b: b is removed, a is no longer its own.
        let again = writer("one", &s)
            .apply(Some(&forced), &json!({"spec": {}}), false)
            .expect("apply");
        assert_eq!(again["spec"], json!({"a": 5}));
    }

    #[test]
    fn list_map_merges_by_key() {
        let s = schema();
        let live = json!({"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}});
        let merged = merge_applied(
            &live,
            &json!({"status": {"conditions": [{"type": "B", "status": "True"}]}}),
            Some(&s),
        );
        assert_eq!(
            merged["status"]["conditions"][1],
            json!({"type": "B", "status": "True"})
        );
        assert_eq!(merged["status"]["conditions"][0]["type"], "A");
    }
}
