//! A Sentinel group failing over under the controller and the CLI: the
//! fence never goes back, the run goes on, the notification goes out.

use super::credentials::{PASSWORD, USER, create_acl_user};
use super::*;

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
    let mut h = Harness::start().await;
    // The old master is kept deaf, and a second scan must run and finish on
    // it, as asynchronous replication allows: without the replica wait,
    // which would hold that scan's notification instead
    // (`tests/redis_failover.rs`). What is checked here is the token floor.
    h.config.redis.replica_ack.mode = ReplicaAckMode::Never;
    let first = group.master_port().unwrap();
    // As in production: the documented ACL user, on every data node.
    let target = RedisTarget::parse(&group.target_spec().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://{USER}:{}@", PASSWORD.replace(' ', "%20")),
        1,
    ))
    .unwrap();
    for node in group.nodes() {
        create_acl_user(node, &[]);
    }
    let err = TicketStore::connect(&target, h.config.store())
        .await
        .err()
        .expect("behind Sentinel the user also needs ROLE");
    let message = err.to_string();
    assert!(
        message.contains("'role'") && message.contains("grant the ACL rules in docs/redis.md"),
        "{message}"
    );
    for node in group.nodes() {
        create_acl_user(node, &["+role"]);
    }
    let failover_a = h.online(scan("failover-a").high_risk());
    let failover_b = h.online(scan("failover-b").high_risk());
    h.stubs
        .osv
        .faults()
        .set_latency(Duration::from_millis(1500));
    let ctl = h.controller_on("ctl-a", &target).await;
    h.create(&failover_a).await;
    h.wait_phase("failover-a", Status::AssetOnline).await;

    // Mid-run: the replica is promoted; the old master does not hear of it.
    blocking(|| group.refuse_reconfiguration(first)).unwrap();
    let second = blocking(|| group.failover()).expect("failover");
    assert_ne!(second, first);
    h.create(&failover_b).await;
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
    let b_keys = store.keys(&asset_id(&failover_b.spec.asset_id));
    let b_ticket = b_keys.ticket(b1.status.as_ref().unwrap().run.as_deref().unwrap());
    let old = group.node(first).unwrap();
    let new = group.node(second).unwrap();
    assert!(get(old, &b_ticket).is_some());
    assert!(get(new, &b_ticket).is_none(), "never replicated");

    // The sentinels reach the old master: it becomes a replica of the new
    // one and drops what only it had; its clients are disconnected.
    blocking(|| group.allow_reconfiguration(first)).unwrap();
    blocking(|| group.wait_demoted(first)).expect("old master demoted");
    assert!(
        get(old, &b_ticket).is_none(),
        "acknowledged writes vanished with the failover"
    );
    assert!(get(new, &b_keys.fence()).is_none());

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
    assert!(get(new, &b2_ticket).is_some());
    ctl.stop().await;
}

/// The master dies (SIGKILL) in the middle of a run: commands fail while the
/// sentinels notice and promote the replica, then the same store reaches the
/// new master by itself, finds the run's replicated ticket and lock there,
/// and the run goes on under its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_replaced_and_the_run_goes_on() {
    let mut group = blocking(SentinelGroup::start).expect("sentinel group starts");
    let target = RedisTarget::parse(&group.target_spec()).unwrap();
    let config = StoreConfig {
        timeout: Duration::from_secs(1),
        ..StoreConfig::default()
    };
    let store = TicketStore::connect(&target, config).await.unwrap();
    let asset = asset_id("killed-master-01");
    let mut claimed = claim(&store, &asset, "r1").holder("h1").acquire().await;
    let online = Patch::default().completes(Step::OnlineCheck);
    claimed.advance(Status::AssetOnline, &online).await;
    // Acknowledged by the replica before the crash (else it could be lost).
    let acked: i64 = blocking(|| {
        group
            .master()
            .unwrap()
            .query(redis::cmd("WAIT").arg(1).arg(5000))
    })
    .unwrap();
    assert_eq!(acked, 1);

    let new = blocking(|| group.kill_master()).expect("the sentinels fail over");
    until(
        "the store reaches the new master",
        Duration::from_secs(30),
        async || store.get_ticket(&asset, "r1").await.is_ok(),
    )
    .await;
    let ticket = store.get_ticket(&asset, "r1").await.unwrap().unwrap();
    assert_eq!(
        (ticket.status, ticket.fencing_token),
        (Status::AssetOnline, claimed.token)
    );
    let note = Patch::default().fact(Fact::Online, true);
    let next = claimed.advance(Status::AssetOnline, &note).await;
    let key = store.keys(&asset).ticket("r1");
    let on_new: Ticket =
        serde_json::from_str(&get(group.node(new).unwrap(), &key).unwrap()).unwrap();
    assert_eq!(on_new.revision, next.revision, "written to the new master");
    assert!(store.release(&asset, &claimed.lease).await.unwrap());
}

/// The operator's own runs after the master of a 1 master + 1 replica
/// group is SIGKILLed mid-run: the promoted replica has no replica to wait
/// for, and the high-risk scan notifies within the failover wait and the
/// notification's timeout; the metrics say the writes were unreplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_notifies_after_the_master_is_killed() {
    let mut group = blocking(SentinelGroup::start).expect("sentinel group starts");
    let h = Harness::start().await;
    let target = RedisTarget::parse(&group.target_spec()).unwrap();
    let ctl = h.controller_on("ctl-k", &target).await;
    let store = &ctl.store;
    let online = || {
        store
            .replica_stats()
            .map(|s| s.online.load(std::sync::atomic::Ordering::Relaxed))
    };
    until(
        "the store sees the replica",
        Duration::from_secs(30),
        async || online() == Some(1),
    )
    .await;
    h.stubs
        .osv
        .faults()
        .set_latency(Duration::from_millis(1500));
    let obj = h.online(scan("killed-ctl").high_risk());
    h.create(&obj).await;
    h.wait_phase("killed-ctl", Status::AssetOnline).await;

    let killed = std::time::Instant::now();
    blocking(|| group.kill_master()).expect("the sentinels fail over");
    let bound = h.config.redis.failover_wait + h.config.steps.notify.timeout;
    let done = h.wait_terminal("killed-ctl", bound).await;
    let took = killed.elapsed();
    println!("operator: notified {took:?} after the SIGKILL (bound {bound:?})");
    let status = done.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(Status::Finished));
    assert!(status.notification.is_some(), "{status:?}");
    assert_eq!(h.stubs.sink.effects(), 1, "notified once");
    observe_store(&ctl.metrics, store);
    assert_eq!(ctl.counter("assetscan_redis_replicas_online"), 0.0);
    assert!(ctl.counter("assetscan_notification_writes_unreplicated") >= 2.0);
    ctl.stop().await;
}

/// Behind Sentinel, the documented user with `+role` but without `+wait`:
/// the notification's intent, which waits for the group's replica, is
/// refused with the permission hint every other missing command gets, not
/// as a reply the client cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_sentinel_a_missing_wait_gets_the_permission_hint() {
    let group = blocking(SentinelGroup::start).expect("sentinel group starts");
    for node in group.nodes() {
        create_acl_user(node, &["+role"]);
    }
    let target = RedisTarget::parse(&group.target_spec().replacen(
        "redis+sentinel://",
        &format!("redis+sentinel://{USER}:{}@", PASSWORD.replace(' ', "%20")),
        1,
    ))
    .unwrap();
    let store = TicketStore::connect(&target, StoreConfig::default())
        .await
        .unwrap();
    until(
        "the store sees the replica",
        Duration::from_secs(30),
        async || {
            store
                .replica_stats()
                .is_some_and(|s| s.online.load(std::sync::atomic::Ordering::Relaxed) == 1)
        },
    )
    .await;
    let asset = asset_id("acl-wait-01");
    let mut held = claim(&store, &asset, "r1").holder("h1").acquire().await;
    for to in [
        Status::AssetOnline,
        Status::VulnCheckDone,
        Status::HighRiskFound,
    ] {
        held.advance(to, &Patch::default()).await;
    }
    let err = held
        .try_advance(Status::Notifying, &Patch::default())
        .await
        .expect_err("WAIT is refused");
    let message = err.to_string();
    assert!(
        message.contains("'wait'") && message.contains("grant the ACL rules in docs/redis.md"),
        "{message}"
    );
    assert!(!message.contains("not convertible"), "{message}");
    assert_eq!(err.reason(), "RedisPermissionDenied");
    assert!(
        !err.is_unavailable(),
        "a refusal is not retried as an outage"
    );
}

/// The run's ticket as the store (through the sentinels) reads it.
async fn ticket_via_sentinels(
    store: &TicketStore,
    obj: &AssetScan,
) -> assetscan_operator::domain::ticket::Ticket {
    let run = obj.status.as_ref().unwrap().run.clone().unwrap();
    store
        .get_ticket(&asset_id(&obj.spec.asset_id), &run)
        .await
        .unwrap()
        .expect("ticket on the current master")
}
