//! Answers where the emulator once differed from a real kube-apiserver
//! v1.28, one test per behaviour; each asserts the real server's status
//! code, reason and wording (from the apiserver and apimachinery sources).
//!
//! | behaviour                                                   | test                                             |
//! |-------------------------------------------------------------|--------------------------------------------------|
//! | empty `finalizers`/`labels`/`annotations` are dropped       | `empty_metadata_is_dropped`                      |
//! | PUT of a custom resource needs a resourceVersion            | `replace_without_resource_version_is_invalid`    |
//! | PUT of a missing object fails its UID precondition          | `replace_of_a_deleted_object_conflicts`          |
//! | `force` only with apply                                     | `force_on_a_merge_patch_is_invalid`              |
//! | apply needs a field manager                                 | `apply_without_field_manager_is_invalid`         |
//! | status schema errors are named relative to `status`        | `status_errors_name_the_field_below_status`      |
//! | `null` is absent for CEL `has()`                            | `null_fields_are_absent_for_cel`                 |
//! | an immediate delete answers a `Status`                      | `delete_without_finalizers_answers_a_status`     |
//! | marking for deletion bumps `generation`                     | `marking_for_deletion_bumps_the_generation`      |
//! | removing the last finalizer answers the object without them | `removing_the_last_finalizer_answers_without_it` |
//! | `resourceVersionMatch` needs `resourceVersion`              | `version_match_without_version_is_invalid`       |
//! | `dryRun` only takes `All`, and `All` persists nothing       | `dry_run_takes_only_all`                         |
//! | `resourceVersion=0` lists ignore `limit`                    | `lists_from_the_watch_cache_ignore_limit`        |
//! | an events.k8s.io Event's `note` is immutable                | `event_notes_are_immutable`                      |

use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use axum::http::{Method, Request};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::core::Status;
use serde_json::{Value, json};

mod common;
use common::{
    api_error, assert_refusal, counters_crd, create_scan, delete_marked, merge_patch,
    merge_patch_status, notes_crd, scan, scan_event,
};

async fn start_with(extra_crds: Vec<Value>) -> (Emulator, Api<DynamicObject>) {
    common::start(EmulatorOptions {
        crds: extra_crds,
        ..Default::default()
    })
    .await
}

async fn start() -> (Emulator, Api<DynamicObject>) {
    start_with(Vec::new()).await
}

/// Creates an AssetScan with more `metadata`.
async fn create_scan_with(api: &Api<DynamicObject>, name: &str, metadata: Value) -> DynamicObject {
    let mut obj = serde_json::to_value(scan(name, "example.org")).expect("json");
    if let (Some(meta), Some(extra)) = (obj["metadata"].as_object_mut(), metadata.as_object()) {
        meta.extend(extra.clone());
    }
    let obj: DynamicObject = serde_json::from_value(obj).expect("valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// Asserts a `422 Invalid`: its message, and the group and kind its
/// details name (the options kind for refused options).
fn assert_invalid(e: &Status, message: &str, (group, kind): (&str, &str)) {
    assert_refusal(e, 422, "Invalid", message);
    let details = e.details.as_ref().expect("details");
    assert_eq!(
        (details.group.as_str(), details.kind.as_str()),
        (group, kind)
    );
}

/// A request kube-rs' typed API would refuse to build.
async fn raw(
    api: &Api<DynamicObject>,
    method: Method,
    uri: &str,
    content_type: &str,
    body: &str,
) -> Result<Value, kube::Error> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type)
        .body(body.as_bytes().to_vec())
        .expect("request");
    api.clone().into_client().request::<Value>(request).await
}

/// A raw list of the scans in `default`, with `query`.
async fn list_scans(api: &Api<DynamicObject>, query: &str) -> Result<Value, kube::Error> {
    raw(
        api,
        Method::GET,
        &format!("{SCANS}?{query}"),
        "application/json",
        "",
    )
    .await
}

const SCANS: &str = "/apis/example.com/v1/namespaces/default/assetscans";

/// kube-runtime's `finalizer()` adds the first finalizer with this patch.
fn add_first_finalizer() -> Patch<()> {
    let ops = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]},
    ]);
    Patch::Json(serde_json::from_value(ops).expect("json patch"))
}

#[tokio::test]
async fn empty_metadata_is_dropped() {
    let (_emu, api) = start().await;
    let created = create_scan_with(
        &api,
        "a",
        json!({"finalizers": [], "labels": {}, "annotations": {}}),
    )
    .await;
    assert_eq!(created.metadata.finalizers, None);
    assert_eq!(created.metadata.labels, None);
    assert_eq!(created.metadata.annotations, None);
    api.patch("a", &PatchParams::default(), &add_first_finalizer())
        .await
        .expect("kube-runtime's first add passes on a created `finalizers: []`");

    // A user removes the last finalizer: the list goes, and kube-runtime can add again.
    let emptied = merge_patch(&api, "a", json!({"metadata": {"finalizers": []}}))
        .await
        .expect("remove the finalizers");
    assert_eq!(emptied.metadata.finalizers, None);
    let readded = api
        .patch("a", &PatchParams::default(), &add_first_finalizer())
        .await
        .expect("kube-runtime adds its finalizer again");
    assert_eq!(
        readded.metadata.finalizers,
        Some(vec!["example.com/cleanup".to_string()])
    );
}

#[tokio::test]
async fn replace_without_resource_version_is_invalid() {
    let (emu, api) = start().await;
    let mut obj = create_scan(&api, "a").await;
    obj.metadata.resource_version = None;
    obj.data["spec"]["target"]["port"] = json!(8443);
    let e = api_error(api.replace("a", &PostParams::default(), &obj).await);
    assert_invalid(
        &e,
        "assetscans.example.com \"a\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        ("example.com", "assetscans"),
    );

    // Built-in kinds allow the unconditional update.
    let cms: Api<ConfigMap> = Api::namespaced(emu.client().expect("client"), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"k": "1"}}))
            .expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let mut changed = cm.clone();
    changed.data = Some([("k".to_string(), "2".to_string())].into());
    let replaced = cms
        .replace("c", &PostParams::default(), &changed)
        .await
        .expect("unconditional update of a ConfigMap");
    assert_eq!(replaced.data, changed.data);
}

#[tokio::test]
async fn replace_of_a_deleted_object_conflicts() {
    let (_emu, api) = start().await;
    let obj = create_scan(&api, "a").await;
    let uid = obj.metadata.uid.clone().expect("uid");
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let e = api_error(api.replace("a", &PostParams::default(), &obj).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        format!(
            "Operation cannot be fulfilled on assetscans.example.com \"a\": StorageError: invalid object, Code: 4, Key: /registry/example.com/assetscans/default/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: "
        )
    );
    // Without a UID there is no precondition: the object is simply not there.
    let mut anonymous = obj;
    anonymous.metadata.uid = None;
    let e = api_error(api.replace("a", &PostParams::default(), &anonymous).await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
}

#[tokio::test]
async fn force_on_a_merge_patch_is_invalid() {
    let (_emu, api) = start().await;
    create_scan(&api, "a").await;
    let result = raw(
        &api,
        Method::PATCH,
        &format!("{SCANS}/a?force=true"),
        "application/merge-patch+json",
        r#"{"spec":{"threatIntel":"Never"}}"#,
    )
    .await;
    let e = api_error(result);
    assert_refusal(
        &e,
        422,
        "Invalid",
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
    );
    let unchanged = api.get("a").await.expect("get");
    assert_eq!(unchanged.data["spec"]["threatIntel"], "WhenNeeded");
}

#[tokio::test]
async fn apply_without_field_manager_is_invalid() {
    let (_emu, api) = start().await;
    let applied = r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a"},"spec":{"target":{"host":"example.org"}}}"#;
    let e = api_error(
        raw(
            &api,
            Method::PATCH,
            &format!("{SCANS}/a"),
            "application/apply-patch+yaml",
            applied,
        )
        .await,
    );
    assert_refusal(
        &e,
        422,
        "Invalid",
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
    );
    assert!(api.get_opt("a").await.expect("get").is_none());
}

#[tokio::test]
async fn status_errors_name_the_field_below_status() {
    let (_emu, api) = start().await;
    create_scan(&api, "a").await;
    let e = api_error(merge_patch_status(&api, "a", json!({"status": {"phase": "BOGUS"}})).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with("AssetScan.example.com \"a\" is invalid: phase: Unsupported value: \"BOGUS\": supported values: \"INIT\""),
        "{}",
        e.message
    );
    let causes = e.details.expect("details").causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(causes[0].field, "phase");
}

/// The objects of an example CRD, in the default namespace.
fn example_api(emu: &Emulator, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", kind);
    Api::namespaced_with(
        emu.client().expect("client"),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

#[tokio::test]
async fn null_fields_are_absent_for_cel() {
    let (emu, _) = start_with(vec![notes_crd()]).await;
    let notes = example_api(&emu, "Note", "notes");
    let note = |name: &str, text: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Note",
            "metadata": {"name": name}, "spec": {"text": text},
        }))
        .expect("note")
    };
    let created = notes
        .create(&PostParams::default(), &note("n", Value::Null))
        .await
        .expect("a null field is not `has()`: the rule does not read it");
    assert_eq!(created.data["spec"]["text"], Value::Null, "nullable: kept");
    let e = api_error(
        notes
            .create(&PostParams::default(), &note("m", json!("")))
            .await,
    );
    assert_eq!(
        e.message,
        "Note.example.com \"m\" is invalid: spec: Invalid value: \"object\": text may not be empty"
    );
}

#[tokio::test]
async fn delete_without_finalizers_answers_a_status() {
    let (_emu, api) = start().await;
    let created = create_scan(&api, "a").await;
    let answer = api
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let status = answer.right().expect("a Status, not the object");
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    let details = status.details.expect("details");
    assert_eq!(details.name, "a");
    assert_eq!(details.group, "example.com");
    assert_eq!(details.kind, "assetscans");
    assert_eq!(Some(details.uid), created.metadata.uid);
}

#[tokio::test]
async fn marking_for_deletion_bumps_the_generation() {
    let (_emu, api) = start().await;
    let created = create_scan_with(&api, "a", json!({"finalizers": ["example.com/cleanup"]})).await;
    assert_eq!(created.metadata.generation, Some(1));
    let marked = delete_marked(&api, "a", &DeleteParams::default()).await;
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.generation, Some(2));
    // A second delete changes nothing.
    let again = delete_marked(&api, "a", &DeleteParams::default()).await;
    assert_eq!(again.metadata.generation, Some(2));
    assert_eq!(
        again.metadata.resource_version,
        marked.metadata.resource_version
    );
}

#[tokio::test]
async fn removing_the_last_finalizer_answers_without_it() {
    let (_emu, api) = start().await;
    create_scan_with(&api, "a", json!({"finalizers": ["example.com/cleanup"]})).await;
    api.delete("a", &DeleteParams::default())
        .await
        .expect("mark");
    let answered = merge_patch(&api, "a", json!({"metadata": {"finalizers": null}}))
        .await
        .expect("remove the last finalizer");
    assert_eq!(answered.metadata.finalizers, None);
    assert!(answered.metadata.deletion_timestamp.is_some());
    assert!(api.get_opt("a").await.expect("get").is_none(), "gone");
}

#[tokio::test]
async fn version_match_without_version_is_invalid() {
    let (_emu, api) = start().await;
    let e = api_error(list_scans(&api, "resourceVersionMatch=NotOlderThan").await);
    assert_invalid(
        &e,
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ("meta.k8s.io", "ListOptions"),
    );
    list_scans(&api, "resourceVersion=0&resourceVersionMatch=NotOlderThan")
        .await
        .expect("with a version it is fine");
}

#[tokio::test]
async fn dry_run_takes_only_all() {
    let (emu, api) = start().await;
    let body = serde_json::to_string(&scan("a", "example.org")).expect("json");
    let e = api_error(
        raw(
            &api,
            Method::POST,
            &format!("{SCANS}?dryRun=Bogus"),
            "application/json",
            &body,
        )
        .await,
    );
    assert_refusal(
        &e,
        422,
        "Invalid",
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Bogus\"}: supported values: \"All\"",
    );
    assert!(
        api.get_opt("a").await.expect("get").is_none(),
        "not persisted"
    );

    let rv = emu.resource_version();
    let tried = api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &scan("a", "example.org"),
        )
        .await
        .expect("dry run");
    assert_eq!(tried.metadata.name.as_deref(), Some("a"));
    assert!(
        api.get_opt("a").await.expect("get").is_none(),
        "dryRun=All persists nothing"
    );
    assert_eq!(emu.resource_version(), rv);
}

#[tokio::test]
async fn lists_from_the_watch_cache_ignore_limit() {
    let (_emu, api) = start().await;
    for name in ["a", "b", "c"] {
        create_scan(&api, name).await;
    }
    let cached = list_scans(&api, "resourceVersion=0&limit=1")
        .await
        .expect("list");
    assert_eq!(cached["items"].as_array().map(Vec::len), Some(3));
    assert!(cached["metadata"].get("continue").is_none());
    // Without resourceVersion=0 the limit pages, as etcd does.
    let paged = list_scans(&api, "limit=1").await.expect("list");
    assert_eq!(paged["items"].as_array().map(Vec::len), Some(1));
    assert!(paged["metadata"]["continue"].is_string());
}

#[tokio::test]
async fn event_notes_are_immutable() {
    let (emu, _) = start().await;
    let events: Api<Event> = Api::namespaced(emu.client().expect("client"), "default");
    let ev = scan_event();
    events
        .create(&PostParams::default(), &ev)
        .await
        .expect("create");
    let e = api_error(merge_patch(&events, "scan.1", json!({"note": "changed"})).await);
    assert_refusal(
        &e,
        422,
        "Invalid",
        "Event \"scan.1\" is invalid: message: Invalid value: \"changed\": field is immutable",
    );
    // What recorders do update: the series.
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"}});
    let updated = merge_patch(&events, "scan.1", series)
        .await
        .expect("series may change");
    assert_eq!(updated.note.as_deref(), Some("CVE-2026-0001"));
}

/// As kube-apiserver v1.28.7 answers: a transition rule is never
/// ratcheted, not even when the field it names did not change, and its
/// refusal carries the rule's reason at the named field.
#[tokio::test]
async fn a_transition_rule_is_not_ratcheted_and_reports_its_field_and_reason() {
    let (emu, _) = start_with(vec![counters_crd()]).await;
    let counters = example_api(&emu, "Counter", "counters");
    let counter: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Counter",
        "metadata": {"name": "c"}, "spec": {"major": 5, "minor": 3},
    }))
    .expect("counter");
    counters
        .create(&PostParams::default(), &counter)
        .await
        .expect("created");
    let backwards = json!({"spec": {"minor": 2}});
    let e = api_error(
        counters
            .patch("c", &PatchParams::default(), &Patch::Merge(&backwards))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let causes = e.details.expect("details").causes;
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(
        (causes[0].reason.as_str(), causes[0].field.as_str()),
        ("FieldValueForbidden", "spec.major")
    );
    assert_eq!(causes[0].message, "Forbidden: may not go backwards");
    let forward = json!({"spec": {"minor": 4}});
    counters
        .patch("c", &PatchParams::default(), &Patch::Merge(&forward))
        .await
        .expect("forward passes");
}
