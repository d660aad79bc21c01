//! Reads and faults: pagination, selectors, injected faults, watch streams ended or cut.

use super::watches::watch_scans;
use super::*;

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

pub(super) async fn wait_for_watches(emu: &Emulator, n: usize) {
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
