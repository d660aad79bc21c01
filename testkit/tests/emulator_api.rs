//! The table of API behaviours the emulator must get right, each checked
//! through a real `kube::Client` the way the operator talks to a cluster.
//!
//! | behaviour                                  | test                                        |
//! |--------------------------------------------|---------------------------------------------|
//! | resourceVersion conflict, AlreadyExists    | `stale_resource_version_conflicts`          |
//! | concurrent patches of one object all kept  | `concurrent_patches_of_one_object_are_all_kept` |
//! | generation bump on spec changes only       | `generation_bumps_on_spec_changes_only`     |
//! | status subresource kept apart              | `status_is_kept_apart_from_the_rest`        |
//! | watch resume, bookmarks, 410               | `watch_resumes_from_a_version_and_expires`  |
//! | finalizer-blocked delete                   | `finalizers_block_deletion`                 |
//! | CEL on create and status transition        | `cel_rules_reject_create_and_transition`    |
//! | schema rejection with field path, pruning  | `schema_violations_name_the_field`          |
//! | list pagination (consistent snapshot, 410) | `pagination_is_a_consistent_snapshot`       |
//! | label and field selectors                  | `label_and_field_selectors`                 |
//! | fault injection                            | `fault_injection`, `watch_streams_can_be_ended_or_cut` |
//! | server-side apply ownership                | `server_side_apply_tracks_ownership`        |
//! | patch media types, JSON patch `test`       | `patch_types`                               |
//! | namespaces, generateName, CRDs at runtime  | `namespaces_and_generate_name`, `crd_created_through_the_api_is_served` |
//! | events.k8s.io and core events share objects| `events_are_one_storage_two_views`          |
//! | streaming lists (`sendInitialEvents`)      | `streaming_list_watch_ends_initial_events_with_a_bookmark` |
//! | PartialObjectMetadata responses            | `metadata_only_representations`             |
//! | the operator's own `crds/` load            | `the_operators_crds_load`                   |
//! | shutdown                                   | `shutdown_stops_serving`                    |
//! | garbage collection of dependents           | `owners_take_their_dependents_with_them`, `orphan_and_foreground_propagation` |
//! | API server outage                          | `outage_refuses_requests_and_keeps_the_data`, `outage_from_the_control_path_ends_by_itself` |
//! | request counters                           | `requests_are_counted_by_resource_verb_and_outcome` |

use std::time::{Duration, Instant};

use assetscan_testkit::emulator::{
    Availability, CodeClass, Emulator, EmulatorOptions, EventType, Fault, Operation, Verb,
    parse_manifests,
};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchParams,
};
use kube::core::WatchEvent;
use serde_json::{Value, json};

mod common;
use common::{
    CRD, api_error, ar, assert_refusal, create_scan, delete_marked, merge_patch,
    merge_patch_status, scan, scan_event,
};

async fn start() -> (Emulator, Api<DynamicObject>) {
    common::start(EmulatorOptions {
        namespaces: vec!["other".into()],
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await
}

fn rv(obj: &DynamicObject) -> String {
    obj.metadata
        .resource_version
        .clone()
        .expect("resourceVersion")
}

fn generation(obj: &DynamicObject) -> i64 {
    obj.metadata.generation.expect("generation")
}

#[tokio::test]
async fn stale_resource_version_conflicts() {
    let (_emu, api) = start().await;
    let created = create_scan(&api, "a").await;
    let dup = api_error(
        api.create(&PostParams::default(), &scan("a", "example.org"))
            .await,
    );
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "assetscans.example.com \"a\" already exists");

    let mut first = created.clone();
    first.data["spec"]["target"]["port"] = json!(8443);
    let updated = api
        .replace("a", &PostParams::default(), &first)
        .await
        .expect("update with current rv");
    assert_ne!(rv(&updated), rv(&created));

    let mut stale = created.clone();
    stale.data["spec"]["target"]["port"] = json!(9443);
    let conflict = api_error(api.replace("a", &PostParams::default(), &stale).await);
    assert_refusal(
        &conflict,
        409,
        "Conflict",
        "Operation cannot be fulfilled on assetscans.example.com \"a\": the object has been modified; please apply your changes to the latest version and try again",
    );
    // A merge patch carrying a stale resourceVersion is a precondition too.
    let patch =
        json!({"metadata": {"resourceVersion": rv(&created)}, "spec": {"target": {"port": 1}}});
    assert_eq!(api_error(merge_patch(&api, "a", patch).await).code, 409);
}

/// Writes are validated outside the emulator's state lock: patches of one
/// object that race there are redone from the newer object, as the API
/// server's storage layer redoes them, never committed over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_of_one_object_are_all_kept() {
    const PATCHES: usize = 48;
    let (emu, api) = start().await;
    let created = create_scan(&api, "busy").await;
    let patches = (0..PATCHES).map(|i| {
        let api = api.clone();
        tokio::spawn(async move {
            let patch = json!({"metadata": {"labels": {format!("writer-{i}"): "done"}}});
            merge_patch(&api, "busy", patch).await
        })
    });
    for result in futures::future::join_all(patches).await {
        result
            .expect("patch task")
            .expect("every patch is accepted");
    }
    let stored = api.get("busy").await.expect("get");
    let labels = stored.metadata.labels.clone().unwrap_or_default();
    let missing: Vec<usize> = (0..PATCHES)
        .filter(|i| !labels.contains_key(&format!("writer-{i}")))
        .collect();
    assert!(missing.is_empty(), "patches lost: {missing:?}");
    let writes = emu
        .history("assetscans", Some("default"), "busy")
        .iter()
        .filter(|w| w.operation == Operation::MergePatch)
        .count();
    assert_eq!(writes, PATCHES, "one committed write per patch");
    assert_ne!(rv(&stored), rv(&created));
}

#[tokio::test]
async fn generation_bumps_on_spec_changes_only() {
    let (emu, api) = start().await;
    let created = create_scan(&api, "g").await;
    assert_eq!(generation(&created), 1);
    let labelled = merge_patch(&api, "g", json!({"metadata": {"labels": {"a": "b"}}}))
        .await
        .expect("label");
    assert_eq!(generation(&labelled), 1, "metadata-only change");
    let status = merge_patch_status(&api, "g", json!({"status": {"phase": "INIT"}}))
        .await
        .expect("status");
    assert_eq!(generation(&status), 1, "status-only change");
    let spec = merge_patch(&api, "g", json!({"spec": {"target": {"port": 80}}}))
        .await
        .expect("spec");
    assert_eq!(generation(&spec), 2);
    let same = merge_patch(&api, "g", json!({"spec": {"target": {"port": 80}}}))
        .await
        .expect("no-op");
    assert_eq!(
        (generation(&same), rv(&same)),
        (2, rv(&spec)),
        "a no-op write is not stored"
    );
    assert_eq!(emu.history("assetscans", Some("default"), "g").len(), 4);
}

#[tokio::test]
async fn status_is_kept_apart_from_the_rest() {
    let (_emu, api) = start().await;
    let mut obj = scan("s", "example.org");
    obj.data["status"] = json!({"phase": "FINISHED"});
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    // Each write carries both parts; only one part is taken from each.
    let both = |phase: &str, intel: &str| json!({"status": {"phase": phase}, "spec": {"threatIntel": intel}});
    let after_main = merge_patch(&api, "s", both("FINISHED", "Always"))
        .await
        .expect("main patch");
    assert!(
        after_main.data.get("status").is_none(),
        "status ignored on the main resource"
    );
    assert_eq!(after_main.data["spec"]["threatIntel"], "Always");

    let after_status = merge_patch_status(&api, "s", both("INIT", "Never"))
        .await
        .expect("status patch");
    assert_eq!(after_status.data["status"]["phase"], "INIT");
    assert_eq!(
        after_status.data["status"]["fencingToken"], 0,
        "status defaults applied"
    );
    assert_eq!(
        after_status.data["spec"]["threatIntel"], "Always",
        "spec ignored on /status"
    );

    let online = |obj: &DynamicObject| {
        let mut replaced = obj.clone();
        replaced.data["status"]["phase"] = json!("ASSET_ONLINE");
        replaced
    };
    let put = api
        .replace("s", &PostParams::default(), &online(&after_status))
        .await
        .expect("put main");
    assert_eq!(
        put.data["status"]["phase"], "INIT",
        "PUT on the main resource keeps the stored status"
    );
    let put = api
        .replace_status("s", &PostParams::default(), &online(&put))
        .await
        .expect("put status");
    assert_eq!(put.data["status"]["phase"], "ASSET_ONLINE");
}

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) -> WatchEvent<DynamicObject> {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("event within 5s")
        .expect("stream open")
        .expect("event decodes")
}

/// A watch of the scans from `version`.
async fn watch_scans(
    api: &Api<DynamicObject>,
    params: &WatchParams,
    version: &str,
) -> BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>> {
    api.watch(params, version).await.expect("watch").boxed()
}

/// The next event must be the ERROR of a watch from a version no longer
/// kept: `410 Expired`, as kube-runtime's watcher expects to re-list.
async fn assert_expired(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) {
    match next_event(stream).await {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn watch_resumes_from_a_version_and_expires() {
    let (emu, api) = start().await;
    create_scan(&api, "w1").await;
    let listed = api.list(&ListParams::default()).await.expect("list");
    let from = listed.metadata.resource_version.clone().expect("list rv");
    create_scan(&api, "w2").await;
    merge_patch(&api, "w1", json!({"spec": {"threatIntel": "Never"}}))
        .await
        .expect("patch");
    api.delete("w2", &DeleteParams::default())
        .await
        .expect("delete");

    let mut stream = watch_scans(&api, &WatchParams::default().timeout(10), &from).await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match next_event(&mut stream).await {
            WatchEvent::Added(o) => seen.push(("ADDED", o.metadata.name.unwrap_or_default())),
            WatchEvent::Modified(o) => seen.push(("MODIFIED", o.metadata.name.unwrap_or_default())),
            WatchEvent::Deleted(o) => seen.push(("DELETED", o.metadata.name.unwrap_or_default())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("unexpected error event {e:?}"),
        }
    }
    assert_eq!(
        seen,
        vec![
            ("ADDED", "w2".into()),
            ("MODIFIED", "w1".into()),
            ("DELETED", "w2".into())
        ]
    );
    // With nothing happening, the stream carries bookmarks at the latest version.
    let latest = emu.resource_version().to_string();
    match next_event(&mut stream).await {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, latest),
        other => panic!("expected a bookmark, got {other:?}"),
    }

    emu.compact();
    let mut expired = watch_scans(&api, &WatchParams::default(), &from).await;
    assert_expired(&mut expired).await;
    let gone = api_error(
        api.list(
            &ListParams::default()
                .at(&from)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await,
    );
    assert_eq!(gone.code, 410);
}

#[tokio::test]
async fn finalizers_block_deletion() {
    let (emu, api) = start().await;
    let mut obj = scan("f", "example.org");
    obj.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
    let from = emu.resource_version().to_string();
    let mut stream = watch_scans(
        &api,
        &WatchParams::default().fields("metadata.name=f"),
        &from,
    )
    .await;

    let marked = delete_marked(&api, "f", &DeleteParams::default()).await;
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(api.get("f").await.is_ok(), "finalizer keeps the object");
    let refused = api_error(
        merge_patch(
            &api,
            "f",
            json!({"metadata": {"finalizers": ["example.com/cleanup", "new"]}}),
        )
        .await,
    );
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    assert!(
        refused
            .message
            .contains("no new finalizers can be added if the object is being deleted")
    );

    let remove = json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/cleanup"},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]);
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(remove).expect("patch")),
    )
    .await
    .expect("remove finalizer");
    assert!(
        api.get_opt("f").await.expect("get").is_none(),
        "last finalizer gone: object deleted"
    );

    assert!(
        matches!(next_event(&mut stream).await, WatchEvent::Modified(o) if o.metadata.deletion_timestamp.is_some())
    );
    assert!(matches!(
        next_event(&mut stream).await,
        WatchEvent::Deleted(_)
    ));
    let events: Vec<EventType> = emu
        .history("assetscans", Some("default"), "f")
        .iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(
        events,
        vec![EventType::Added, EventType::Modified, EventType::Deleted]
    );
}

#[tokio::test]
async fn cel_rules_reject_create_and_transition() {
    let (emu, api) = start().await;
    let refused = api_error(
        api.create(&PostParams::default(), &scan("local", "localhost"))
            .await,
    );
    assert_refusal(
        &refused,
        422,
        "Invalid",
        "AssetScan.example.com \"local\" is invalid: spec.target.host: Forbidden: scanning localhost is not allowed",
    );
    let cause = &refused.details.as_ref().expect("details").causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueForbidden", "spec.target.host")
    );

    create_scan(&api, "t").await;
    let set = |token: i64, revision: i64| {
        let api = api.clone();
        async move {
            merge_patch_status(
                &api,
                "t",
                json!({"status": {"fencingToken": token, "revision": revision}}),
            )
            .await
        }
    };
    set(5, 3).await.expect("first status");
    set(5, 3).await.expect("(5,3) -> (5,3)");
    for (token, revision) in [(5, 2), (4, 9)] {
        let backwards = api_error(set(token, revision).await);
        assert_eq!(backwards.code, 422);
        assert_eq!(
            backwards.message,
            "AssetScan.example.com \"t\" is invalid: status: Invalid value: \"object\": status may not go backwards in (fencingToken, revision)"
        );
    }
    set(6, 1).await.expect("(5,3) -> (6,1)");
    let tokens: Vec<(Value, Value)> = emu
        .history("assetscans", Some("default"), "t")
        .iter()
        .filter(|r| r.subresource.as_deref() == Some("status"))
        .map(|r| {
            (
                r.object["status"]["fencingToken"].clone(),
                r.object["status"]["revision"].clone(),
            )
        })
        .collect();
    assert_eq!(
        tokens,
        vec![(json!(5), json!(3)), (json!(6), json!(1))],
        "rejected writes are not recorded"
    );
}

#[tokio::test]
async fn schema_violations_name_the_field() {
    let (_emu, api) = start().await;
    let mut bad = scan("bad", "example.org");
    bad.data["spec"]["target"]["port"] = json!(70000);
    let err = api_error(api.create(&PostParams::default(), &bad).await);
    assert_eq!(
        err.message,
        "AssetScan.example.com \"bad\" is invalid: spec.target.port: Invalid value: 70000: spec.target.port in body should be less than or equal to 65535"
    );
    let cause = &err.details.as_ref().expect("details").causes[0];
    assert_eq!(
        (cause.reason.as_str(), cause.field.as_str()),
        ("FieldValueInvalid", "spec.target.port")
    );
    assert_eq!(
        err.details.as_ref().map(|d| d.kind.as_str()),
        Some("AssetScan")
    );

    let worse: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "AssetScan", "metadata": {"name": "worse"},
        "spec": {"target": {"host": "Not A Host"}, "threatIntel": "Sometimes", "notify": ["slack", "slack"]},
    }))
    .expect("object");
    let err = api_error(api.create(&PostParams::default(), &worse).await);
    let fields: Vec<&str> = err
        .details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert!(
        fields.contains(&"spec.target.host")
            && fields.contains(&"spec.threatIntel")
            && fields.contains(&"spec.notify[1]"),
        "{fields:?}"
    );
    assert!(err.message.contains("spec.threatIntel: Unsupported value: \"Sometimes\": supported values: \"WhenNeeded\", \"Always\", \"Never\""), "{}", err.message);
    assert!(
        err.message
            .starts_with("AssetScan.example.com \"worse\" is invalid: ["),
        "several causes are bracketed"
    );

    // Unknown fields are pruned, defaults applied; Strict turns pruning into 400.
    let mut extra = scan("extra", "example.org");
    extra.data["spec"]["bogus"] = json!(true);
    let created = api
        .create(&PostParams::default(), &extra)
        .await
        .expect("create prunes");
    assert!(created.data["spec"].get("bogus").is_none());
    assert_eq!(created.data["spec"]["target"]["port"], 443);
    assert_eq!(created.data["spec"]["threatIntel"], "WhenNeeded");
    let strict = api_error(
        api.patch(
            "extra",
            &PatchParams::default().validation_strict(),
            &Patch::Merge(json!({"spec": {"bogus": 1}})),
        )
        .await,
    );
    assert_eq!((strict.code, strict.reason.as_str()), (400, "BadRequest"));
    assert!(
        strict
            .message
            .contains("strict decoding error: unknown field \"spec.bogus\""),
        "{}",
        strict.message
    );
}

#[tokio::test]
async fn pagination_is_a_consistent_snapshot() {
    let (emu, api) = start().await;
    for i in 0..5 {
        create_scan(&api, &format!("p{i}")).await;
    }
    let page1 = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    assert_eq!(page1.items.len(), 2);
    assert_eq!(page1.metadata.remaining_item_count, Some(3));
    let token = page1.metadata.continue_.clone().expect("continue token");
    // Written between pages: not part of this list.
    create_scan(&api, "p9").await;
    api.delete("p4", &DeleteParams::default())
        .await
        .expect("delete");
    let mut names: Vec<String> = page1
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    let mut token = Some(token);
    while let Some(t) = token {
        let page = api
            .list(&ListParams::default().limit(2).continue_token(&t))
            .await
            .expect("page");
        assert_eq!(
            page.metadata.resource_version,
            page1.metadata.resource_version
        );
        names.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
    }
    assert_eq!(names, vec!["p0", "p1", "p2", "p3", "p4"]);

    // A continue token whose snapshot was compacted away answers 410.
    let page = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("page");
    let token = page.metadata.continue_.expect("more pages");
    create_scan(&api, "p10").await;
    emu.compact();
    let gone = api_error(
        api.list(&ListParams::default().limit(1).continue_token(&token))
            .await,
    );
    assert_eq!((gone.code, gone.reason.as_str()), (410, "Expired"));

    // Across namespaces: p0-p3, p9, p10 in default and one in "other".
    let all: Api<DynamicObject> = Api::all_with(api.clone().into_client(), &ar());
    let other: Api<DynamicObject> = Api::namespaced_with(api.into_client(), "other", &ar());
    create_scan(&other, "elsewhere").await;
    assert_eq!(
        all.list(&ListParams::default())
            .await
            .expect("all namespaces")
            .items
            .len(),
        7
    );
}

#[tokio::test]
async fn label_and_field_selectors() {
    let (_emu, api) = start().await;
    for (name, tier) in [
        ("db1", Some("db")),
        ("c1", Some("cache")),
        ("web", Some("web")),
        ("bare", None),
    ] {
        let mut obj = scan(name, "example.org");
        if let Some(t) = tier {
            obj.metadata.labels = Some([("tier".to_string(), t.to_string())].into());
        }
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create");
    }
    let names = |sel: &'static str, fields: &'static str| {
        let api = api.clone();
        async move {
            let mut lp = ListParams::default();
            if !sel.is_empty() {
                lp = lp.labels(sel);
            }
            if !fields.is_empty() {
                lp = lp.fields(fields);
            }
            let mut n: Vec<String> = api
                .list(&lp)
                .await
                .expect("list")
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            n.sort();
            n
        }
    };
    assert_eq!(names("tier=db", "").await, vec!["db1"]);
    assert_eq!(names("tier==db", "").await, vec!["db1"]);
    assert_eq!(names("tier!=db", "").await, vec!["bare", "c1", "web"]);
    assert_eq!(names("tier in (db,cache)", "").await, vec!["c1", "db1"]);
    assert_eq!(
        names("tier notin (db,cache)", "").await,
        vec!["bare", "web"]
    );
    assert_eq!(names("tier", "").await, vec!["c1", "db1", "web"]);
    assert_eq!(names("!tier", "").await, vec!["bare"]);
    assert_eq!(names("", "metadata.name=web").await, vec!["web"]);
    assert_eq!(
        names("tier", "metadata.name!=web,metadata.namespace=default").await,
        vec!["c1", "db1"]
    );
    let bad = api_error(
        api.list(&ListParams::default().fields("spec.threatIntel=Always"))
            .await,
    );
    assert_eq!((bad.code, bad.reason.as_str()), (400, "BadRequest"));
}

#[tokio::test]
async fn fault_injection() {
    let (emu, api) = start().await;
    create_scan(&api, "x").await;
    let status = json!({"status": {"phase": "INIT"}});

    emu.faults()
        .inject("PATCH", "/assetscans/x/status", 2, Fault::Conflict);
    for _ in 0..2 {
        let e = api_error(merge_patch_status(&api, "x", status.clone()).await);
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
        assert!(
            e.message
                .starts_with("Operation cannot be fulfilled on assetscans.example.com \"x\"")
        );
    }
    merge_patch_status(&api, "x", status.clone())
        .await
        .expect("third attempt passes");

    emu.faults()
        .inject("GET", "/assetscans/x", 1, Fault::InternalError);
    let e = api_error(api.get("x").await);
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));

    // kube clients retry 429s on their own, honouring Retry-After.
    emu.faults().inject(
        "GET",
        "/assetscans/x",
        1,
        Fault::TooManyRequests {
            retry_after_seconds: 1,
        },
    );
    let started = Instant::now();
    api.get("x").await.expect("retried transparently");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After was honoured"
    );

    emu.faults()
        .delay("*", "/assetscans", 1, Duration::from_millis(300));
    let started = Instant::now();
    api.get("x").await.expect("slow but fine");
    assert!(started.elapsed() >= Duration::from_millis(300));

    let fired = emu.faults().fired();
    assert_eq!(fired.len(), 5);
    assert_eq!(
        fired[3].fault,
        Fault::TooManyRequests {
            retry_after_seconds: 1
        }
    );
    assert_eq!(emu.faults().pending(), 0);
    let writes: Vec<Operation> = emu
        .history("assetscan", None, "x")
        .iter()
        .map(|r| r.operation)
        .collect();
    assert_eq!(
        writes,
        vec![Operation::Create, Operation::MergePatch],
        "failed attempts are not writes"
    );
}

async fn wait_for_watches(emu: &Emulator, n: usize) {
    assetscan_testkit::wait::until("the watches open", Duration::from_secs(5), async || {
        emu.open_watches() >= n
    })
    .await;
}

/// A raw HTTP/1.1 watch, read to EOF: shows whether the chunked body was
/// terminated properly (`0\r\n\r\n`) or cut.
async fn raw_watch(emu: &Emulator, signal: impl FnOnce() -> usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", emu.port()))
        .await
        .expect("connect");
    let req = "GET /apis/example.com/v1/namespaces/default/assetscans?watch=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    tcp.write_all(req.as_bytes()).await.expect("send");
    wait_for_watches(emu, 1).await;
    assert_eq!(signal(), 1);
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out))
        .await
        .expect("eof")
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn watch_streams_can_be_ended_or_cut() {
    let (emu, api) = start().await;
    let ended = raw_watch(&emu, || emu.faults().end_watches()).await;
    assert!(
        ended.starts_with("HTTP/1.1 200") && ended.ends_with("0\r\n\r\n"),
        "clean end: {ended:?}"
    );
    let cut = raw_watch(&emu, || emu.faults().abort_watches()).await;
    assert!(
        cut.starts_with("HTTP/1.1 200") && !cut.ends_with("0\r\n\r\n"),
        "cut mid-stream: {cut:?}"
    );

    // kube-rs treats both as a resumable end of the watch: the stream finishes, it does not hang.
    let mut stream = watch_scans(&api, &WatchParams::default(), "0").await;
    wait_for_watches(&emu, 1).await;
    emu.faults().abort_watches();
    let next = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .expect("finishes");
    assert!(matches!(next, Ok(None)), "{next:?}");
}

/// A server-side apply to the scan `ssa`.
async fn apply_to_ssa(
    api: &Api<DynamicObject>,
    params: &PatchParams,
    applied: &Value,
) -> kube::Result<DynamicObject> {
    api.patch("ssa", params, &Patch::Apply(applied)).await
}

#[tokio::test]
async fn server_side_apply_tracks_ownership() {
    let (_emu, api) = start().await;
    let applied = json!({"apiVersion": "example.com/v1", "kind": "AssetScan", "metadata": {"name": "ssa"},
        "spec": {"target": {"host": "example.org", "port": 8080}, "notify": ["slack"]}});
    let created = apply_to_ssa(&api, &PatchParams::apply("alice"), &applied)
        .await
        .expect("apply creates");
    let mf = created
        .metadata
        .managed_fields
        .clone()
        .expect("managedFields");
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("alice"), Some("Apply"))
    );
    let fields = serde_json::to_value(&mf[0].fields_v1).expect("fieldsV1");
    assert_eq!(fields["f:spec"]["f:notify"]["v:\"slack\""], json!({}));

    let bob = json!({"apiVersion": "example.com/v1", "kind": "AssetScan", "metadata": {"name": "ssa"},
        "spec": {"target": {"host": "example.org", "port": 9090}}});
    let conflict = api_error(apply_to_ssa(&api, &PatchParams::apply("bob"), &bob).await);
    assert_refusal(
        &conflict,
        409,
        "Conflict",
        "Apply failed with 1 conflict: conflict with \"alice\" using example.com/v1: .spec.target.port",
    );
    let forced = apply_to_ssa(&api, &PatchParams::apply("bob").force(), &bob)
        .await
        .expect("force");
    assert_eq!(forced.data["spec"]["target"]["port"], 9090);

    // alice stops applying notify: it is removed, as nobody else owns it.
    let alice_again = json!({"apiVersion": "example.com/v1", "kind": "AssetScan", "metadata": {"name": "ssa"},
        "spec": {"target": {"host": "example.org"}}});
    let pruned = apply_to_ssa(&api, &PatchParams::apply("alice"), &alice_again)
        .await
        .expect("apply");
    assert!(pruned.data["spec"].get("notify").is_none());
    assert_eq!(
        pruned.data["spec"]["target"]["port"], 9090,
        "bob's field stays"
    );

    // Status through apply, by its own manager, recorded with subresource: status.
    let status = json!({"apiVersion": "example.com/v1", "kind": "AssetScan", "metadata": {"name": "ssa"},
        "status": {"phase": "INIT", "conditions": [{"type": "Ready", "status": "False", "reason": "Pending"}]}});
    let with_status = api
        .patch_status(
            "ssa",
            &PatchParams::apply("controller").force(),
            &Patch::Apply(&status),
        )
        .await
        .expect("status apply");
    let entry = with_status
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("controller"))
        .expect("controller entry");
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    assert_eq!(with_status.data["status"]["conditions"][0]["type"], "Ready");
}

#[tokio::test]
async fn patch_types() {
    let (_emu, api) = start().await;
    create_scan(&api, "p").await;
    let smp = api_error(
        api.patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await,
    );
    assert_eq!(
        (smp.code, smp.reason.as_str()),
        (415, "UnsupportedMediaType")
    );

    let failing_test = json!([{"op": "test", "path": "/spec/threatIntel", "value": "Never"},
        {"op": "replace", "path": "/spec/threatIntel", "value": "Always"}]);
    let e = api_error(
        api.patch(
            "p",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(failing_test).expect("patch")),
        )
        .await,
    );
    assert_eq!(e.code, 422);
    let ok = json!([{"op": "test", "path": "/spec/threatIntel", "value": "WhenNeeded"},
        {"op": "replace", "path": "/spec/threatIntel", "value": "Always"}]);
    let patched = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(ok).expect("patch")),
        )
        .await
        .expect("json patch");
    assert_eq!(patched.data["spec"]["threatIntel"], "Always");
}

#[tokio::test]
async fn namespaces_and_generate_name() {
    let (emu, api) = start().await;
    let nowhere: Api<DynamicObject> =
        Api::namespaced_with(api.clone().into_client(), "nowhere", &ar());
    let e = api_error(
        nowhere
            .create(&PostParams::default(), &scan("a", "example.org"))
            .await,
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    let mut generated = scan("", "example.org");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("scan-".into());
    let created = api
        .create(&PostParams::default(), &generated)
        .await
        .expect("generateName");
    let name = created.metadata.name.clone().expect("name");
    assert!(name.starts_with("scan-") && name.len() == 10, "{name}");
    assert_eq!(
        created.metadata.namespace.as_deref(),
        Some("default"),
        "namespace defaulted from the URL"
    );
    assert_eq!(created.metadata.uid.as_ref().map(String::len), Some(36));
    assert!(created.metadata.creation_timestamp.is_some());

    // Deleting a namespace deletes what is in it.
    let other: Api<DynamicObject> = Api::namespaced_with(api.into_client(), "other", &ar());
    create_scan(&other, "o").await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(emu.client().expect("client"));
    namespaces
        .delete("other", &DeleteParams::default())
        .await
        .expect("delete namespace");
    assert!(other.get_opt("o").await.expect("get").is_none());
    assert!(namespaces.get_opt("other").await.expect("get").is_none());
}

#[tokio::test]
async fn crd_created_through_the_api_is_served() {
    let emu = Emulator::start(EmulatorOptions::default())
        .await
        .expect("starts");
    let client = emu.client().expect("client");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let crd = serde_json::from_value(parse_manifests(CRD).expect("fixture").remove(0))
        .expect("typed CRD");
    let created = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let established = created
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(
        established
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    assert!(discovery.has_group("example.com"));
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar());
    create_scan(&api, "late").await;

    crds.delete("assetscans.example.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    let e = api_error(api.get("late").await);
    assert_eq!(e.code, 404, "the resource is gone with its CRD");
}

#[tokio::test]
async fn events_are_one_storage_two_views() {
    let (emu, api) = start().await;
    let client = api.into_client();
    let new_events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let core_events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, "default");
    let ev = scan_event();
    new_events
        .create(&PostParams::default(), &ev)
        .await
        .expect("create events.k8s.io event");
    let core = core_events
        .list(&ListParams::default().fields("involvedObject.name=web,reason=HighRiskFound"))
        .await
        .expect("core list");
    assert_eq!(core.items.len(), 1);
    assert_eq!(core.items[0].message.as_deref(), Some("CVE-2026-0001"));
    assert_eq!(
        core.items[0].reporting_component.as_deref(),
        Some("example.com/assetscan")
    );

    let mut incomplete = ev.clone();
    incomplete.metadata.name = Some("scan.2".into());
    incomplete.event_time = None;
    let e = api_error(new_events.create(&PostParams::default(), &incomplete).await);
    assert_eq!(
        e.message,
        "Event \"scan.2\" is invalid: eventTime: Required value"
    );
    assert_eq!(
        emu.history("events.events.k8s.io", Some("default"), "scan.1")
            .len(),
        1
    );
}

#[tokio::test]
async fn metadata_only_representations() {
    let (_emu, api) = start().await;
    create_scan(&api, "m").await;
    let meta = api.get_metadata("m").await.expect("get metadata");
    assert_eq!(
        meta.types.as_ref().map(|t| t.kind.as_str()),
        Some("PartialObjectMetadata")
    );
    assert_eq!(meta.metadata.name.as_deref(), Some("m"));
    let list = api
        .list_metadata(&ListParams::default())
        .await
        .expect("list metadata");
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.items.len(), 1);
}

#[tokio::test]
async fn the_operators_crds_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let crds = assetscan_testkit::emulator::read_crd_dir(&dir).unwrap_or_default();
    if crds.is_empty() {
        println!("skipped: no CRDs in {} yet", dir.display());
        return;
    }
    let emu = Emulator::start(EmulatorOptions {
        crd_dir: Some(dir),
        ..Default::default()
    })
    .await
    .expect("the operator's CRDs load");
    let discovery = kube::Discovery::new(emu.client().expect("client"))
        .run()
        .await
        .expect("discovery");
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        assert!(discovery.has_group(group), "{group} is served");
    }
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let (emu, api) = start().await;
    api.list(&ListParams::default()).await.expect("serving");
    let _watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch");
    let url = emu.url().to_string();
    tokio::time::timeout(Duration::from_secs(5), emu.shutdown())
        .await
        .expect("shutdown does not wait for open watches");
    let port = url.rsplit(':').next().unwrap_or_default().to_string();
    let refused = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await;
    assert!(refused.is_err(), "nothing listens after shutdown");
}

#[tokio::test]
async fn streaming_list_watch_ends_initial_events_with_a_bookmark() {
    use kube::runtime::watcher;
    let (_emu, api) = start().await;
    for name in ["s1", "s2"] {
        create_scan(&api, name).await;
    }
    let mut events = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .expect("event in time")
            .expect("stream open")
            .expect("no watch error");
        match ev {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => initial.push(o.metadata.name.unwrap_or_default()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected before InitDone: {other:?}"),
        }
    }
    assert_eq!(initial, vec!["s1", "s2"]);
    create_scan(&api, "s3").await;
    let next = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .expect("no watch error");
    assert!(matches!(next, watcher::Event::Apply(o) if o.metadata.name.as_deref() == Some("s3")));
}

// ---------------------------------------------------------------- garbage collector

fn owner_ref(owner: &DynamicObject) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "AssetScan",
        "name": owner.metadata.name,
        "uid": owner.metadata.uid,
    })
}

fn config_map(name: &str, owners: Vec<Value>) -> k8s_openapi::api::core::v1::ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": owners},
        "data": {"k": "v"},
    }))
    .expect("configmap")
}

/// An emulator with its scans and its ConfigMaps in `default`: owners and
/// dependents for the garbage collector.
async fn start_with_config_maps() -> (
    Emulator,
    Api<DynamicObject>,
    Api<k8s_openapi::api::core::v1::ConfigMap>,
) {
    let (emu, scans) = start().await;
    let cms = Api::namespaced(emu.client().expect("client"), "default");
    (emu, scans, cms)
}

/// Creates the ConfigMap `name` with these owners.
async fn create_config_map(
    cms: &Api<k8s_openapi::api::core::v1::ConfigMap>,
    name: &str,
    owners: Vec<Value>,
) -> k8s_openapi::api::core::v1::ConfigMap {
    cms.create(&PostParams::default(), &config_map(name, owners))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"))
}

/// Waits (bounded) until `name` is gone from `api`.
async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let cond = kube::runtime::wait::await_condition(api.clone(), name, |o: Option<&K>| o.is_none());
    tokio::time::timeout(Duration::from_secs(5), cond)
        .await
        .expect("deleted in time")
        .expect("watch");
}

#[tokio::test]
async fn owners_take_their_dependents_with_them() {
    let (emu, scans, cms) = start_with_config_maps().await;
    let owner = create_scan(&scans, "owner").await;
    let other = create_scan(&scans, "other").await;
    let mut child = scan("child", "example.org");
    child.metadata.owner_references = Some(vec![
        serde_json::from_value(owner_ref(&owner)).expect("ref"),
    ]);
    let child = scans
        .create(&PostParams::default(), &child)
        .await
        .expect("custom resource dependent");
    create_config_map(&cms, "dep", vec![owner_ref(&owner)]).await;
    create_config_map(&cms, "grandchild", vec![owner_ref(&child)]).await;
    create_config_map(&cms, "shared", vec![owner_ref(&owner), owner_ref(&other)]).await;

    scans
        .delete("owner", &DeleteParams::default())
        .await
        .expect("delete the owner");
    gone(&scans, "child").await;
    gone(&cms, "dep").await;
    gone(&cms, "grandchild").await;
    // An owner is left: the dependent stays, without the reference to the gone one.
    let shared = kube::runtime::wait::await_condition(
        cms.clone(),
        "shared",
        |c: Option<&k8s_openapi::api::core::v1::ConfigMap>| {
            c.and_then(|c| c.metadata.owner_references.as_ref())
                .is_some_and(|refs| refs.len() == 1)
        },
    );
    let shared = tokio::time::timeout(Duration::from_secs(5), shared)
        .await
        .expect("in time")
        .expect("watch")
        .expect("still there");
    let refs = shared.metadata.owner_references.expect("refs");
    assert_eq!(refs[0].uid, other.metadata.uid.clone().expect("uid"));

    // The collector deleted them after the owner, as kube-controller-manager does.
    let deleter = emu.history("configmaps", Some("default"), "dep");
    let last = deleter.last().expect("history");
    assert_eq!(last.event, EventType::Deleted);
    assert_eq!(
        last.field_manager.as_deref(),
        Some("generic-garbage-collector")
    );
    let owner_gone = emu.history("assetscans", Some("default"), "owner");
    assert!(owner_gone.last().expect("history").resource_version < last.resource_version);

    // An owner of a kind the emulator does not serve is not taken for gone.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "0d6f3c1e-6a8e-4d2b-9d1a-3c3c2b1a0f00"});
    create_config_map(&cms, "pod-owned", vec![pod]).await;
    // A dependent whose owner no longer exists is collected as soon as it is
    // created (and, queued after it, the one above has been looked at).
    create_config_map(&cms, "late", vec![owner_ref(&owner)]).await;
    gone(&cms, "late").await;
    assert!(cms.get_opt("pod-owned").await.expect("get").is_some());
}

#[tokio::test]
async fn orphan_and_foreground_propagation() {
    let (_emu, scans, cms) = start_with_config_maps().await;

    // Orphan: the owner goes, the dependent stays without its reference.
    let owner = create_scan(&scans, "orphaner").await;
    create_config_map(&cms, "kept", vec![owner_ref(&owner)]).await;
    let marked = delete_marked(&scans, "orphaner", &DeleteParams::orphan()).await;
    assert_eq!(marked.metadata.finalizers, Some(vec!["orphan".to_string()]));
    gone(&scans, "orphaner").await;
    let kept = cms.get("kept").await.expect("the dependent stays");
    assert_eq!(kept.metadata.owner_references, None);

    // Foreground: the owner waits for its dependents, held here by a finalizer.
    let owner = create_scan(&scans, "waiter").await;
    let mut held = config_map("held", vec![owner_ref(&owner)]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held)
        .await
        .expect("dependent");
    let marked = delete_marked(&scans, "waiter", &DeleteParams::foreground()).await;
    assert_eq!(
        marked.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    let deleting = kube::runtime::wait::await_condition(
        cms.clone(),
        "held",
        |c: Option<&k8s_openapi::api::core::v1::ConfigMap>| {
            c.is_some_and(|c| c.metadata.deletion_timestamp.is_some())
        },
    );
    tokio::time::timeout(Duration::from_secs(5), deleting)
        .await
        .expect("the collector deletes the dependent")
        .expect("watch");
    assert!(
        scans.get_opt("waiter").await.expect("get").is_some(),
        "the owner waits for its dependent"
    );
    merge_patch(&cms, "held", json!({"metadata": {"finalizers": null}}))
        .await
        .expect("release the dependent");
    gone(&cms, "held").await;
    gone(&scans, "waiter").await;
}

// ---------------------------------------------------------------- outage

#[tokio::test]
async fn outage_refuses_requests_and_keeps_the_data() {
    let (emu, api) = start().await;
    let before = create_scan(&api, "kept").await;
    let old_version = before.metadata.resource_version.clone().expect("rv");
    create_scan(&api, "later").await;
    let latest = emu.resource_version().to_string();
    let mut watch = watch_scans(&api, &WatchParams::default(), &latest).await;
    wait_for_watches(&emu, 1).await;
    let answered = emu.requests().total();

    emu.faults().begin_outage(None);
    tokio::time::timeout(
        Duration::from_secs(5),
        emu.faults().wait_until(Availability::Down),
    )
    .await
    .expect("down in time");
    let cut = tokio::time::timeout(Duration::from_secs(5), watch.try_next())
        .await
        .expect("the open watch ends");
    assert!(
        !matches!(cut, Ok(Some(_))),
        "no event, the stream ended: {cut:?}"
    );
    match api.get("kept").await {
        Err(kube::Error::Api(status)) => panic!("a down server answers nothing, got {status:?}"),
        Err(_) => {}
        Ok(o) => panic!("served during the outage: {o:?}"),
    }
    let refused = tokio::net::TcpStream::connect(("127.0.0.1", emu.port())).await;
    assert!(refused.is_err(), "connections are refused");
    assert_eq!(emu.requests().total(), answered, "nothing was answered");

    emu.faults().end_outage();
    tokio::time::timeout(
        Duration::from_secs(5),
        emu.faults().wait_until(Availability::Serving),
    )
    .await
    .expect("back in time");
    assert_eq!(emu.faults().outages(), 1);
    let after = api.get("kept").await.expect("served again");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(
        emu.resource_version().to_string(),
        latest,
        "no version was spent"
    );

    // As after a real restart: a watch resumes from the latest version…
    let mut resumed = watch_scans(&api, &WatchParams::default(), &latest).await;
    create_scan(&api, "new").await;
    match next_event(&mut resumed).await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("new")),
        other => panic!("expected the new object, got {other:?}"),
    }
    // …but not from before it: the watch cache was rebuilt (410, re-list).
    let mut stale = watch_scans(&api, &WatchParams::default(), &old_version).await;
    assert_expired(&mut stale).await;
    // Lists at an exact older version still come from etcd.
    let exact = api
        .list(
            &ListParams::default()
                .at(&old_version)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .expect("exact list");
    assert_eq!(exact.items.len(), 1);
}

#[tokio::test]
async fn outage_from_the_control_path_ends_by_itself() {
    let (emu, api) = start().await;
    let client = api.clone().into_client();
    let start = axum::http::Request::builder()
        .method("POST")
        .uri("/emulator/outage?seconds=1")
        .body(Vec::new())
        .expect("request");
    let answer: Value = client.request(start).await.expect("accepted");
    assert_eq!(answer["outage"]["seconds"], 1);
    let refused = axum::http::Request::builder()
        .method("POST")
        .uri("/emulator/outage?seconds=0")
        .body(Vec::new())
        .expect("request");
    assetscan_testkit::wait::until("the outage to begin", Duration::from_secs(5), async || {
        emu.faults().outages() > 0
    })
    .await;
    tokio::time::timeout(
        Duration::from_secs(5),
        emu.faults().wait_until(Availability::Serving),
    )
    .await
    .expect("and ends by itself");
    api.list(&ListParams::default())
        .await
        .expect("serving again");
    assert_eq!(api_error(client.request::<Value>(refused).await).code, 400);
}

// ---------------------------------------------------------------- request counters

#[tokio::test]
async fn requests_are_counted_by_resource_verb_and_outcome() {
    let (emu, api) = start().await;
    create_scan(&api, "c").await;
    api.list(&ListParams::default()).await.expect("list");
    let status = json!({"status": {"phase": "INIT"}});
    merge_patch_status(&api, "c", status.clone())
        .await
        .expect("status");
    emu.faults()
        .inject("PATCH", "/assetscans/c/status", 1, Fault::Conflict);
    api_error(merge_patch_status(&api, "c", status.clone()).await);
    api_error(api.get("missing").await);
    api.delete("c", &DeleteParams::default())
        .await
        .expect("delete");

    let counts = emu.requests();
    assert_eq!(counts.count("assetscans", Verb::Create), 1);
    assert_eq!(counts.count("assetscans", Verb::List), 1);
    assert_eq!(counts.count("assetscans/status", Verb::Patch), 2);
    assert_eq!(
        counts.count_class("assetscans/status", Verb::Patch, CodeClass::ClientError),
        1,
        "the injected conflict"
    );
    assert_eq!(
        counts.count_class("assetscans", Verb::Get, CodeClass::ClientError),
        1
    );
    assert_eq!(counts.count("assetscans", Verb::Delete), 1);
    assert_eq!(
        counts.count("assetscans", Verb::Patch),
        0,
        "status patches are counted apart"
    );

    // Scripts read the same counters over HTTP.
    let read = axum::http::Request::builder()
        .uri("/emulator/requests")
        .body(Vec::new())
        .expect("request");
    let served: Value = api.into_client().request(read).await.expect("counters");
    let rows = served["requests"].as_array().expect("rows");
    assert!(rows.contains(&json!({
        "group": "example.com", "resource": "assetscans/status", "verb": "patch",
        "code": "4xx", "count": 1,
    })));
    assert!(rows.contains(&json!({
        "group": "example.com", "resource": "assetscans/status", "verb": "patch",
        "code": "2xx", "count": 1,
    })));
}
