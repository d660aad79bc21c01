//! Discovery (`/version`, `/api`, `/apis`, …) and the OpenAPI v3 documents.
//!
//! kube-rs and kubectl both discover resources before using them. The
//! legacy (non-aggregated) discovery documents are served; clients that ask
//! for aggregated discovery fall back to them, as they do against older
//! servers. The OpenAPI v3 documents describe each resource's PATCH
//! operation with its accepted media types and the `fieldValidation`
//! parameter: that is what makes `kubectl apply` use server-side field
//! validation and JSON merge patches for custom resources (kubectl only
//! computes strategic merge patches when the document offers them).

use std::sync::Arc;

use serde_json::{Value, json};

use super::registry::Registry;
use super::resources::ResourceType;

/// Kubernetes version reported by `/version`.
pub const KUBE_MINOR: &str = "32";

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-assetscan-emulator"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// Kubernetes version priority: GA > beta > alpha, then by number, descending.
fn version_priority(v: &str) -> (u8, i64, i64) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse::<i64>().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n.parse().unwrap_or(0))
    } else if tail.is_empty() {
        (2, 0)
    } else {
        return (0, -1, 0);
    };
    (stage, major, minor)
}

fn sorted_versions(mut versions: Vec<String>) -> Vec<String> {
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    versions
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    json!({
        "name": name,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

pub fn api_groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(&g, &sorted_versions(vs)))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(registry: &Registry, group: &str) -> Option<Value> {
    let (_, versions) = registry
        .groups()
        .into_iter()
        .find(|(g, _)| g == group && !g.is_empty())?;
    let mut doc = group_json(group, &sorted_versions(versions));
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    if !registry.serves_group_version(group, version) {
        return None;
    }
    let mut resources = Vec::new();
    for t in registry
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": VERBS,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if t.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: one entry per served group/version.
pub fn openapi_v3_index(registry: &Registry, generation: u64) -> Value {
    let mut paths = serde_json::Map::new();
    for (group, versions) in registry.groups() {
        for v in versions {
            let p = gv_path(&group, &v);
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={generation:016X}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// Reverse-DNS component name, e.g. `com.example.v1.AssetScan`.
fn component_name(t: &ResourceType) -> String {
    let group = if t.group.is_empty() {
        "io.k8s.api.core".to_string()
    } else {
        t.group.split('.').rev().collect::<Vec<_>>().join(".")
    };
    format!("{group}.{}.{}", t.version, t.kind)
}

/// `/openapi/v3/apis/<group>/<version>`: paths (with PATCH operations) and schemas.
pub fn openapi_v3_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    if !registry.serves_group_version(group, version) {
        return None;
    }
    let types: Vec<&Arc<ResourceType>> = registry
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"type": "object"}),
    );
    for t in types {
        let comp = component_name(t);
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let mut schema = t
            .schema
            .as_ref()
            .map(|s| s.root.clone())
            .unwrap_or_else(|| json!({"type": "object"}));
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("apiVersion".into(), json!({"type": "string"}));
            props.insert("kind".into(), json!({"type": "string"}));
            props.insert("metadata".into(), json!({"type": "object"}));
        }
        schema["x-kubernetes-group-version-kind"] = json!([gvk]);
        schemas.insert(comp.clone(), schema);

        let mut content = serde_json::Map::new();
        let patch_schema = json!({"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}});
        content.insert("application/json-patch+json".into(), patch_schema.clone());
        content.insert("application/merge-patch+json".into(), patch_schema.clone());
        content.insert("application/apply-patch+yaml".into(), patch_schema.clone());
        let query = |name: &str| json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let response = json!({"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{comp}")}}}}});
        let item = json!({
            "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": response},
            "put": {"x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk, "responses": response,
                "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation")]},
            "delete": {"x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": gvk, "responses": response},
            "patch": {
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"), query("force")],
                "requestBody": {"content": content},
                "responses": response,
            },
            "parameters": [
                {"name": "name", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}},
            ],
        });
        let base = format!("/{}", gv_path(group, version));
        let item_path = if t.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", t.plural)
        } else {
            format!("{base}/{}/{{name}}", t.plural)
        };
        paths.insert(item_path, item);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBE_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferred_version_is_highest_priority() {
        assert_eq!(
            sorted_versions(vec![
                "v1beta1".into(),
                "v2".into(),
                "v1".into(),
                "v1alpha1".into()
            ]),
            vec!["v2", "v1", "v1beta1", "v1alpha1"]
        );
    }

    #[test]
    fn core_resources_are_listed() {
        let reg = Registry::default();
        let doc = resource_list(&reg, "", "v1").expect("served");
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"configmaps") && names.contains(&"namespaces/status"));
        assert!(resource_list(&reg, "nope", "v1").is_none());
    }
}
