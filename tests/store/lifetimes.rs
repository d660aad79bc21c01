//! How runs end: an owner retired, tickets nobody drives, a run superseded.

use super::*;

/// `retire.lua`: a run in progress is failed under a fresh token and
/// removed, a finished one is removed with its history as it was; the
/// tombstone then refuses every run of the owner, old or new, without
/// creating anything; retiring again is harmless; runs of no owner and of
/// other owners are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retiring_an_owner_ends_its_runs_and_refuses_late_acquires() {
    let (server, store) = start(5_000).await;
    let web = asset("web-01");
    let keys = store.keys(&web);

    let mut open = claim(&store, &web, "o1-g1-s0").owner("o1").acquire().await;
    open.advance(Status::AssetOnline, &online_fact()).await;
    let open = open.release().await;
    let done = claim(&store, &web, "o1-g1-s1").owner("o1");
    let done = done.walked(&OFFLINE).await;
    let other = claim(&store, &web, "o2-g1-s0").owner("o2").holder("B");
    let other = other.walked(&[]).await;

    let runs = ["o1-g1-s0".to_owned(), "o1-g1-s1".to_owned()];
    assert_eq!(store.retire(&web, "o1", &runs, "C").await.unwrap(), 2);
    assert_eq!(store.runs(&web).await.unwrap(), ["o2-g1-s0"]);
    let facts_left: bool = raw(&server)
        .await
        .exists(keys.facts("o1-g1-s0"))
        .await
        .unwrap();
    assert!(!facts_left, "the facts go with their ticket");

    let audit = store.audit(&web, 1000).await.unwrap();
    let retired: Vec<_> = audit.iter().filter(|e| e.op() == "retire").collect();
    let failed = retired
        .iter()
        .find(|e| e.get("ticket") == Some(keys.ticket("o1-g1-s0").as_str()))
        .expect("the open run's retirement");
    assert_eq!(
        (
            failed.get("from"),
            failed.get("status"),
            failed.get("holder")
        ),
        (Some("ASSET_ONLINE"), Some("FAILED"), Some("C"))
    );
    assert!(failed.token().unwrap() > other.token, "a fresh token");
    let finished = retired
        .iter()
        .find(|e| e.get("ticket") == Some(keys.ticket("o1-g1-s1").as_str()))
        .expect("the finished run's retirement");
    assert_eq!(
        (finished.get("status"), finished.token()),
        (Some("FINISHED"), Some(done.token)),
        "a finished run keeps its status and token"
    );

    // Late executors: no write lands, no run of the owner starts again.
    let late = open.refused(Status::VulnCheckDone).await;
    assert!(
        matches!(late, StoreError::TicketNotFound { .. }),
        "{late:?}"
    );
    for run in ["o1-g1-s0", "o1-g1-s1", "o1-g2-s0"] {
        let refused = claim(&store, &web, run).owner("o1").try_acquire().await;
        assert!(
            matches!(&refused, Err(StoreError::RunRetired { key }) if key == &keys.ticket(run)),
            "{run}: {:?}",
            refused.map(|a| a.writer.ticket)
        );
    }
    assert_eq!(
        store.runs(&web).await.unwrap(),
        ["o2-g1-s0"],
        "nothing created"
    );
    let refusals = store
        .audit(&web, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.op() == "acquire" && e.get("result") == Some("RUN_RETIRED"))
        .count();
    assert_eq!(refusals, 3, "each refusal is audited");

    // Again, concurrently: nothing to remove, nothing created.
    let (a, b) = tokio::join!(
        store.retire(&web, "o1", &runs, "C"),
        store.retire(&web, "o1", &runs, "D")
    );
    assert_eq!((a.unwrap(), b.unwrap()), (0, 0));
    assert_eq!(store.runs(&web).await.unwrap(), ["o2-g1-s0"]);
    // Another owner, and runs of no owner, go on as before.
    let o2 = claim(&store, &web, "o2-g1-s0").owner("o2").holder("B");
    assert!(o2.try_acquire().await.is_ok());
    let mut conn = raw(&server).await;
    let tombstone = pttl(&mut conn, &keys.retired("o1")).await;
    assert!(
        (1..=store.config().abandon_after.as_millis() as i64).contains(&tombstone),
        "the tombstone expires: {tombstone}"
    );
}

/// Every ticket expires: one that is not terminal `abandon_after` after its
/// last write (each write renews it), a terminal one after the retention;
/// the asset's fence and audit stream live as long as the longer of the two
/// after each claim, or forever when terminal tickets are kept forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_nobody_drives_expire() {
    // Open tickets abandoned after a minute, terminal ones kept for
    // `retention`.
    let keeping = async |server: &RedisServer, retention: Duration| {
        let config = StoreConfig {
            terminal_retention: retention,
            abandon_after: Duration::from_secs(60),
            ..config(5_000)
        };
        let target = RedisTarget::Standalone(server.url());
        TicketStore::connect(&target, config).await.unwrap()
    };
    let server = RedisServer::start().unwrap();
    let store = keeping(&server, Duration::from_secs(600)).await;
    let web = asset("web-01");
    let keys = store.keys(&web);
    let mut conn = raw(&server).await;
    let run = "o1-g1-s0";

    let mut claimed = claim(&store, &web, run).owner("o1").acquire().await;
    let open = pttl(&mut conn, &keys.ticket(run)).await;
    assert!((50_000..=60_000).contains(&open), "open ticket: {open}");
    for key in [keys.fence(), keys.audit()] {
        let kept = pttl(&mut conn, &key).await;
        assert!((590_000..=600_000).contains(&kept), "{key}: {kept}");
    }
    let _: () = redis::cmd("PEXPIRE")
        .arg(keys.ticket(run))
        .arg(1_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    claimed.advance(Status::AssetOnline, &online_fact()).await;
    let renewed = pttl(&mut conn, &keys.ticket(run)).await;
    assert!(
        (50_000..=60_000).contains(&renewed),
        "renewed by the write: {renewed}"
    );
    let facts = pttl(&mut conn, &keys.facts(run)).await;
    assert!((50_000..=60_000).contains(&facts), "facts: {facts}");
    claimed
        .walk(&[Status::VulnCheckDone, Status::Finished])
        .await;
    for key in [keys.ticket(run), keys.facts(run)] {
        let finished = pttl(&mut conn, &key).await;
        assert!(
            (590_000..=600_000).contains(&finished),
            "finished {key}: {finished}"
        );
    }
    claimed.release().await;

    // Terminal tickets kept forever: so are the fence and the audit stream,
    // while open tickets still expire.
    let forever = keeping(&server, Duration::ZERO).await;
    let other = asset("db-01");
    let other_keys = forever.keys(&other);
    claim(&forever, &other, run).owner("o1").acquire().await;
    assert_eq!(pttl(&mut conn, &other_keys.fence()).await, -1);
    assert_eq!(pttl(&mut conn, &other_keys.audit()).await, -1);
    let open = pttl(&mut conn, &other_keys.ticket(run)).await;
    assert!((50_000..=60_000).contains(&open), "open ticket: {open}");
    // Retiring gives them the tombstone's lifetime.
    forever
        .retire(&other, "o1", &[run.to_owned()], "C")
        .await
        .unwrap();
    for key in [
        other_keys.fence(),
        other_keys.audit(),
        other_keys.retired("o1"),
    ] {
        let kept = pttl(&mut conn, &key).await;
        assert!((50_000..=60_000).contains(&kept), "{key}: {kept}");
    }
}

/// A run of owner `o1` walked to `status` (along the high-risk path) by
/// an executor that then stalled past its lease: its late writes.
async fn stalled_at<'a>(
    server: &RedisServer,
    store: &'a TicketStore,
    web: &AssetId,
    run: &str,
    status: Status,
) -> kit::tickets::Writer<'a> {
    let mut old = claim(store, web, run).owner("o1").acquire().await;
    old.walk(high_risk_to(status)).await;
    let old = old.stall();
    expire_lock(server, store, web);
    old
}

/// Run `o1-g2-s0` of owner `o1`, claimed by `B` as superseding `earlier`.
async fn claim_superseding<'a>(
    store: &'a TicketStore,
    web: &AssetId,
    earlier: &str,
) -> Result<Held<'a>, StoreError> {
    let next = claim(store, web, "o1-g2-s0").owner("o1").holder("B");
    next.supersedes(earlier).try_acquire().await
}

/// An earlier generation's run whose executor stalled past its lease: the
/// claim of the run that replaces it fails it in the same step, so the
/// stalled executor can no longer confirm a risk there (and then die with
/// nobody left to notify).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_supersedes_a_run_ends_it_and_its_executor_is_stale() {
    let (server, store) = start(5_000).await;
    let web = asset("web-01");
    let keys = store.keys(&web);
    let old = stalled_at(&server, &store, &web, "o1-g1-s0", Status::VulnCheckDone).await;

    let new = claim_superseding(&store, &web, "o1-g1-s0").await.unwrap();
    let ended = store.get_ticket(&web, "o1-g1-s0").await.unwrap().unwrap();
    assert_eq!(ended.status, Status::Failed, "the earlier run is ended");
    assert!(
        old.token < ended.fencing_token && ended.fencing_token < new.token,
        "ended under a fresh token below the claim's: {} < {} < {}",
        old.token,
        ended.fencing_token,
        new.token
    );

    let err = old.refused(Status::HighRiskFound).await;
    assert!(matches!(err, StoreError::StaleToken { .. }), "{err:?}");
    let audit = store.audit(&web, 100).await.unwrap();
    let superseded = audit
        .iter()
        .find(|e| e.op() == "supersede")
        .expect("the supersession is audited");
    assert_eq!(
        (
            superseded.get("ticket"),
            superseded.get("from"),
            superseded.get("status"),
            superseded.token()
        ),
        (
            Some(keys.ticket("o1-g1-s0").as_str()),
            Some("VULN_CHECK_DONE"),
            Some("FAILED"),
            Some(ended.fencing_token)
        )
    );
    let new_token = new.token;
    new.release().await;

    // Claiming again (a retry of the same reconcile) finds it ended: the
    // ended run is left as it is.
    let again = claim_superseding(&store, &web, "o1-g1-s0").await.unwrap();
    let still = store.get_ticket(&web, "o1-g1-s0").await.unwrap().unwrap();
    assert_eq!(still, ended, "an ended run is not touched again");
    assert_eq!(again.token, new_token + 1);
    again.release().await;
}

/// A run that confirmed a risk is never superseded: the claim that would
/// replace it is refused, nothing taken or drawn, and that run goes first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_refused_while_the_run_it_supersedes_is_alerting() {
    let (server, store) = start(5_000).await;
    let web = asset("web-01");
    let keys = store.keys(&web);
    for alerting in [Status::HighRiskFound, Status::Notifying, Status::Notified] {
        let earlier = format!(
            "o1-g1-{}",
            alerting.as_str().to_lowercase().replace('_', "-")
        );
        let old = stalled_at(&server, &store, &web, &earlier, alerting).await;
        let fence_before: u64 = raw(&server).await.get(keys.fence()).await.unwrap();

        let err = claim_superseding(&store, &web, &earlier)
            .await
            .err()
            .expect("refused");
        assert!(
            matches!(&err, StoreError::EarlierRunAlerting { key } if *key == keys.ticket(&earlier)),
            "{err:?}"
        );
        let mut conn = raw(&server).await;
        let fence_after: u64 = conn.get(keys.fence()).await.unwrap();
        let locked: bool = conn.exists(keys.lock()).await.unwrap();
        assert_eq!(
            (fence_after, locked),
            (fence_before, false),
            "nothing taken"
        );
        assert_eq!(store.get_ticket(&web, "o1-g2-s0").await.unwrap(), None);
        let kept = store.get_ticket(&web, &earlier).await.unwrap().unwrap();
        assert_eq!(
            (kept.status, kept.fencing_token),
            (alerting, old.token),
            "the alerting run is untouched: its executor may finish it"
        );
    }
}
