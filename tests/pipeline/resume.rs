use super::*;

type CrashPoint = (&'static str, fn(&Ticket) -> bool);

/// After every status the run can be at, in turn.
const CRASH_POINTS: &[CrashPoint] = &[
    ("INIT (claimed)", |t| t.status == Status::Init),
    ("ASSET_ONLINE", |t| t.status == Status::AssetOnline),
    // Threat intel is recorded with the verdict (HIGH_RISK_FOUND): no
    // status lies between them.
    ("VULN_CHECK_DONE (vulnerabilities)", |t| {
        t.status == Status::VulnCheckDone && !t.has_completed(Step::ThreatIntel)
    }),
    ("HIGH_RISK_FOUND", |t| t.status == Status::HighRiskFound),
    ("NOTIFYING", |t| t.status == Status::Notifying),
    ("NOTIFIED", |t| t.status == Status::Notified),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_each_status_is_resumed_without_repeating_a_confirmed_step() {
    for (name, at) in CRASH_POINTS {
        // glibc: CVSS 7.8 < 9.0, so threat intel runs; KEV lists
        // CVE-2023-4911, so the asset is high risk: every status is visited.
        let env = Env::start(LINGERING_TTL).await;
        let policy = policy(ThreatIntelPolicy::WhenNeeded, 9.0);
        // Built before the crash: building providers takes longer than
        // the lock's ttl on a loaded machine.
        let b = env.pipeline().await;
        let crashed = crash_at(&env, request("A", &[GLIBC], policy), *at).await;
        assert!(at(&crashed), "{name}");

        let req = request("B", &[GLIBC], policy);
        // The crashed runner did not release: its lock holds until the ttl.
        match b.run(&req, &(), &CancellationToken::new()).await.unwrap() {
            Outcome::Locked { holder, .. } => assert_eq!(holder, "A", "{name}"),
            other => panic!("{name}: expected Locked, got {other:?}"),
        }
        env.expire_lock().await;
        let done = run_to_end(&b, &req, &()).await;

        assert_eq!(done.status, Status::Finished, "{name}");
        assert!(done.fencing_token > crashed.fencing_token, "{name}");
        assert_eq!(done.holder.as_deref(), Some("B"), "{name}");
        assert_eq!(
            done.completed_steps,
            [
                Step::OnlineCheck,
                Step::VulnQuery,
                Step::ThreatIntel,
                Step::Notify
            ],
            "{name}"
        );
        assert_eq!(
            done.attempts,
            BTreeMap::from([
                (Step::OnlineCheck, 1),
                (Step::VulnQuery, 1),
                (Step::ThreatIntel, 1),
                (Step::Notify, 1)
            ]),
            "{name}"
        );
        let risk = done.facts.risk.as_ref().unwrap();
        assert!(risk.high_risk, "{name}");
        assert!(
            risk.reasons[0].contains("CVE-2023-4911 is listed as known exploited"),
            "{name}: {risk:?}"
        );
        // Every provider was called once over both runners: nothing
        // confirmed was done again (fresh providers, so no cache hides it).
        assert_eq!(
            env.counters(),
            Counters {
                inventory: 1,
                querybatch: 1,
                records: 1,
                kev: 1,
                epss: 1,
                deliveries: 1,
                effects: 1,
            },
            "{name}"
        );
        // Each transition was written once, A's part then B's (threat
        // intel is recorded with the verdict it leads to).
        let store = env.store().await;
        assert_eq!(path(&store).await, transitions(&HIGH_RISK), "{name}");
        let audit = store.audit(&asset(), 1000).await.unwrap();
        let acquirers: Vec<&str> = audit
            .iter()
            .filter(|e| e.op() == "acquire")
            .filter_map(|e| e.get("holder"))
            .collect();
        assert_eq!(acquirers, ["A", "B"], "{name}");
        assert!(audit.iter().all(|e| e.accepted()), "{name}: {audit:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_at_notifying_resends_under_the_same_idempotency_key() {
    let env = Env::start(LINGERING_TTL).await;
    let a_ticket = super::dies_after_delivery(&env, request("A", &[XZ], Policy::default())).await;
    assert_eq!(a_ticket.status, Status::Notifying);
    let sending = a_ticket.facts.notification.as_ref().unwrap();
    assert_eq!(sending.state, NotificationState::Sending);
    assert_eq!(sending.idempotency_key, "web-01/r1");
    assert_eq!(env.stubs.sink.deliveries().len(), 1);

    env.expire_lock().await;
    let b = env.pipeline().await;
    let done = run_to_end(&b, &request("B", &[XZ], Policy::default()), &()).await;
    assert_eq!(done.status, Status::Finished);
    assert!(done.fencing_token > a_ticket.fencing_token);
    assert_eq!(
        done.facts.notification.as_ref().unwrap().state,
        NotificationState::Sent
    );

    // At least once on the wire, once in effect: two raw deliveries, one
    // key, the same message, each under its sender's token.
    let deliveries = env.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 2);
    assert_eq!(env.stubs.sink.effects(), 1);
    assert!(deliveries[0].new_effect && !deliveries[1].new_effect);
    for d in &deliveries {
        assert_eq!(d.header("Idempotency-Key"), Some("web-01/r1"));
    }
    let tokens: Vec<String> = deliveries
        .iter()
        .map(|d| d.header("X-AssetScan-Fencing-Token").unwrap().to_owned())
        .collect();
    assert_eq!(
        tokens,
        [
            a_ticket.fencing_token.to_string(),
            done.fencing_token.to_string()
        ]
    );
    let strip = |d: &assetscan_testkit::stubs::Delivery| {
        let mut body = d.json();
        body["fencing_token"] = serde_json::Value::Null;
        body
    };
    assert_eq!(strip(&deliveries[0]), strip(&deliveries[1]));
    // Nothing before the notification was done again.
    let c = env.counters();
    assert_eq!((c.inventory, c.querybatch, c.records), (1, 1, 1));

    // NOTIFIED and FINISHED were written by B's token, once.
    let audit = env.store().await.audit(&asset(), 1000).await.unwrap();
    let notified: Vec<_> = audit
        .iter()
        .filter(|e| e.op() == "advance" && e.get("to") == Some("NOTIFIED"))
        .collect();
    assert_eq!(notified.len(), 1);
    assert_eq!(notified[0].token(), Some(done.fencing_token));
    assert!(notified[0].accepted());
}
