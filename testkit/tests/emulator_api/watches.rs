//! Watches: resuming from a version, expiry.

use super::*;

pub(super) async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) -> WatchEvent<DynamicObject> {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("event within 5s")
        .expect("stream open")
        .expect("event decodes")
}

/// A watch of the scans from `version`.
pub(super) async fn watch_scans(
    api: &Api<DynamicObject>,
    params: &WatchParams,
    version: &str,
) -> BoxStream<'static, kube::Result<WatchEvent<DynamicObject>>> {
    api.watch(params, version).await.expect("watch").boxed()
}

/// The next event must be the ERROR of a watch from a version no longer
/// kept: `410 Expired`, as kube-runtime's watcher expects to re-list.
pub(super) async fn assert_expired(
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
