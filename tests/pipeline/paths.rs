use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_asset_finishes_without_a_vulnerability_query() {
    let env = Env::start("5s").await;
    env.stubs.inventory.set_online(ASSET, false);
    let req = request("A", &[XZ], Policy::default());
    let recorder = Recorder::default();
    let ticket = run_to_end(&env.pipeline().await, &req, &recorder).await;

    assert_eq!(ticket.status, Status::Finished);
    assert_eq!(ticket.facts.online, Some(false));
    assert_eq!(ticket.completed_steps, [Step::OnlineCheck]);
    assert_eq!(ticket.facts.vulnerabilities, None);
    assert_eq!(
        env.counters(),
        Counters {
            inventory: 1,
            ..Counters::default()
        }
    );
    let store = env.store().await;
    assert_eq!(path(&store).await, transitions(&OFFLINE));
    let statuses: Vec<Status> = recorder.tickets().iter().map(|(_, t)| t.status).collect();
    assert_eq!(
        statuses,
        [Status::Init, Status::AssetOffline, Status::Finished]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_online_asset_without_high_risk_finishes_without_notifying() {
    let env = Env::start("5s").await;
    // CVSS 4.4, not in KEV, no EPSS score: intel is asked and finds nothing.
    let req = request("A", &[URLLIB3], Policy::default());
    let ticket = run_to_end(&env.pipeline().await, &req, &()).await;

    assert_eq!(ticket.status, Status::Finished);
    assert_eq!(ticket.facts.online, Some(true));
    let vulns = ticket.facts.vulnerabilities.as_ref().unwrap();
    assert_eq!(vulns.total, 1);
    assert_eq!(vulns.max_cvss, Some(4.4));
    assert_eq!(
        ticket.facts.risk,
        Some(RiskFacts {
            high_risk: false,
            reasons: vec![],
            confirmed_at: None,
        })
    );
    assert_eq!(ticket.facts.notification, None);
    assert_eq!(ticket.last_error, None);
    let c = env.counters();
    assert_eq!((c.deliveries, c.effects), (0, 0), "nobody is told");
    assert_eq!((c.inventory, c.querybatch, c.records), (1, 1, 1));
    let clean = [Status::AssetOnline, Status::VulnCheckDone, Status::Finished];
    assert_eq!(path(&env.store().await).await, transitions(&clean));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_risk_is_notified_exactly_once_then_finished() {
    let env = Env::start("5s").await;
    let req = request("A", &[XZ], Policy::default());
    let ticket = run_to_end(&env.pipeline().await, &req, &()).await;

    assert_eq!(ticket.status, Status::Finished);
    let risk = ticket.facts.risk.as_ref().unwrap();
    assert!(risk.high_risk);
    assert_eq!(
        risk.reasons,
        ["UBUNTU-CVE-2024-3094 (CVE-2024-3094) CVSS 10.0 >= 7.0"]
    );
    let notification = ticket.facts.notification.as_ref().unwrap();
    assert_eq!(notification.idempotency_key, "web-01/r1");
    assert_eq!(notification.state, NotificationState::Sent);
    assert!(notification.sent_at.is_some());
    assert!(notification.receipt["webhook"].starts_with("HTTP 200"));
    assert_eq!(
        ticket.completed_steps,
        [Step::OnlineCheck, Step::VulnQuery, Step::Notify]
    );

    let deliveries = env.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(env.stubs.sink.effects(), 1);
    assert_eq!(env.stubs.sink.rejected(), 0, "signed and keyed");
    let d = &deliveries[0];
    assert_eq!(d.header("Idempotency-Key"), Some("web-01/r1"));
    let token = ticket.fencing_token.to_string();
    assert_eq!(d.header("X-AssetScan-Fencing-Token"), Some(token.as_str()));
    assert_eq!(d.json()["ticket_id"], "web-01/r1");
    assert_eq!(d.json()["risk"]["high_risk"], true);
    // CVSS alone decides: no threat intel.
    assert_eq!((env.counters().kev, env.counters().epss), (0, 0));

    assert_eq!(path(&env.store().await).await, transitions(&HIGH_RISK));
    // One acquire, one release, nothing rejected.
    let audit = env.store().await.audit(&asset(), 1000).await.unwrap();
    assert!(audit.iter().all(|e| e.accepted()), "{audit:#?}");
    let ops: Vec<&str> = audit.iter().map(|e| e.op()).collect();
    assert_eq!(ops.first(), Some(&"acquire"));
    assert_eq!(ops.last(), Some(&"release"));
}
