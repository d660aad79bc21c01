//! Replicas side by side: every asset processed once in effect, a replacement under the same instance name.

use super::*;

/// Two controllers at once on the same objects: every asset is scanned
/// to the end, each high-risk asset has one notification effect, and no
/// object's status ever goes backwards in (fencingToken, revision).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_process_every_asset_once_in_effect() {
    let h = Harness::start().await;
    // Vulnerability queries are held: every run stays in flight, its lock
    // taken, until both replicas have met at a lock.
    h.stubs.osv.faults().hold();
    let scans: Vec<_> = (0..6)
        .map(|i| {
            let host = scan(&format!("host-{i:02}"));
            h.online(if i % 2 == 0 { host.high_risk() } else { host })
        })
        .collect();
    let a = h.controller("replica-a").await;
    let b = h.controller("replica-b").await;
    for scan in &scans {
        h.create(scan).await;
    }
    let contention = || {
        a.counter("assetscan_lock_contention_total") + b.counter("assetscan_lock_contention_total")
    };
    until("the replicas met at a lock", PATIENCE, async || {
        contention() >= 1.0
    })
    .await;
    h.stubs.osv.faults().release();
    let mut high_risk_keys = BTreeSet::new();
    for scan in &scans {
        let obj = h.wait_terminal(&scan.name_any(), PATIENCE).await;
        let s = obj.status.as_ref().unwrap();
        assert_eq!(s.phase, Some(Status::Finished), "{}", obj.name_any());
        h.mirrored_ticket(&obj).await;
        if s.high_risk == Some(true) {
            assert_eq!(
                s.notification.as_ref().map(|n| n.state),
                Some(NotificationState::Sent)
            );
            high_risk_keys.insert(s.ticket_id.clone().unwrap());
        } else {
            assert_eq!(s.notification, None);
        }
        // Never backwards, whoever wrote.
        let writes = h.status_writes(&obj.name_any());
        for pair in writes.windows(2) {
            assert!(
                fence(&pair[1]) >= fence(&pair[0]),
                "{}: {:?} -> {:?}",
                obj.name_any(),
                fence(&pair[0]),
                fence(&pair[1])
            );
        }
        assert_eq!(
            writes.last().unwrap(),
            &serde_json::to_value(s).unwrap(),
            "{}: the last write is the stored status",
            obj.name_any()
        );
    }
    assert_eq!(high_risk_keys.len(), 3);
    assert_eq!(
        h.delivered_keys(),
        high_risk_keys,
        "one key per high-risk asset"
    );
    assert_eq!(h.stubs.sink.effects(), 3);

    // Both replicas reconciled the objects (which of them ran which asset
    // is up to the race).
    assert!(a.reconciles() >= 1.0 && b.reconciles() >= 1.0);
    // Every acquisition of every asset is in the audit: no two holders of
    // one asset ever overlapped in a claim of the same token.
    let store = h.store().await;
    for scan in &scans {
        let asset = asset_id(&scan.spec.asset_id);
        let tokens: Vec<u64> = store
            .audit(&asset, 1000)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.op() == "acquire" && e.accepted())
            .filter_map(|e| e.token())
            .collect();
        let mut sorted = tokens.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            tokens,
            sorted,
            "{}: tokens drawn in order, never twice",
            scan.name_any()
        );
    }
    a.stop().await;
    b.stop().await;
}

/// Lock holder ids are unique per process (`<instance>#<random>:…`): a
/// replacement started with the same instance name (the same pod name)
/// while the old process still runs cannot re-enter the old process's lock.
/// It finds the asset locked, and takes the run over only after the old
/// process let go, under a holder id of its own and a greater token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_with_the_same_instance_name_cannot_enter_the_old_lock() {
    let mut h = Harness::start().await;
    // No membership: the replacement reconciles the object whichever
    // replica it prefers; the lock alone keeps the two apart.
    h.config.scan_starts.membership_ttl = Duration::ZERO;
    let name = "same-name-01";
    // The old process's run stays in the (held) vulnerability query,
    // holding the asset's lock.
    let held = Held::VulnerabilityQuery;
    let (old, online) = h.high_risk_held("assetscan-0", name, held).await;
    let id = asset_id(&online.spec.asset_id);
    let store = h.store().await;
    let claims = async || -> Vec<(String, u64)> {
        store
            .audit(&id, 1000)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.op() == "acquire" && e.accepted())
            .map(|e| (e.get("holder").unwrap().to_owned(), e.token().unwrap()))
            .collect()
    };
    let first = claims().await;
    assert_eq!(first.len(), 1, "{first:?}");
    let (old_holder, old_token) = first[0].clone();

    // The replacement, same instance name, while the old process runs.
    let new = h.controller("assetscan-0").await;
    until(
        "the replacement found the asset locked",
        PATIENCE,
        async || new.counter("assetscan_lock_contention_total") >= 1.0,
    )
    .await;
    assert_eq!(
        claims().await,
        first,
        "no second acquire while the old process holds the lock"
    );
    let lock = get(&h.redis, &store.keys(&id).lock());
    assert_eq!(lock.as_deref(), Some(old_holder.as_str()));

    // The old process stops (its run releases the lock): the replacement
    // takes the run over.
    h.stubs.osv.faults().release();
    let old_contention = old.counter("assetscan_lock_contention_total");
    old.stop().await;
    let done = h.wait_terminal(name, PATIENCE).await;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Status::Finished));

    let audit = store.audit(&id, 1000).await.unwrap();
    let holders: BTreeSet<String> = claims()
        .await
        .into_iter()
        .map(|(holder, _)| holder)
        .collect();
    assert_eq!(holders.len(), 2, "two holder ids: {holders:?}");
    for holder in &holders {
        assert_holder_id(holder, "assetscan-0", name);
    }
    // Replaying the audit: every claim found the lock free (or its own),
    // every release was by the holder.
    let mut holding: Option<&str> = None;
    for e in &audit {
        match (e.op(), e.accepted()) {
            ("acquire", true) if !matches!(e.get("status"), Some("FINISHED" | "FAILED")) => {
                let holder = e.get("holder").unwrap();
                assert!(
                    holding.is_none_or(|h| h == holder),
                    "{holder} acquired while {holding:?} held the lock: {audit:#?}"
                );
                holding = Some(holder);
            }
            ("release", true) => {
                assert_eq!(holding, e.get("holder"), "{audit:#?}");
                holding = None;
            }
            _ => {}
        }
    }
    let new_claims: Vec<u64> = claims()
        .await
        .into_iter()
        .filter(|(holder, _)| *holder != old_holder)
        .map(|(_, t)| t)
        .collect();
    assert!(
        !new_claims.is_empty() && new_claims.iter().all(|t| *t > old_token),
        "the replacement's tokens {new_claims:?} follow {old_token}"
    );
    assert_eq!(
        done.status.as_ref().unwrap().fencing_token,
        new_claims.last().map(|t| *t as i64)
    );
    assert_eq!(old_contention, 0.0, "the old process never waited");
    assert_eq!(h.stubs.sink.effects(), 1, "one notification effect");
    check_status_history(&h, name, &done);
    new.stop().await;
}
