//! Redis as production runs it, all real processes on loopback: a Sentinel
//! group (master, replica, three sentinels) failing over under the
//! controller; the ACL user of the README; TLS with a private CA and client
//! certificates; and credentials or certificates that are wrong, which must
//! give one clear error and a backoff, not a retry storm.
//!
//!   cargo test --all-features --test redis_production

mod controller_kit;

use assetscan_operator::crd::AssetScan;
use assetscan_operator::store::{AssetId, RedisTarget, TicketStore};
use assetscan_operator::ticket::Status;
use assetscan_testkit::redis::{RedisServer, SentinelGroup};
use controller_kit::*;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::time::Duration;

fn fence_of(obj: &AssetScan) -> (i64, i64) {
    let s = obj.status.as_ref().expect("status");
    (s.fencing_token.unwrap_or(-1), s.revision.unwrap_or(-1))
}

/// Runs a blocking fixture call (sentinel waits) without stalling the
/// runtime's other worker.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// `GET key` on one data node, bypassing the operator.
async fn raw_get(node: &RedisServer, key: &str) -> Option<String> {
    let mut conn = redis::Client::open(node.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// A new spec generation: a new run, which must take a new token.
async fn bump_generation(h: &Harness, name: &str) {
    h.api()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"policy": {"cvssThreshold": 6.5}}})),
        )
        .await
        .unwrap();
}

/// A failover forced while a run is in flight, with the old master cut off
/// from the sentinels for a while (so it keeps taking writes, as in a
/// partition): the scans that ran on it finish and are mirrored, then the
/// old master is demoted and what it took is gone from Redis. The controller
/// follows the new master on its own; the next runs take tokens above every
/// token in the objects' statuses (the floor), although the new master's
/// fence never saw those tokens; and no status ever goes backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_is_followed_and_no_token_goes_backwards() {
    let group = blocking(SentinelGroup::start).expect("sentinel group starts");
    let h = Harness::start().await;
    let target = RedisTarget::parse(&group.target_spec()).unwrap();
    let first = group.master_port().unwrap();
    let (a, b) = ("failover-a.dc1.example.com", "failover-b.dc1.example.com");
    h.stubs.inventory.set_online(a, true);
    h.stubs.inventory.set_online(b, true);
    h.stubs
        .osv
        .faults()
        .set_latency(Duration::from_millis(1500));
    let ctl = h.controller_on("ctl-a", &target).await;
    h.create(&scan("failover-a", a, true)).await;
    h.wait("failover-a", "ASSET_ONLINE", Duration::from_secs(20), |o| {
        o.status.as_ref().and_then(|s| s.phase) == Some(Status::AssetOnline)
    })
    .await;

    // Mid-run: the replica is promoted; the old master does not hear of it.
    blocking(|| group.refuse_reconfiguration(first)).unwrap();
    let second = blocking(|| group.failover()).expect("failover");
    assert_ne!(second, first);
    h.create(&scan("failover-b", b, true)).await;
    let a1 = h.wait_terminal("failover-a", Duration::from_secs(30)).await;
    let b1 = h.wait_terminal("failover-b", Duration::from_secs(30)).await;
    for done in [&a1, &b1] {
        assert_eq!(done.status.as_ref().unwrap().phase, Some(Status::Finished));
    }
    assert_eq!(
        blocking(|| group.role(first)).unwrap(),
        "master",
        "the old master took those writes"
    );
    let store = TicketStore::connect(&target, h.config.store())
        .await
        .unwrap();
    let b_keys = store.keys(&AssetId::new(b).unwrap());
    let b_ticket = b_keys.ticket(b1.status.as_ref().unwrap().run.as_deref().unwrap());
    let old = group.node(first).unwrap();
    let new = group.node(second).unwrap();
    assert!(raw_get(old, &b_ticket).await.is_some());
    assert!(raw_get(new, &b_ticket).await.is_none(), "never replicated");

    // The sentinels reach the old master: it becomes a replica of the new
    // one and drops what only it had; its clients are disconnected.
    blocking(|| group.allow_reconfiguration(first)).unwrap();
    blocking(|| group.wait_demoted(first)).expect("old master demoted");
    assert!(
        raw_get(old, &b_ticket).await.is_none(),
        "acknowledged writes vanished with the failover"
    );
    assert!(raw_get(new, &b_keys.fence()).await.is_none());

    // Work continues on the new master, above the tokens of the statuses.
    bump_generation(&h, "failover-a").await;
    bump_generation(&h, "failover-b").await;
    for (name, before) in [("failover-a", &a1), ("failover-b", &b1)] {
        let after = h.wait_terminal(name, Duration::from_secs(60)).await;
        let s = after.status.as_ref().unwrap();
        assert_eq!(s.phase, Some(Status::Finished), "{name}");
        assert_eq!(s.observed_generation, Some(2), "{name}");
        assert!(
            fence_of(&after).0 > fence_of(before).0,
            "{name}: token {:?} after {:?}",
            fence_of(&after),
            fence_of(before)
        );
        let ticket = ticket_via_sentinels(&store, &after).await;
        assert_eq!(
            (ticket.fencing_token as i64, ticket.revision as i64),
            fence_of(&after),
            "{name}: the ticket is on the master the sentinels name"
        );
        check_status_history(&h, name, &after);
    }
    // The new master's fence started from nothing (checked above): without
    // the floor, B's second run would have been handed B's first token again.
    let b2 = h.api().get("failover-b").await.unwrap();
    let b2_ticket = b_keys.ticket(b2.status.as_ref().unwrap().run.as_deref().unwrap());
    assert!(raw_get(new, &b2_ticket).await.is_some());
    ctl.stop().await;
}

/// The run's ticket as the store (through the sentinels) reads it.
async fn ticket_via_sentinels(
    store: &TicketStore,
    obj: &AssetScan,
) -> assetscan_operator::ticket::Ticket {
    let run = obj.status.as_ref().unwrap().run.clone().unwrap();
    store
        .get_ticket(&AssetId::new(obj.spec.asset_id.clone()).unwrap(), &run)
        .await
        .unwrap()
        .expect("ticket on the current master")
}
