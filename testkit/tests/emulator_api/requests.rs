//! Request kinds: server-side apply, patch types, namespaces and generateName, CRDs through the API, Events, metadata-only answers, shutdown, streaming lists.

use super::*;

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
    let crds = assetscan_testkit::emulator::read_crd_dir(&dir).expect("the operator's CRDs read");
    let files = (std::fs::read_dir(&dir).expect("crds/").flatten())
        .filter(|f| f.path().extension().is_some_and(|e| e == "yaml"))
        .count();
    assert!(
        files > 0,
        "the operator's CRDs are checked in under {}",
        dir.display()
    );
    assert_eq!(crds.len(), files, "one CRD a file in {}", dir.display());
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
