//! Admission: finalizers, CEL rules, schema violations that name the field.

use super::watches::{next_event, watch_scans};
use super::*;

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
