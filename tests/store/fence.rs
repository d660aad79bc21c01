//! The lock and the fence: a stale holder's writes refused, the claim, the tables, the token floor, renewal and release.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_write_after_takeover_is_rejected_and_audited() {
    let server = RedisServer::start().unwrap();
    let a_store = store(&server, 400).await;
    let b_store = store(&server, 400).await;
    let web = asset("web-01");

    // A acquires, sees the asset offline, then stalls: its renewals stop.
    let a = claim(&a_store, &web, "r1").acquire().await.stall();
    let a_token = a.token;
    expire_lock(&server, &a_store, &web);

    // B takes over with a larger token and runs the pipeline to NOTIFIED.
    let mut b = claim(&b_store, &web, "r1").holder("B").acquire().await;
    assert!(b.token > a_token);
    let ticket = b.walk(high_risk_to(Status::Notified)).await;
    assert_eq!(ticket.status, Status::Notified);

    // A wakes up and writes its stale fact.
    let offline = Patch::default().fact(Fact::Online, false);
    let err = a
        .try_advance(Status::AssetOffline, &offline)
        .await
        .unwrap_err();
    match err {
        StoreError::StaleToken { caller, valid } => {
            assert_eq!(caller, a_token);
            assert_eq!(valid, b.token);
        }
        other => panic!("expected StaleToken, got {other:?}"),
    }
    let after = a_store.get_ticket(&web, "r1").await.unwrap().unwrap();
    assert_eq!(
        after, ticket,
        "the ticket still holds B's state and revision"
    );
    assert_eq!(after.facts.online, None);

    let audit = a_store.audit(&web, 100).await.unwrap();
    let rejected: Vec<_> = audit.iter().filter(|e| !e.accepted()).collect();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].get("result"), Some("STALE_TOKEN"));
    assert_eq!(rejected[0].token(), Some(a_token));
    assert_eq!(rejected[0].get("to"), Some("ASSET_OFFLINE"));
    b.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_at_acquisition_rejects_the_old_holder_before_any_new_write() {
    let (server, s) = start(300).await;
    let web = asset("web-02");
    let a = claim(&s, &web, "r1").acquire().await.stall();
    expire_lock(&server, &s, &web);
    let b = claim(&s, &web, "r1").holder("B").acquire().await;
    assert_eq!(b.ticket.fencing_token, b.token, "claimed at acquisition");
    assert_eq!(b.ticket.status, Status::Init);

    let err = a.refused(Status::AssetOnline).await;
    assert!(matches!(err, StoreError::StaleToken { .. }), "{err:?}");
    let now = s.get_ticket(&web, "r1").await.unwrap().unwrap();
    assert_eq!(now.status, Status::Init);
    assert_eq!(now.revision, b.ticket.revision);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_table_agrees_with_rust_table_on_every_pair() {
    let (server, s) = start(5_000).await;
    let mut conn = raw(&server).await;
    let a = asset("table");
    let mut checked = 0;
    for from in Status::ALL {
        for to in Status::ALL {
            let run = format!("{from}-{to}");
            let mut ticket = Ticket::new(a.as_str(), &run, 1);
            ticket.status = from;
            ticket.fencing_token = 7;
            ticket.revision = 3;
            let key = s.keys(&a).ticket(&run);
            let _: () = conn
                .set(&key, serde_json::to_string(&ticket).unwrap())
                .await
                .unwrap();
            let result = s.advance(&a, &run, 7, to, &Patch::default()).await;
            match (from.allows(to), result) {
                (true, Ok(t)) => {
                    assert_eq!(t.status, to);
                    assert_eq!(t.revision, 4);
                }
                (false, Err(StoreError::IllegalTransition { from: f, to: t })) => {
                    assert_eq!((f.as_str(), t.as_str()), (from.as_str(), to.as_str()));
                    let stored: String = conn.get(&key).await.unwrap();
                    assert_eq!(stored, serde_json::to_string(&ticket).unwrap(), "unchanged");
                }
                (allowed, other) => {
                    panic!("{from} -> {to}: rust says {allowed}, lua says {other:?}")
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, Status::ALL.len().pow(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_floor_survives_flushall_and_the_fence_never_goes_back() {
    let (server, s) = start(5_000).await;
    let a = asset("flushed");
    // The token a claim above `floor` draws (the lock released after).
    let token_above = async |floor: u64| {
        let got = claim(&s, &a, "r1").floor(floor).acquire().await;
        got.release().await.token
    };
    let mut last = 0;
    for _ in 0..3 {
        let token = token_above(0).await;
        assert!(token > last);
        last = token;
    }
    server.flushall().unwrap();
    assert_eq!(token_above(41).await, 42, "floor + 1 after data loss");
    assert_eq!(token_above(0).await, 43, "the fence keeps the floor");
    assert_eq!(
        token_above(10).await,
        44,
        "a lower floor never lowers the fence"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_and_release_never_touch_another_holders_lock() {
    let (server, s) = start(5_000).await;
    let a = asset("owned");
    let held = claim(&s, &a, "r1").acquire().await;
    assert!(!s.renew(&a, "B").await.unwrap());
    assert!(!s.release_holder(&a, "B").await.unwrap());
    let lock = kit::setup::get(&server, &s.keys(&a).lock());
    assert_eq!(lock.as_deref(), Some("A"));
    match claim(&s, &a, "r1").holder("B").try_acquire().await {
        Err(StoreError::Locked {
            holder, pttl_ms, ..
        }) => {
            assert_eq!(holder, "A");
            assert!(pttl_ms > 0 && pttl_ms <= 5_000);
        }
        other => panic!("expected Locked, got {:?}", other.map(|g| g.token)),
    }
    assert!(s.renew(&a, "A").await.unwrap());
    assert!(s.release(&a, &held.lease).await.unwrap());
    assert!(
        !s.release_holder(&a, "A").await.unwrap(),
        "already released"
    );
}

/// Thirty renewal rounds at ttl/3 span ten ttls: every lock is still held,
/// each round was one round trip for all 20 locks, and the rounds were not
/// sent faster than every ttl/3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_holder_keeps_its_lock_across_ten_ttls_in_one_round_trip_per_interval() {
    let ttl = 300;
    let (server, s) = start(ttl).await;
    let mut leases = Vec::new();
    for i in 0..20 {
        let a = asset(&format!("keep-{i}"));
        leases.push((a.clone(), claim(&s, &a, "r1").acquire().await));
    }
    let rounds = 30;
    let evalsha_before = server.command_calls("evalsha").unwrap();
    let batches_before = s.watchdog().stats().batches.load(Ordering::Relaxed);
    let started = tokio::time::Instant::now();
    watchdog_reaches(
        &s,
        "30 renewal rounds",
        |st| &st.batches,
        batches_before + rounds,
    )
    .await;
    let elapsed = started.elapsed();
    let batches = s.watchdog().stats().batches.load(Ordering::Relaxed) - batches_before;
    let evalsha = server.command_calls("evalsha").unwrap() - evalsha_before;
    for (a, got) in &leases {
        assert!(got.lease.is_held(), "{a} lost");
        assert!(!got.lease.cancelled().is_cancelled());
    }
    let mut conn = raw(&server).await;
    for (a, _) in &leases {
        let lock: Option<String> = conn.get(s.keys(a).lock()).await.unwrap();
        assert_eq!(lock.as_deref(), Some("A"));
    }
    // Rounds are scheduled ttl/3 apart: 30 of them cannot fit in less.
    let interval = Duration::from_millis(ttl / 3);
    assert!(
        elapsed >= interval * (rounds as u32 - 1),
        "{rounds} rounds in {elapsed:?}: faster than every {interval:?}"
    );
    // A batch in flight when the counters are read may show on one side only.
    assert!(
        evalsha.abs_diff(batches) <= 1,
        "one round trip per interval for 20 locks: {evalsha} EVALSHA, {batches} batches"
    );
    assert_eq!(s.watchdog().stats().losses.load(Ordering::Relaxed), 0);
}

/// The holder's thread is blocked (like a SIGSTOPped process) until its
/// lock has expired in Redis; what follows is awaited. Redis is paused as
/// well when the holder resumes, so only the holder's own deadline can
/// tell it.
#[test]
fn a_paused_holder_loses_its_lock_and_learns_it_when_it_resumes() {
    let server = RedisServer::start().unwrap();
    // One thread: blocking it freezes the watchdog too, like SIGSTOP.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ttl = 300;
        let s = store(&server, ttl).await;
        let a = asset("paused");
        let got = claim(&s, &a, "r1").acquire().await;
        let cancelled = got.lease.cancelled();
        watchdog_reaches(&s, "a few renewals", |st| &st.renewals, 3).await;
        assert!(got.lease.is_held(), "renewed while running");

        // The stall: the thread, and the watchdog with it, stands still
        // until the lock has expired in Redis.
        let lock = s.keys(&a).lock();
        while kit::setup::get(&server, &lock).is_some() {
            std::thread::sleep(assetscan_testkit::wait::POLL);
        }
        server.pause().unwrap();
        tokio::time::timeout(PATIENCE, cancelled.cancelled())
            .await
            .expect("cancellation fires on resuming, with Redis silent");
        assert!(!got.lease.is_held());
        assert_eq!(s.watchdog().held(), 0);
        server.resume().unwrap();
        let mut conn = raw(&server).await;
        let lock: Option<String> = conn.get(s.keys(&a).lock()).await.unwrap();
        assert_eq!(lock, None, "expired in Redis during the stall");
    });
}

/// A released lease is never renewed again: with a witness lease keeping
/// the watchdog busy, its rounds renew the witness alone, and the lock
/// taken by another holder after the release keeps the ttl it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_locks_are_not_renewed() {
    let ttl = 300;
    let (server, s) = start(ttl).await;
    let witness = claim(&s, &asset("witness"), "r1")
        .holder("W")
        .acquire()
        .await;
    let a = asset("released");
    claim(&s, &a, "r1").acquire().await.release().await;
    assert_eq!(s.watchdog().held(), 1);
    // Another holder takes it and stops tracking it; its ttl is set far
    // above the watchdog's, so any renewal would show.
    claim(&s, &a, "r1").holder("B").acquire().await.stall();
    let mut conn = raw(&server).await;
    let lock = s.keys(&a).lock();
    let marker_ms: i64 = 60_000;
    let _: bool = conn.pexpire(&lock, marker_ms).await.unwrap();

    let stats = s.watchdog().stats();
    let batches_before = stats.batches.load(Ordering::Relaxed);
    let renewals_before = stats.renewals.load(Ordering::Relaxed);
    watchdog_reaches(&s, "3 renewal rounds", |st| &st.batches, batches_before + 3).await;
    let renewals = stats.renewals.load(Ordering::Relaxed) - renewals_before;
    let batches = stats.batches.load(Ordering::Relaxed) - batches_before;
    assert!(
        renewals <= batches,
        "{renewals} renewals in {batches} rounds: more than the witness"
    );
    assert_eq!(
        stats.losses.load(Ordering::Relaxed),
        0,
        "no renewal refused"
    );
    let pttl: i64 = conn.pttl(&lock).await.unwrap();
    assert!(
        pttl > ttl as i64,
        "B's lock was renewed by someone: pttl {pttl} ms"
    );
    assert!(witness.lease.is_held());
    witness.release().await;
}
