//! Server-side representations other than the object itself.
//!
//! * Tables: `kubectl get` asks for `as=Table;g=meta.k8s.io` and prints the
//!   columns the server returns — a CRD's `additionalPrinterColumns`
//!   (evaluated as JSONPath) after `Name`, with `date` columns shown as
//!   ages, as kube-apiserver's table convertor does.
//! * `PartialObjectMetadata(List)`: what kube-rs' `get_metadata`,
//!   `list_metadata` and `metadata_watcher` ask for.

use serde_json::{Value, json};

use super::meta;
use super::resources::{PrinterColumn, ResourceType};

/// Whether the `Accept` header asks for a `meta.k8s.io` Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
}

/// Whether the `Accept` header asks for `PartialObjectMetadata` (or its list).
pub fn wants_metadata(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        first.contains("as=PartialObjectMetadata") && first.contains("g=meta.k8s.io")
    })
}

/// An object, or a list of objects, reduced to `PartialObjectMetadata`.
pub fn as_metadata(v: &Value) -> Value {
    let partial = |o: &Value| {
        json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })
    };
    match v.get("items").and_then(Value::as_array) {
        Some(items) => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
            "items": items.iter().map(partial).collect::<Vec<_>>(),
        }),
        None if v.get("kind").and_then(Value::as_str) == Some("Status") => v.clone(),
        None => partial(v),
    }
}

/// Renders objects (API representation) as a `meta.k8s.io/v1` Table.
pub fn render(
    rt: &ResourceType,
    objects: &[Value],
    list_meta: Value,
    include_object: &str,
) -> Value {
    let mut columns = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    })];
    columns.extend(rt.printer_columns.iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut cells = vec![
                obj.pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(Value::Null),
            ];
            cells.extend(rt.printer_columns.iter().map(|c| cell(c, obj)));
            let object = match include_object {
                "None" => Value::Null,
                "Object" => obj.clone(),
                _ => json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                }),
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn cell(col: &PrinterColumn, obj: &Value) -> Value {
    let values = json_path(obj, &col.json_path);
    let Some(first) = values.first() else {
        return Value::Null;
    };
    match col.type_.as_str() {
        "date" => first
            .as_str()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| {
                Value::String(human_duration(
                    jiff::Timestamp::now().as_second() - t.as_second(),
                ))
            })
            .unwrap_or(Value::Null),
        "integer" | "number" | "boolean" => (*first).clone(),
        _ => {
            let parts: Vec<String> = values.iter().map(|v| meta::scalar_string(v)).collect();
            Value::String(parts.join(","))
        }
    }
}

/// The JSONPath subset printer columns use: `.a.b`, `[n]`, `[*]`,
/// `[?(@.type=="Ready")]`.
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut current = vec![obj];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let field = &r[..end];
            current = current.into_iter().filter_map(|v| v.get(field)).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = find_closing(r) else {
                return Vec::new();
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            current = current.into_iter().flat_map(|v| select(v, inner)).collect();
        } else {
            return Vec::new();
        }
    }
    current
}

fn find_closing(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ')' => depth -= 1,
            ']' if depth == 0 => return Some(i),
            ']' => depth -= 1,
            _ => {}
        }
    }
    None
}

fn select<'a>(v: &'a Value, inner: &str) -> Vec<&'a Value> {
    let Some(items) = v.as_array() else {
        return Vec::new();
    };
    if inner == "*" {
        return items.iter().collect();
    }
    if let Ok(i) = inner.parse::<usize>() {
        return items.get(i).into_iter().collect();
    }
    let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) else {
        return Vec::new();
    };
    let Some((lhs, rhs)) = filter.split_once("==") else {
        return Vec::new();
    };
    let field = lhs.trim().trim_start_matches('@');
    let expected = rhs.trim().trim_matches(|c| c == '"' || c == '\'');
    items
        .iter()
        .filter(|item| {
            json_path(item, field)
                .first()
                .is_some_and(|x| meta::scalar_string(x) == expected)
        })
        .collect()
}

/// Kubernetes' `duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return two_units(minutes, "m", seconds % 60, "s");
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return two_units(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return two_units(hours / 24, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return two_units(hours / 24 / 365, "y", (hours / 24) % 365, "d");
    }
    format!("{}y", hours / 24 / 365)
}

/// `3h5m`, or `3h` when the smaller unit is 0.
fn two_units(major: i64, major_unit: &str, minor: i64, minor_unit: &str) -> String {
    if minor == 0 {
        format!("{major}{major_unit}")
    } else {
        format!("{major}{major_unit}{minor}{minor_unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_subset() {
        let obj = json!({"status": {"phase": "Done", "conditions": [
            {"type": "Ready", "status": "True"}, {"type": "HighRisk", "status": "False"}]}});
        assert_eq!(json_path(&obj, ".status.phase"), vec![&json!("Done")]);
        assert_eq!(
            json_path(&obj, ".status.conditions[?(@.type==\"HighRisk\")].status"),
            vec![&json!("False")]
        );
        assert_eq!(
            json_path(&obj, ".status.conditions[0].type"),
            vec![&json!("Ready")]
        );
        assert_eq!(json_path(&obj, ".status.conditions[*].type").len(), 2);
    }

    #[test]
    fn ages() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
    }

    #[test]
    fn table_accept() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
