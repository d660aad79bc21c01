//! Field management: `metadata.managedFields` and server-side apply, over
//! the field sets of `fieldset`. An apply:
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

use serde_json::{Value, json};

use super::error::ApplyConflict;
use super::fieldset::{
    FieldPath, FieldSet, ListKind, atomic_map, child_schema, display_path, get_path,
    is_empty_container, item_key, list_kind, remove_path,
};
use super::meta;

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
    let meta = meta::meta_mut(obj);
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

    /// Whether `entry` is this writer's own, for `operation`.
    fn owns(&self, entry: &ManagedEntry, operation: &str) -> bool {
        entry.same_slot(self.manager, operation, self.subresource)
    }

    /// The fields this writer owns through `operation` so far.
    fn own_fields(&self, entries: &[ManagedEntry], operation: &str) -> FieldSet {
        entries
            .iter()
            .find(|e| self.owns(e, operation))
            .map(|e| e.fields.clone())
            .unwrap_or_default()
    }

    fn upsert(&self, entries: &mut Vec<ManagedEntry>, operation: &str, fields: FieldSet) {
        match entries.iter_mut().find(|e| self.owns(e, operation)) {
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
                let changed: FieldSet = new_set
                    .paths()
                    .filter(|p| get_path(old, p) != get_path(new, p))
                    .cloned()
                    .collect();
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
        let mine = self.own_fields(&entries, "Update");
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

        let conflicts = self.conflicts(&entries, live_obj, applied, &applied_set);
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
        let taken: FieldSet = conflicts.into_iter().map(|(_, _, p)| p).collect();
        for e in entries.iter_mut() {
            if !self.owns(e, "Apply") {
                e.fields = e.fields.difference(&taken);
            }
        }
        self.drop_unapplied(&mut merged, &entries, &applied_set);
        self.upsert(&mut entries, "Apply", applied_set);
        entries.retain(|e| !e.fields.is_empty());
        write_entries(&mut merged, &entries);
        Ok(merged)
    }

    /// The fields an apply would change that other managers own, as
    /// (manager, its apiVersion, path).
    fn conflicts(
        &self,
        entries: &[ManagedEntry],
        live: &Value,
        applied: &Value,
        applied_set: &FieldSet,
    ) -> Vec<(String, String, FieldPath)> {
        let mut conflicts = Vec::new();
        for path in applied_set.paths() {
            if get_path(live, path) == get_path(applied, path) || get_path(live, path).is_none() {
                continue;
            }
            for e in entries.iter().filter(|e| !self.owns(e, "Apply")) {
                if e.fields.contains(path) {
                    conflicts.push((e.manager.clone(), e.api_version.clone(), path.clone()));
                }
            }
        }
        conflicts
    }

    /// Fields this manager applied before but no longer does: dropped from
    /// `merged` unless someone else still owns them, with the containers
    /// their removal leaves empty.
    fn drop_unapplied(&self, merged: &mut Value, entries: &[ManagedEntry], applied_set: &FieldSet) {
        let dropped = self.own_fields(entries, "Apply").difference(applied_set);
        let others: Vec<&ManagedEntry> =
            entries.iter().filter(|e| !self.owns(e, "Apply")).collect();
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
            remove_path(merged, p);
            // Containers left empty by the removal go too, unless someone owns them.
            let mut parent = &p[..p.len() - 1];
            while !parent.is_empty()
                && get_path(merged, parent).is_some_and(is_empty_container)
                && !owned_by_anyone(parent)
            {
                remove_path(merged, parent);
                parent = &parent[..parent.len() - 1];
            }
        }
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
