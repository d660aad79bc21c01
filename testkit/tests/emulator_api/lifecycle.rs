//! The garbage collector, outages and request counters.

use super::reads::wait_for_watches;
use super::watches::{assert_expired, next_event, watch_scans};
use super::*;

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
