//! The fenced Redis core against real redis-server instances: the zombie
//! scenario, the claim at acquisition, the transition table, token floors,
//! lock ownership, the watchdog, Cluster, corruption and outages, and a race.

mod kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{
    Fact, Finding, RiskFacts, Severity, Status, Step, Ticket, VulnFacts,
};
use assetscan_operator::store::{
    Claim, Patch, RedisTarget, StoreConfig, StoreError, TicketStore, WatchdogStats,
};
use assetscan_testkit::redis::{RedisCluster, RedisServer};
use assetscan_testkit::wait::{until, until_some};
use kit::setup::connect as raw;
use kit::tickets::{Held, OFFLINE, asset_id as asset, claim, high_risk_to};
use redis::AsyncCommands;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

fn config(ttl_ms: u64) -> StoreConfig {
    StoreConfig {
        lock_ttl: Duration::from_millis(ttl_ms),
        audit_cap: 10_000,
        timeout: Duration::from_secs(2),
        ..StoreConfig::default()
    }
}

async fn store(server: &RedisServer, ttl_ms: u64) -> TicketStore {
    TicketStore::connect(&RedisTarget::Standalone(server.url()), config(ttl_ms))
        .await
        .expect("connect")
}

/// A redis-server, and a store on it with a lock ttl of `ttl_ms`.
async fn start(ttl_ms: u64) -> (RedisServer, TicketStore) {
    let server = RedisServer::start().unwrap();
    let store = store(&server, ttl_ms).await;
    (server, store)
}

/// Makes the asset's lock expire now, as Redis would after its ttl: these
/// tests are about what happens after expiry, not about its timing.
fn expire_lock(server: &RedisServer, store: &TicketStore, asset: &AssetId) {
    kit::setup::expire_lock(server, &store.keys(asset).lock());
}

/// What an online check confirms.
fn online_fact() -> Patch {
    Patch::default().fact(Fact::Online, true)
}

/// A guard against hangs only: conditions are awaited, not timed.
const PATIENCE: Duration = Duration::from_secs(30);

/// Waits until the watchdog has counted `at_least` in `stat`.
async fn watchdog_reaches(
    store: &TicketStore,
    what: &str,
    stat: fn(&WatchdogStats) -> &AtomicU64,
    at_least: u64,
) {
    until(what, PATIENCE, async || {
        stat(store.watchdog().stats()).load(Ordering::Relaxed) >= at_least
    })
    .await;
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_scripts_work_on_a_three_master_cluster() {
    let cluster = RedisCluster::start().unwrap();
    let target = RedisTarget::parse(&cluster.target_spec()).unwrap();
    let s = TicketStore::connect(&target, config(300)).await.unwrap();
    let mut held = Vec::new();
    for i in 0..12 {
        let a = asset(&format!("node-{i}"));
        let mut got = claim(&s, &a, "r1").acquire().await;
        let online = Patch::default().fact(Fact::Online, true);
        let t = got.advance(Status::AssetOnline, &online).await;
        assert_eq!(t.facts.online, Some(true));
        assert!(!s.renew(&a, "B").await.unwrap());
        assert!(s.renew(&a, "A").await.unwrap());
        held.push((a, got));
    }
    // The keys spread over all three masters.
    let mut nodes = HashSet::new();
    for node in cluster.nodes() {
        let keys = node.command(&["DBSIZE"]).unwrap();
        if !keys.starts_with(":0") {
            nodes.insert(node.port());
        }
    }
    assert_eq!(nodes.len(), 3, "keys on every master");
    // The watchdog renews across nodes: the locks outlive several ttls
    // (twelve rounds at ttl/3 span four).
    watchdog_reaches(&s, "12 rounds of 12 renewals", |st| &st.renewals, 12 * 12).await;
    for (a, got) in &held {
        assert!(got.lease.is_held(), "{a} lost on the cluster");
    }
    assert_eq!(s.watchdog().stats().losses.load(Ordering::Relaxed), 0);
    let batches = s.watchdog().stats().batches.load(Ordering::Relaxed);
    let renewals = s.watchdog().stats().renewals.load(Ordering::Relaxed);
    assert!(renewals >= 12 * 3, "renewals {renewals}");
    assert!(
        batches <= renewals / 3,
        "batched per node: {batches} batches for {renewals} renewals"
    );
    for (a, got) in &held {
        assert!(s.release(a, &got.lease).await.unwrap());
    }
    assert_eq!(
        s.runs(&asset("node-3")).await.unwrap(),
        vec!["r1".to_string()]
    );
    assert_eq!(s.ticket_keys().await.unwrap().len(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_ticket_is_reported_and_left_as_found() {
    let (server, s) = start(5_000).await;
    let mut conn = raw(&server).await;
    let a = asset("corrupt");
    let key = s.keys(&a).ticket("r1");
    for garbage in ["not json", "[1,2]", r#"{"status":"INIT"}"#] {
        let _: () = conn.set(&key, garbage).await.unwrap();
        let err = claim(&s, &a, "r1")
            .try_acquire()
            .await
            .err()
            .expect("acquire must fail");
        assert!(
            matches!(&err, StoreError::TicketCorrupt { key: named, .. } if *named == key),
            "the error names the ticket: {err:?}"
        );
        assert!(matches!(
            s.get_ticket(&a, "r1").await,
            Err(StoreError::TicketCorrupt { .. })
        ));
        let err = s
            .advance(&a, "r1", 1, Status::AssetOnline, &Patch::default())
            .await;
        assert!(
            matches!(err, Err(StoreError::TicketCorrupt { .. })),
            "{err:?}"
        );
        let stored: String = conn.get(&key).await.unwrap();
        assert_eq!(stored, garbage, "left as found");
        let lock: Option<String> = conn.get(s.keys(&a).lock()).await.unwrap();
        assert_eq!(lock, None, "no lock taken on a corrupt ticket");
    }
    // A ticket that is JSON but not ours to parse in Rust is corrupt as well.
    let _: () = conn
        .set(&key, r#"{"status":"INIT","fencing_token":1,"revision":1}"#)
        .await
        .unwrap();
    assert!(matches!(
        s.get_ticket(&a, "r1").await,
        Err(StoreError::TicketCorrupt { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_gives_a_typed_error_and_work_continues_after_restart() {
    let (mut server, s) = start(5_000).await;
    let a = asset("outage");
    let got = claim(&s, &a, "r1").acquire().await.release().await;
    server.kill();
    let err = claim(&s, &a, "r1")
        .try_acquire()
        .await
        .err()
        .expect("redis is down");
    assert!(err.is_unavailable(), "{err:?}");
    assert!(matches!(s.get_ticket(&a, "r1").await, Err(e) if e.is_unavailable()));
    server.restart().unwrap();
    // Unavailable until the store's connection is back: then the claim
    // goes through, and nothing else is an answer.
    let token = until_some("the store works again", PATIENCE, async || {
        match claim(&s, &a, "r1").floor(got.token).try_acquire().await {
            Ok(again) => Some(again.token),
            Err(e) if e.is_unavailable() => None,
            Err(e) => panic!("no recovery: {e:?}"),
        }
    })
    .await;
    assert_eq!(
        token,
        got.token + 1,
        "the floor carries over the lost fence"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_racers_never_hold_at_once_and_tokens_strictly_increase() {
    let (_server, s) = start(5_000).await;
    let a = asset("race");
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for racer in 0..16 {
        let (s, a, done) = (s.clone(), a.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let holder = format!("racer-{racer}");
            while done.load(Ordering::SeqCst) < 1000 {
                match s.acquire(&a, "r1", &holder, 0).await {
                    Ok(got) => {
                        if done.fetch_add(1, Ordering::SeqCst) >= 1000 {
                            s.release(&a, &got.lease).await.unwrap();
                            break;
                        }
                        s.advance(&a, "r1", got.token, Status::Init, &Patch::default())
                            .await
                            .unwrap();
                        s.release(&a, &got.lease).await.unwrap();
                    }
                    Err(StoreError::Locked { .. }) => tokio::task::yield_now().await,
                    Err(e) => panic!("{e:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let audit = s.audit(&a, 100_000).await.unwrap();
    let acquires = audit.iter().filter(|e| e.op() == "acquire").count();
    assert!(acquires >= 1000, "{acquires} acquisitions");
    let mut holder: Option<String> = None;
    let mut last_token = 0;
    for entry in &audit {
        assert!(entry.accepted(), "rejected: {entry:?}");
        match entry.op() {
            "acquire" => {
                assert_eq!(holder, None, "two holders at once at {}", entry.id);
                let token = entry.token().unwrap();
                assert!(token > last_token, "token {token} after {last_token}");
                last_token = token;
                holder = entry.get("holder").map(str::to_owned);
            }
            "advance" => {
                assert_eq!(
                    entry.token(),
                    Some(last_token),
                    "write by the current holder only"
                );
            }
            "release" => {
                assert_eq!(
                    holder.as_deref(),
                    entry.get("holder"),
                    "released by its holder"
                );
                holder = None;
            }
            other => panic!("unknown op {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquiring_a_finished_run_takes_no_lock_and_draws_no_token() {
    let (server, s) = start(5_000).await;
    let mut conn = raw(&server).await;
    let a = asset("done");
    let got = claim(&s, &a, "r1").walked(&OFFLINE).await;
    let fence: u64 = conn.get(s.keys(&a).fence()).await.unwrap();
    let again = claim(&s, &a, "r1").holder("B").acquire().await;
    assert_eq!(again.ticket.status, Status::Finished);
    assert_eq!(
        again.token, got.token,
        "the ticket's own token, not a new one"
    );
    assert!(!again.lease.is_held());
    let lock: Option<String> = conn.get(s.keys(&a).lock()).await.unwrap();
    assert_eq!(lock, None, "no lock for a run that ended");
    let after: u64 = conn.get(s.keys(&a).fence()).await.unwrap();
    assert_eq!(after, fence, "no token drawn");
    assert_eq!(s.watchdog().held(), 0);
}

/// Round trips per operation: counted by the client (every request the
/// store sends, a pipeline once) and checked against the server's
/// `INFO commandstats` (commands a script runs inside Redis count there too,
/// which is why each operation is checked by the calls it adds to EVALSHA,
/// SCRIPT, GET and HGETALL). After the scripts are loaded, acquire, advance
/// and release are one EVALSHA each; the fast-path read is one pipelined
/// GET + HGETALL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_operation_is_one_round_trip() {
    let (server, s) = start(30_000).await;
    let a = asset("rtt");
    // Warm-up: loads the scripts (NOSCRIPT, SCRIPT LOAD, EVALSHA).
    claim(&s, &a, "warm").walked(&[Status::Init]).await;

    let calls =
        || ["evalsha", "script", "get", "hgetall"].map(|name| server.command_calls(name).unwrap());
    let mut last = (calls(), s.round_trips());
    let mut added = || {
        let now = (calls(), s.round_trips());
        let delta = ([0, 1, 2, 3].map(|i| now.0[i] - last.0[i]), now.1 - last.1);
        last = now;
        delta
    };
    let mut got = claim(&s, &a, "r1").acquire().await;
    // acquire.lua reads the ticket; the lock is one SET NX GET.
    assert_eq!(added(), ([1, 0, 1, 0], 1), "acquire: one EVALSHA");
    let online = got
        .advance_from_copy(Status::AssetOnline, &online_fact())
        .await;
    assert_eq!(added(), ([1, 0, 1, 0], 1), "advance: one EVALSHA");
    let read = s.get_ticket(&a, "r1").await.unwrap().unwrap();
    assert_eq!(read, online, "the executor's copy is the stored ticket");
    assert_eq!(added(), ([0, 0, 1, 1], 1), "fast-path read: one round trip");
    s.release(&a, &got.lease).await.unwrap();
    assert_eq!(added(), ([1, 0, 1, 0], 1), "release: one EVALSHA");
    // Claiming with the copy just read: the facts are not sent again.
    let again = s
        .acquire_run(
            &a,
            Claim {
                known: Some(&read),
                ..Claim::new("r1", "A", 0)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        added(),
        ([1, 0, 1, 0], 1),
        "acquire after a read: one EVALSHA"
    );
    assert_eq!(again.ticket.facts, read.facts);
}

/// Findings that weigh 2 000 entries do not make a write heavier: the
/// ticket key keeps only the fenced header, each fact is one field of the
/// facts hash written as sent, and a write that learns nothing new leaves
/// the facts untouched (proved by a field the test rewrote in another
/// spelling of the same JSON: a script re-encoding the facts would restore
/// its own spelling).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_do_not_touch_the_facts_they_do_not_change() {
    let (server, s) = start(30_000).await;
    let mut conn = raw(&server).await;
    let a = asset("heavy");
    let keys = s.keys(&a);
    let mut got = claim(&s, &a, "r1").acquire().await;
    got.advance_from_copy(Status::AssetOnline, &online_fact())
        .await;
    let vulns = many_findings(2_000);
    let findings = Patch::default().fact(Fact::Vulnerabilities, &vulns);
    let heavy = got
        .advance_from_copy(Status::VulnCheckDone, &findings)
        .await;
    assert_eq!(heavy.facts.vulnerabilities.as_deref(), Some(&vulns));
    let header: String = conn.get(keys.ticket("r1")).await.unwrap();
    assert!(header.len() < 1_024, "header of {} bytes", header.len());
    assert!(!header.contains("\"facts\""), "{header}");
    let stored: String = conn
        .hget(keys.facts("r1"), "vulnerabilities")
        .await
        .unwrap();
    assert!(stored.len() > 200_000, "the findings are in the hash");

    let respelled = serde_json::to_string_pretty(&vulns).unwrap();
    let _: () = conn
        .hset(keys.facts("r1"), "vulnerabilities", &respelled)
        .await
        .unwrap();
    let mut patch = Patch::default();
    patch.attempts.insert(Step::ThreatIntel, 1);
    let written = got.advance_from_copy(Status::VulnCheckDone, &patch).await;
    let after: String = conn
        .hget(keys.facts("r1"), "vulnerabilities")
        .await
        .unwrap();
    assert_eq!(after, respelled, "a write without that fact left it alone");
    assert_eq!(s.get_ticket(&a, "r1").await.unwrap(), Some(written));
    got.release().await;
}

fn many_findings(count: usize) -> VulnFacts {
    let findings: Vec<Finding> = (0..count)
        .map(|i| Finding {
            id: format!("GHSA-{i:04}"),
            cves: vec![format!("CVE-2024-{i:05}")],
            package: format!("package-{i}"),
            cvss: Some(7.5),
            severity: Severity::High,
            summary: "a summary of some length, as records have".into(),
        })
        .collect();
    VulnFacts {
        total: count as u32,
        max_cvss: Some(7.5),
        cves: findings.iter().flat_map(|f| f.cves.clone()).collect(),
        findings,
        ..VulnFacts::default()
    }
}

/// A ticket written by the earlier layout (its facts inside its JSON) is
/// read, claimed and advanced with every fact; its first write moves the
/// facts into the hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_layout_tickets_are_read_claimed_and_advanced() {
    let (server, s) = start(30_000).await;
    let mut conn = raw(&server).await;
    let a = asset("legacy");
    let keys = s.keys(&a);
    let mut legacy = Ticket::new(a.as_str(), "r1", 1);
    legacy.status = Status::VulnCheckDone;
    legacy.fencing_token = 7;
    legacy.revision = 3;
    legacy.completed_steps = vec![Step::OnlineCheck, Step::VulnQuery];
    legacy.facts.online = Some(true);
    legacy.facts.vulnerabilities = Some(many_findings(3).into());
    let json = serde_json::to_string(&legacy).unwrap();
    assert!(json.contains("\"facts\""), "written as the earlier layout");
    let _: () = conn.set(keys.ticket("r1"), &json).await.unwrap();

    assert_eq!(s.get_ticket(&a, "r1").await.unwrap(), Some(legacy.clone()));
    let mut got = claim(&s, &a, "r1").floor(7).acquire().await;
    assert_eq!(got.ticket.facts, legacy.facts, "claimed with its facts");
    let risk = RiskFacts {
        high_risk: true,
        reasons: vec!["CVSS 7.5 >= 7.0".into()],
        confirmed_at: None,
    };
    let verdict = Patch::default().fact(Fact::Risk, &risk);
    let decided = got.advance_from_copy(Status::HighRiskFound, &verdict).await;
    assert_eq!(decided.facts.vulnerabilities, legacy.facts.vulnerabilities);
    assert_eq!(decided.facts.risk, Some(risk));
    assert_eq!(s.get_ticket(&a, "r1").await.unwrap(), Some(decided.clone()));
    let header: String = conn.get(keys.ticket("r1")).await.unwrap();
    assert!(!header.contains("\"facts\""), "moved out: {header}");
    let mut fields: Vec<String> = conn.hkeys(keys.facts("r1")).await.unwrap();
    fields.sort();
    assert_eq!(fields, ["online", "risk", "vulnerabilities"]);
    got.release().await;
}

/// A claim after a read sends no facts back while the copy read is current,
/// and all of them once the ticket changed in between: proved with a copy
/// whose facts differ from the stored ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_sends_the_facts_only_when_the_callers_copy_is_stale() {
    let (_server, s) = start(30_000).await;
    let a = asset("known");
    let mut got = claim(&s, &a, "r1").acquire().await;
    let online = got
        .advance_from_copy(Status::AssetOnline, &online_fact())
        .await;
    got.release().await;

    let mut marked = online.clone();
    marked.facts.online = Some(false);
    // B's claim with `marked` as its copy, released at once: the facts it
    // was answered with.
    let claimed_facts = async || {
        let known = Claim {
            known: Some(&marked),
            ..Claim::new("r1", "B", 0)
        };
        let claimed = s.acquire_run(&a, known).await.unwrap();
        s.release(&a, &claimed.lease).await.unwrap();
        claimed.ticket.facts
    };
    let current = claimed_facts().await;
    assert_eq!(current.online, Some(false), "not sent again");
    let stale = claimed_facts().await;
    assert_eq!(stale.online, Some(true), "the stored facts");
}

/// A finished run is reported as found even while another run of the asset
/// holds the lock: no lock is needed to know that a run ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_is_found_while_another_run_holds_the_lock() {
    let (_server, s) = start(30_000).await;
    let a = asset("busy");
    claim(&s, &a, "r1").walked(&OFFLINE).await;
    let other = claim(&s, &a, "r2").holder("B").acquire().await;
    let found = claim(&s, &a, "r1").holder("C").acquire().await;
    assert_eq!(found.ticket.status, Status::Finished);
    let third = claim(&s, &a, "r3").holder("C").try_acquire().await;
    assert!(matches!(
        third.map(|g| g.token),
        Err(StoreError::Locked { .. })
    ));
    other.release().await;
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

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
