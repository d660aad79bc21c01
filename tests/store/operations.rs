//! The store's operations on every Redis: a Cluster, corrupted tickets, outages, racers, round trips, facts and the earlier layout.

use super::*;

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
