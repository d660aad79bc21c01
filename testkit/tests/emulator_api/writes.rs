//! Writes: resourceVersion conflicts, concurrent patches, generation, the status subresource.

use super::*;

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
