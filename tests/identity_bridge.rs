//! An asset's identity is `(namespace, assetId)`, and the bridge to the
//! previous release's layout, against a real redis-server. A store of the
//! legacy layout (no namespace) names and uses exactly the keys the
//! previous release does; a scoped store with the bridge on is this
//! release's default; with it off, the layout once no replica of the
//! previous release runs. Once turned off after an upgrade, a replica of
//! 0.1.0 (a rollback) is refused: 0.1.0's own `acquire.lua`
//! (`testkit/fixtures/upgrade/acquire-0.1.0.lua`), called as 0.1.0 calls
//! it, finds the asset held and writes nothing.

mod kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{Fact, Status, Ticket, now_ms};
use assetscan_operator::store::{
    AssetKeys, CLOSED_HOLDER, IdentityBridge, Layout, Patch, RedisTarget, StoreConfig, StoreError,
    TicketStore,
};
use assetscan_testkit::redis::RedisServer;
use kit::setup::{connect as raw, expire_lock};
use redis::AsyncCommands;
use std::collections::BTreeMap;
use std::time::Duration;

const RUN: &str = "uid1-g1-s0";
const OWNER: &str = "uid1";

/// A store on `server`: the legacy layout, or scoped by `team-a` with the
/// bridge `bridge`.
async fn store(server: &RedisServer, scoped: Option<bool>) -> TicketStore {
    let config = StoreConfig {
        lock_ttl: Duration::from_secs(30),
        identity_bridge: scoped.unwrap_or(true).into(),
        ..StoreConfig::default()
    };
    let store = TicketStore::connect(&RedisTarget::Standalone(server.url()), config)
        .await
        .expect("connect");
    match scoped {
        Some(_) => store.scoped("team-a").expect("a namespace name"),
        None => store,
    }
}

fn asset() -> AssetId {
    AssetId::new("payments-db").unwrap()
}

async fn fence(server: &RedisServer, key: &str) -> u64 {
    raw(server).await.get(key).await.unwrap()
}

fn stale(err: StoreError) -> (u64, u64) {
    match err {
        StoreError::StaleToken { caller, valid } => (caller, valid),
        other => panic!("expected a stale token, got {other}"),
    }
}

/// The previous release (the legacy layout) and this one with the bridge
/// take one lock in common, hand a run in flight over in both directions
/// with its progress and facts, refuse each other's stale writes, and draw
/// every token above both fences and the status floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_and_the_legacy_layout_exclude_each_other_and_hand_runs_over() {
    let server = RedisServer::start().unwrap();
    let (previous, bridged) = (store(&server, None).await, store(&server, Some(true)).await);
    let a = asset();
    let (legacy, namespaced) = (previous.keys(&a), bridged.keys(&a));

    let first = previous
        .acquire_owned(&a, RUN, OWNER, "old#1", 0)
        .await
        .unwrap();
    assert_eq!(first.token, 1);
    let online = Patch::default().fact(Fact::Online, true);
    previous
        .advance(&a, RUN, 1, Status::AssetOnline, &online)
        .await
        .unwrap();
    let locked = bridged.acquire_owned(&a, RUN, OWNER, "new#1", 0).await;
    assert!(
        matches!(locked, Err(StoreError::Locked { .. })),
        "the legacy lock is shared"
    );

    // The previous release's executor stalls past its lease: this one goes
    // on from its progress, under a token above the legacy fence.
    expire_lock(&server, &legacy.lock());
    let second = bridged
        .acquire_owned(&a, RUN, OWNER, "new#1", 0)
        .await
        .unwrap();
    assert_eq!(second.token, 2);
    assert_eq!(second.ticket.status, Status::AssetOnline);
    assert_eq!(
        second.ticket.facts.online,
        Some(true),
        "the facts came along"
    );
    let nothing = Patch::default();
    let zombie = previous.advance(&a, RUN, 1, Status::VulnCheckDone, &nothing);
    assert_eq!(stale(zombie.await.unwrap_err()), (1, 2));
    let moved = bridged
        .advance(&a, RUN, 2, Status::VulnCheckDone, &Patch::default())
        .await
        .unwrap();
    let seen = previous.get_ticket(&a, RUN).await.unwrap().unwrap();
    assert_eq!(
        (seen.status, seen.fencing_token),
        (moved.status, 2),
        "the legacy copy"
    );
    assert_eq!(
        fence(&server, &legacy.fence()).await,
        2,
        "the legacy fence moved"
    );

    // And back: this release stalls, the previous one takes over.
    expire_lock(&server, &namespaced.lock());
    expire_lock(&server, &legacy.lock());
    let third = previous
        .acquire_owned(&a, RUN, OWNER, "old#2", 0)
        .await
        .unwrap();
    assert_eq!(
        (third.token, third.ticket.status),
        (3, Status::VulnCheckDone)
    );
    let zombie = bridged.advance(&a, RUN, 2, Status::Finished, &nothing);
    assert_eq!(
        stale(zombie.await.unwrap_err()),
        (2, 3),
        "refused by the legacy copy"
    );
    previous
        .advance(&a, RUN, 3, Status::Finished, &Patch::default())
        .await
        .unwrap();
    previous.release(&a, &third.lease).await.unwrap();

    // The ended run is found as the previous release left it; a new run
    // draws above both fences and the status floor, into both fences.
    let found = bridged
        .acquire_owned(&a, RUN, OWNER, "new#2", 0)
        .await
        .unwrap();
    assert_eq!((found.ticket.status, found.token), (Status::Finished, 3));
    let next = bridged
        .acquire_owned(&a, "uid1-g2-s0", OWNER, "new#2", 10)
        .await
        .unwrap();
    assert_eq!(next.token, 11, "above the status floor");
    assert_eq!(fence(&server, &legacy.fence()).await, 11);
    assert_eq!(fence(&server, &namespaced.fence()).await, 11);
}

/// With the bridge on and off side by side (the rolling restart that turns
/// it off), both take the namespaced lock, and the first token without the
/// bridge is above every token drawn with it. Retiring with the bridge
/// retires in both families: neither layout may start the owner's runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_on_and_off_share_the_namespaced_lock_and_retire_covers_both() {
    let server = RedisServer::start().unwrap();
    let previous = store(&server, None).await;
    let (bridged, isolated) = (
        store(&server, Some(true)).await,
        store(&server, Some(false)).await,
    );
    let a = asset();

    let held = bridged
        .acquire_owned(&a, RUN, OWNER, "on#1", 0)
        .await
        .unwrap();
    let locked = isolated.acquire_owned(&a, RUN, OWNER, "off#1", 0).await;
    assert!(
        matches!(locked, Err(StoreError::Locked { .. })),
        "one namespaced lock"
    );
    bridged.release(&a, &held.lease).await.unwrap();
    let legacy_lock: Option<String> = raw(&server)
        .await
        .get(bridged.keys(&a).legacy().unwrap().lock())
        .await
        .unwrap();
    assert_eq!(legacy_lock, None, "released with the namespaced one");
    // A run the previous release started, in the legacy family only (before
    // a claim without the bridge: from then on the previous release is
    // refused, see `the_bridge_off_after_an_upgrade_refuses_0_1_0`).
    let other = previous
        .acquire_owned(&a, "uid1-g2-s0", OWNER, "old#1", 0)
        .await
        .unwrap();
    previous.release(&a, &other.lease).await.unwrap();
    let off = isolated
        .acquire_owned(&a, RUN, OWNER, "off#1", 0)
        .await
        .unwrap();
    assert_eq!(off.token, held.token + 1);
    isolated.release(&a, &off.lease).await.unwrap();

    let runs = bridged.runs(&a).await.unwrap();
    assert_eq!(runs, [RUN, "uid1-g2-s0"], "both families listed");
    bridged.retire(&a, OWNER, &runs, "cleanup").await.unwrap();
    for store in [&previous, &bridged, &isolated] {
        assert!(store.runs(&a).await.unwrap().is_empty());
        let late = store.acquire_owned(&a, RUN, OWNER, "late#1", 0).await;
        assert!(
            matches!(late, Err(StoreError::RunRetired { .. })),
            "{:?}",
            late.err()
        );
    }
}

/// `auto`, the default: a Redis without 0.1.0's keys is a new install, and
/// its stores take no legacy key (namespaces isolated from the first
/// install); one where 0.1.0 left a fence is an upgrade, and the bridge is
/// on. The decision is recorded at `<prefix>:layout`, so the stores that
/// connect after keep to it even once 0.1.0's keys have expired; `false`
/// turns it off for good, closed to 0.1.0, and `auto` then keeps it so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_isolates_a_new_install_and_bridges_an_upgrade_until_turned_off() {
    let connect = |server: &RedisServer, bridge: IdentityBridge| {
        let url = server.url();
        async move {
            let config = StoreConfig {
                identity_bridge: bridge,
                ..StoreConfig::default()
            };
            TicketStore::connect(&RedisTarget::Standalone(url), config)
                .await
                .expect("connect")
        }
    };
    // A new install: nothing of 0.1.0's.
    let fresh = RedisServer::start().unwrap();
    let store = connect(&fresh, IdentityBridge::Auto).await;
    assert!(!store.bridge().on(), "{}", store.bridge().why);
    assert!(
        store.bridge().why.contains("a new install"),
        "{}",
        store.bridge().why
    );
    let scoped = store.scoped("team-a").unwrap();
    kit::tickets::claim(&scoped, &asset(), RUN)
        .try_acquire()
        .await
        .expect("claimed");
    let mut raw_fresh = raw(&fresh).await;
    let legacy: Vec<String> = raw_fresh.keys("asc:{*").await.unwrap();
    assert!(
        legacy.is_empty(),
        "a new install takes no legacy key: {legacy:?}"
    );
    // 0.1.0 scanned here (its fence is there): an upgrade.
    let upgraded = RedisServer::start().unwrap();
    let mut raw_upgraded = raw(&upgraded).await;
    let _: () = raw_upgraded
        .set("asc:{payments-db}:fence", 7)
        .await
        .unwrap();
    let store = connect(&upgraded, IdentityBridge::Auto).await;
    assert!(store.bridge().on(), "{}", store.bridge().why);
    assert!(
        store.bridge().why.contains("asc:{payments-db}:fence"),
        "{}",
        store.bridge().why
    );
    // Recorded: still on once the fence has gone.
    let _: () = raw_upgraded.del("asc:{payments-db}:fence").await.unwrap();
    assert!(connect(&upgraded, IdentityBridge::Auto).await.bridge().on());
    // Turned off after the upgrade, and kept off (and closed) by `auto`.
    let off = connect(&upgraded, IdentityBridge::Off).await;
    assert_eq!(off.bridge().layout, Layout::Closed, "{}", off.bridge().why);
    let after = connect(&upgraded, IdentityBridge::Auto).await;
    assert_eq!(after.bridge().layout, Layout::Closed);
    assert_eq!(after.bridge().summary(), "off (0.1.0 refused)");
    assert!(
        after.bridge().why.contains("records closed"),
        "{}",
        after.bridge().why
    );
    let marker: String = raw_upgraded.get("asc:layout").await.unwrap();
    assert_eq!(marker, "closed");
}

/// The lock's ttl and `tickets.abandonAfter` of the stores below: how long
/// a claim closed to 0.1.0 leaves its marker on the legacy lock.
const LOCK_TTL: Duration = Duration::from_secs(30);
const ABANDON_AFTER: Duration = Duration::from_secs(3600);

/// A store on `server` with the bridge `bridge`, scoped by `namespace`.
async fn scoped(server: &RedisServer, bridge: IdentityBridge, namespace: &str) -> TicketStore {
    let config = StoreConfig {
        lock_ttl: LOCK_TTL,
        abandon_after: ABANDON_AFTER,
        identity_bridge: bridge,
        ..StoreConfig::default()
    };
    let store = TicketStore::connect(&RedisTarget::Standalone(server.url()), config)
        .await
        .expect("connect");
    store.scoped(namespace).expect("a namespace name")
}

/// A Redis where 0.1.0 ran (its fence of the asset, at 7), upgraded (the
/// bridge on by `auto`), and a store of `team-a` with the bridge turned
/// off: closed to 0.1.0.
async fn upgraded_and_turned_off() -> (RedisServer, TicketStore) {
    let server = RedisServer::start().unwrap();
    let _: () = raw(&server).await.set(legacy().fence(), 7).await.unwrap();
    let upgraded = scoped(&server, IdentityBridge::Auto, "team-a").await;
    assert!(upgraded.bridge().on(), "{}", upgraded.bridge().why);
    let store = scoped(&server, IdentityBridge::Off, "team-a").await;
    assert_eq!(
        store.bridge().layout,
        Layout::Closed,
        "{}",
        store.bridge().why
    );
    assert_eq!(store.bridge().summary(), "off (0.1.0 refused)");
    (server, store)
}

/// The asset's keys in 0.1.0's layout.
fn legacy() -> AssetKeys {
    AssetKeys::new("asc", &asset())
}

/// 0.1.0's `acquire.lua`, byte-exact: what a replica of 0.1.0 runs (by its
/// own SHA, whatever this release loaded).
fn acquire_0_1_0() -> redis::Script {
    redis::Script::new(include_str!(
        "../testkit/fixtures/upgrade/acquire-0.1.0.lua"
    ))
}

/// A claim of `run` of `OWNER` by a replica of 0.1.0 holding as `holder`,
/// with the KEYS and positional arguments its store sends (its defaults: a
/// 30 s lock, an audit cap of 1000, tickets kept 24 h, the asset 7 days, no
/// copy known): the token, or the error's code and detail.
async fn claim_0_1_0(server: &RedisServer, run: &str, holder: &str) -> Result<u64, [String; 2]> {
    let keys = legacy();
    let now = now_ms();
    let initial = serde_json::to_string(&Ticket::new(asset().as_str(), run, now)).unwrap();
    let acquire = acquire_0_1_0();
    let mut script = acquire.prepare_invoke();
    script
        .key(keys.lock())
        .key(keys.fence())
        .key(keys.ticket(run))
        .key(keys.audit())
        .key(keys.retired(OWNER))
        .key(keys.facts(run));
    let reply: redis::RedisResult<(u64, String, redis::Value, i64)> = script
        .arg(holder)
        .arg(30_000)
        .arg(0)
        .arg(now)
        .arg(initial)
        .arg(1000)
        .arg(24 * 3_600_000)
        .arg(7 * 24 * 3_600_000)
        .arg("")
        .invoke_async(&mut raw(server).await)
        .await;
    reply.map(|(token, ..)| token).map_err(|e| {
        let code = e.code().unwrap_or("not a script error").to_owned();
        [code, e.detail().unwrap_or_default().to_owned()]
    })
}

/// 0.1.0's answer `refused`: `LOCKED` by `holder`, for a positive time.
fn assert_locked_by(refused: Result<u64, [String; 2]>, holder: &str) {
    let [code, detail] = refused.expect_err("0.1.0's claim is refused");
    let words: Vec<&str> = detail.split_whitespace().collect();
    assert_eq!(code, "LOCKED", "{detail}");
    assert_eq!(words.first(), Some(&holder), "{detail}");
    let pttl: i64 = words[1].parse().unwrap();
    assert!(pttl > 0, "{detail}");
}

/// Every key of 0.1.0's layout, with what it holds.
async fn legacy_keys(server: &RedisServer) -> BTreeMap<String, String> {
    kit::setup::keys_of(server, "asc:{*").await
}

/// The legacy lock's holder and ttl (ms).
async fn legacy_lock(server: &RedisServer) -> (Option<String>, i64) {
    let mut conn = raw(server).await;
    let holder: Option<String> = conn.get(legacy().lock()).await.unwrap();
    let pttl: i64 = conn.pttl(legacy().lock()).await.unwrap();
    (holder, pttl)
}

/// Issue 46: the bridge turned off after an upgrade, then a rollback to
/// 0.1.0. A claim of this release leaves the closed marker on 0.1.0's lock
/// (for `tickets.abandonAfter`, renewed by each claim, kept after the run),
/// so 0.1.0's own claim answers `LOCKED` by that holder and writes nothing:
/// the legacy fence stays where 0.1.0 left it and no ticket appears. With
/// the bridge simply off (before this), 0.1.0 took its lock beside this
/// release's namespaced one and ran the asset too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_off_after_an_upgrade_refuses_0_1_0() {
    let (server, closed) = upgraded_and_turned_off().await;
    let a = asset();
    let held = closed
        .acquire_owned(&a, RUN, OWNER, "new#1", 0)
        .await
        .unwrap();
    let (holder, pttl) = legacy_lock(&server).await;
    assert_eq!(holder.as_deref(), Some(CLOSED_HOLDER));
    let (lower, upper) = (LOCK_TTL.as_millis(), ABANDON_AFTER.as_millis());
    assert!(
        (lower as i64) < pttl && pttl <= upper as i64,
        "kept for abandonAfter: {pttl}"
    );

    let before = legacy_keys(&server).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        [&legacy().fence(), &legacy().lock()],
        "only 0.1.0's fence and the marker"
    );
    assert_locked_by(claim_0_1_0(&server, RUN, "old#1").await, CLOSED_HOLDER);
    assert_locked_by(
        claim_0_1_0(&server, "uid1-g2-s0", "old#1").await,
        CLOSED_HOLDER,
    );
    assert_eq!(legacy_keys(&server).await, before, "0.1.0 wrote nothing");
    assert_eq!(fence(&server, &legacy().fence()).await, 7);

    // The run ends and releases its lock: the marker stays.
    closed.release(&a, &held.lease).await.unwrap();
    assert_locked_by(claim_0_1_0(&server, RUN, "old#2").await, CLOSED_HOLDER);
    assert_eq!(legacy_keys(&server).await, before, "0.1.0 wrote nothing");
}

/// Closed to 0.1.0 while a 0.1.0 executor holds the asset (its run in
/// flight): this release's claim is refused `LOCKED` by it, takes nothing,
/// and succeeds once 0.1.0's lock is gone, leaving the marker in its place.
/// With the bridge simply off (before this), the claim took the namespaced
/// lock beside 0.1.0's: two executors on one asset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_to_0_1_0_a_claim_waits_for_a_0_1_0_run_in_flight() {
    let (server, closed) = upgraded_and_turned_off().await;
    let a = asset();
    assert_eq!(claim_0_1_0(&server, RUN, "old#1").await, Ok(8));

    let refused = closed.acquire_owned(&a, RUN, OWNER, "new#1", 0).await;
    match refused {
        Err(StoreError::Locked { holder, .. }) => assert_eq!(holder, "old#1"),
        other => panic!("expected LOCKED by 0.1.0's executor, got {:?}", other.err()),
    }
    let namespaced: Option<String> = raw(&server)
        .await
        .get(closed.keys(&a).lock())
        .await
        .unwrap();
    assert_eq!(namespaced, None, "nothing taken");
    assert_eq!(legacy_lock(&server).await.0.as_deref(), Some("old#1"));

    // 0.1.0's executor ends its run and releases.
    expire_lock(&server, &legacy().lock());
    let claimed = closed
        .acquire_owned(&a, RUN, OWNER, "new#1", 0)
        .await
        .unwrap();
    assert!(claimed.lease.is_held());
    assert_eq!(legacy_lock(&server).await.0.as_deref(), Some(CLOSED_HOLDER));
    assert_locked_by(claim_0_1_0(&server, RUN, "old#2").await, CLOSED_HOLDER);
}

/// A new install never closes anything: with the bridge off by `auto` or
/// set false on a Redis without 0.1.0's keys, a run claimed, advanced,
/// released and retired leaves no key of 0.1.0's layout, and the layout
/// recorded stays `namespaced`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_install_turned_off_names_no_key_of_0_1_0s_layout() {
    let server = RedisServer::start().unwrap();
    let a = asset();
    for (bridge, holder) in [
        (IdentityBridge::Off, "off#1"),
        (IdentityBridge::Auto, "auto#1"),
    ] {
        let store = scoped(&server, bridge, "team-a").await;
        assert_eq!(
            store.bridge().layout,
            Layout::Namespaced,
            "{}",
            store.bridge().why
        );
        assert_eq!(store.bridge().summary(), "off");
        let run = format!("uid1-g1-{holder}").replace('#', "-");
        let claimed = store
            .acquire_owned(&a, &run, OWNER, holder, 0)
            .await
            .unwrap();
        store
            .advance(
                &a,
                &run,
                claimed.token,
                Status::AssetOffline,
                &Patch::default(),
            )
            .await
            .unwrap();
        store.release(&a, &claimed.lease).await.unwrap();
    }
    let store = scoped(&server, IdentityBridge::Auto, "team-a").await;
    let runs = store.runs(&a).await.unwrap();
    assert_eq!(runs.len(), 2);
    store.retire(&a, OWNER, &runs, "cleanup").await.unwrap();
    assert_eq!(legacy_keys(&server).await, BTreeMap::new());
    let marker: String = raw(&server).await.get("asc:layout").await.unwrap();
    assert_eq!(marker, "namespaced");
}

/// Re-opening for a planned rollback: the bridge turned on again takes
/// 0.1.0's lock over the marker, so 0.1.0 and this release exclude each
/// other through it as before (0.1.0 refused while the bridged claim holds
/// it, then the other way round), and tokens go on above both fences.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_on_again_takes_0_1_0s_lock_over_the_marker() {
    let (server, closed) = upgraded_and_turned_off().await;
    let a = asset();
    let first = closed
        .acquire_owned(&a, RUN, OWNER, "off#1", 0)
        .await
        .unwrap();
    closed.release(&a, &first.lease).await.unwrap();
    assert_eq!(legacy_lock(&server).await.0.as_deref(), Some(CLOSED_HOLDER));

    let bridged = scoped(&server, IdentityBridge::On, "team-a").await;
    assert!(bridged.bridge().on(), "{}", bridged.bridge().why);
    assert!(
        bridged.bridge().why.contains("re-opened to 0.1.0"),
        "{}",
        bridged.bridge().why
    );
    let next = "uid1-g2-s0";
    let held = bridged
        .acquire_owned(&a, next, OWNER, "on#1", 0)
        .await
        .unwrap();
    assert_eq!(legacy_lock(&server).await.0.as_deref(), Some("on#1"));
    assert_eq!(held.token, 8, "above 0.1.0's fence");
    assert_locked_by(claim_0_1_0(&server, next, "old#1").await, "on#1");

    bridged.release(&a, &held.lease).await.unwrap();
    assert_eq!(legacy_lock(&server).await.0, None, "released with it");
    assert_eq!(claim_0_1_0(&server, next, "old#1").await, Ok(9));
    let refused = bridged.acquire_owned(&a, next, OWNER, "on#2", 0).await;
    match refused {
        Err(StoreError::Locked { holder, .. }) => assert_eq!(holder, "old#1"),
        other => panic!("expected LOCKED by 0.1.0's executor, got {:?}", other.err()),
    }
    let auto = scoped(&server, IdentityBridge::Auto, "team-a").await;
    assert!(auto.bridge().on(), "{}", auto.bridge().why);
}

/// Closed to 0.1.0, two namespaces with one `assetId` still do not delay
/// each other: the marker holds 0.1.0's lock for nobody, so each claims
/// while the other's run holds its namespaced lock, each from its own
/// fence; 0.1.0 stays refused until both have released and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_to_0_1_0_two_namespaces_with_one_asset_id_do_not_wait_for_each_other() {
    let (server, team_a) = upgraded_and_turned_off().await;
    let team_b = scoped(&server, IdentityBridge::Auto, "team-b").await;
    assert_eq!(team_b.bridge().layout, Layout::Closed);
    let a = asset();
    let held_a = team_a
        .acquire_owned(&a, RUN, OWNER, "a#1", 0)
        .await
        .unwrap();
    let held_b = team_b
        .acquire_owned(&a, RUN, "uid2", "b#1", 0)
        .await
        .expect("team-b is not delayed by team-a's run");
    assert_eq!((held_a.token, held_b.token), (1, 1), "each its own fence");
    assert!(held_a.lease.is_held() && held_b.lease.is_held());
    assert_eq!(legacy_lock(&server).await.0.as_deref(), Some(CLOSED_HOLDER));
    assert_locked_by(claim_0_1_0(&server, RUN, "old#1").await, CLOSED_HOLDER);

    team_a.release(&a, &held_a.lease).await.unwrap();
    let again = team_a
        .acquire_owned(&a, "uid1-g2-s0", OWNER, "a#2", 0)
        .await
        .expect("team-a is not delayed by team-b's run");
    assert!(held_b.lease.is_held());
    team_a.release(&a, &again.lease).await.unwrap();
    team_b.release(&a, &held_b.lease).await.unwrap();
    assert_locked_by(claim_0_1_0(&server, RUN, "old#1").await, CLOSED_HOLDER);
}

/// `refuse_legacy_ms` is an added, optional argument of `acquire.lua`: it
/// names one more KEY (0.1.0's lock), goes without `bridge`, and a call
/// without it is refused or accepted exactly as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_legacy_ms_is_an_added_argument_of_acquire_lua() {
    let server = RedisServer::start().unwrap();
    let mut conn = raw(&server).await;
    let script = redis::Script::new(include_str!("../lua/acquire.lua"));
    let namespaced = AssetKeys::namespaced("asc", "team-a", &asset(), Layout::Namespaced);
    let call = |extra: &[(&str, serde_json::Value)], keys: &[String]| {
        let mut object = serde_json::json!({
            "v": 1, "holder": "A", "ttl_ms": 30_000, "floor": 0, "now": now_ms(),
            "initial": {"asset": "payments-db", "run": "r1"},
        });
        for (name, value) in extra {
            object[*name] = value.clone();
        }
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        invocation.arg(object.to_string());
        invocation
    };
    let own = [
        namespaced.lock(),
        namespaced.fence(),
        namespaced.ticket("r1"),
        namespaced.audit(),
        namespaced.retired(""),
        namespaced.facts("r1"),
    ];
    let with_lock: Vec<String> = own.iter().cloned().chain([legacy().lock()]).collect();
    let refused = async |invocation: redis::ScriptInvocation<'_>, conn: &mut _| {
        let reply: redis::RedisResult<redis::Value> = invocation.invoke_async(conn).await;
        reply
            .expect_err("refused")
            .detail()
            .unwrap_or_default()
            .to_owned()
    };
    let cases = [
        (
            call(&[("refuse_legacy_ms", 60_000.into())], &own),
            "7 KEYS expected with supersedes, bridge and refuse_legacy_ms as given, 6 given",
        ),
        (
            call(
                &[("refuse_legacy_ms", 60_000.into()), ("bridge", true.into())],
                &with_lock,
            ),
            "refuse_legacy_ms goes without bridge",
        ),
        (
            call(&[("refuse_legacy_ms", (-1).into())], &with_lock),
            "refuse_legacy_ms must be an integer >= 0",
        ),
        (
            call(&[("refuse_legacy_ms", 0.into())], &with_lock),
            "6 KEYS expected with supersedes and bridge as given, 7 given",
        ),
    ];
    for (invocation, why) in cases {
        let detail = refused(invocation, &mut conn).await;
        assert!(detail.contains(why), "{detail}");
    }
    let claimed: (u64, String, redis::Value, i64) = call(&[], &own)
        .invoke_async(&mut conn)
        .await
        .expect("without it, as before");
    assert_eq!(claimed.0, 1);
    let claimed: (u64, String, redis::Value, i64) =
        call(&[("refuse_legacy_ms", 60_000.into())], &with_lock)
            .invoke_async(&mut conn)
            .await
            .expect("with it and its KEY");
    assert_eq!(claimed.0, 2);
    assert_eq!(legacy_lock(&server).await.0.as_deref(), Some(CLOSED_HOLDER));
}
