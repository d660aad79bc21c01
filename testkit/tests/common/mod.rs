//! What the emulator's own tests share: an emulator serving the AssetScan
//! fixture CRD, objects of that kind, the events.k8s.io Event a recorder
//! writes about one, and the `Status` of a refused call.

// Each test crate compiles this module and uses a part of it.
#![allow(dead_code)]

use assetscan_testkit::emulator::{Emulator, EmulatorOptions, parse_manifests};
use k8s_openapi::api::events::v1::Event;
use std::fmt::Debug;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::core::Status;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// `assetscans.example.com`: schema with defaults, CEL rules, a status
/// subresource and printer columns.
pub const CRD: &str = include_str!("../fixtures/assetscans-crd.yaml");

/// The fixture CRD's resource.
pub fn ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "AssetScan"),
        "assetscans",
    )
}

/// An emulator serving the fixture CRD (before the CRDs of `options`),
/// and its AssetScans in `default`.
pub async fn start(options: EmulatorOptions) -> (Emulator, Api<DynamicObject>) {
    let mut crds = parse_manifests(CRD).expect("fixture CRD parses");
    crds.extend(options.crds.iter().cloned());
    let emu = Emulator::start(EmulatorOptions { crds, ..options })
        .await
        .expect("emulator starts");
    let api = Api::namespaced_with(emu.client().expect("client"), "default", &ar());
    (emu, api)
}

/// An AssetScan of `host`.
pub fn scan(name: &str, host: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1",
        "kind": "AssetScan",
        "metadata": {"name": name},
        "spec": {"target": {"host": host}},
    }))
    .expect("valid object")
}

/// Creates the AssetScan `name` of example.org.
pub async fn create_scan(api: &Api<DynamicObject>, name: &str) -> DynamicObject {
    api.create(&PostParams::default(), &scan(name, "example.org"))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// The `Status` of a call the API refused.
pub fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The events.k8s.io/v1 Event `scan.1` a recorder writes about the scan `web`.
pub fn scan_event() -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": "scan.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.com/assetscan", "reportingInstance": "pod-1",
        "action": "Scan", "reason": "HighRiskFound", "type": "Warning", "note": "CVE-2026-0001",
        "regarding": {"kind": "AssetScan", "name": "web", "namespace": "default"},
    }))
    .expect("event")
}

/// A JSON merge patch of the object `name`.
pub async fn merge_patch<K>(api: &Api<K>, name: &str, patch: Value) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// A JSON merge patch of the status of the object `name`.
pub async fn merge_patch_status<K>(api: &Api<K>, name: &str, patch: Value) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// Asserts what a refusal says: code, reason and message, worded as
/// kube-apiserver words them.
pub fn assert_refusal(status: &Status, code: u16, reason: &str, message: &str) {
    assert_eq!(
        (status.code, status.reason.as_str(), status.message.as_str()),
        (code, reason, message)
    );
}

/// Deletes `name`, which finalizers keep: the object as marked for deletion.
pub async fn delete_marked<K>(api: &Api<K>, name: &str, params: &DeleteParams) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    api.delete(name, params)
        .await
        .unwrap_or_else(|e| panic!("delete {name}: {e}"))
        .left()
        .unwrap_or_else(|| panic!("{name} was removed, not marked"))
}

/// A namespaced CRD of group example.com, version v1, whose spec has the
/// schema `spec`.
pub fn example_crd(plural: &str, kind: &str, spec: Value) -> Value {
    let singular = plural.trim_end_matches('s');
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": spec},
                }},
            }],
        },
    })
}

/// A cluster-scoped CRD: objects of no namespace.
pub fn tags_crd() -> Value {
    let mut crd = example_crd(
        "tags",
        "Tag",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    );
    crd["spec"]["scope"] = json!("Cluster");
    crd
}

/// A CRD with a nullable field and a rule that reads it only when present.
pub fn notes_crd() -> Value {
    example_crd(
        "notes",
        "Note",
        json!({
            "type": "object",
            "x-kubernetes-validations": [{
                "rule": "!has(self.text) || self.text.size() > 0",
                "message": "text may not be empty",
            }],
            "properties": {"text": {"type": "string", "nullable": true}},
        }),
    )
}

/// A CRD whose spec may only move forward: a transition rule that names
/// the field it reports (`fieldPath`) and its reason.
pub fn counters_crd() -> Value {
    example_crd(
        "counters",
        "Counter",
        json!({
            "type": "object",
            "x-kubernetes-validations": [{
                "rule": "self.major > oldSelf.major || (self.major == oldSelf.major && self.minor >= oldSelf.minor)",
                "message": "may not go backwards",
                "fieldPath": ".major",
                "reason": "FieldValueForbidden",
            }],
            "properties": {
                "major": {"type": "integer"},
                "minor": {"type": "integer"},
            },
        }),
    )
}
