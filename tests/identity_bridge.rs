//! An asset's identity is `(namespace, assetId)`, and the bridge to the
//! previous release's layout, against a real redis-server. A store of the
//! legacy layout (no namespace) names and uses exactly the keys the
//! previous release does; a scoped store with the bridge on is this
//! release's default; with it off, the layout once no replica of the
//! previous release runs.

mod kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{Fact, Status};
use assetscan_operator::store::{
    IdentityBridge, Patch, RedisTarget, StoreConfig, StoreError, TicketStore,
};
use assetscan_testkit::redis::RedisServer;
use kit::setup::{connect as raw, expire_lock};
use redis::AsyncCommands;
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
    let off = isolated
        .acquire_owned(&a, RUN, OWNER, "off#1", 0)
        .await
        .unwrap();
    assert_eq!(off.token, held.token + 1);
    isolated.release(&a, &off.lease).await.unwrap();

    // A run the previous release started, in the legacy family only.
    let other = previous
        .acquire_owned(&a, "uid1-g2-s0", OWNER, "old#1", 0)
        .await
        .unwrap();
    previous.release(&a, &other.lease).await.unwrap();
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
/// turns it off for good, and `auto` then keeps it off.
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
    assert!(!store.bridge().on, "{}", store.bridge().why);
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
    assert!(store.bridge().on, "{}", store.bridge().why);
    assert!(
        store.bridge().why.contains("asc:{payments-db}:fence"),
        "{}",
        store.bridge().why
    );
    // Recorded: still on once the fence has gone.
    let _: () = raw_upgraded.del("asc:{payments-db}:fence").await.unwrap();
    assert!(connect(&upgraded, IdentityBridge::Auto).await.bridge().on);
    // Turned off after the upgrade, and kept off by `auto`.
    assert!(!connect(&upgraded, IdentityBridge::Off).await.bridge().on);
    let after = connect(&upgraded, IdentityBridge::Auto).await;
    assert!(!after.bridge().on, "{}", after.bridge().why);
    let marker: String = raw_upgraded.get("asc:layout").await.unwrap();
    assert_eq!(marker, "namespaced");
}
