use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_channel_defers_the_run_and_only_it_is_retried() {
    let env = Env::start("5s").await;
    env.stubs.sink.faults().always(Fault::Status(500));
    let mut req = request("A", &[XZ], Policy::default());
    req.channels = vec!["webhook".into(), "wecom".into()];
    let pipeline = env.pipeline().await;
    let outcome = pipeline
        .run(&req, &(), &CancellationToken::new())
        .await
        .unwrap();
    let Outcome::Deferred {
        ticket,
        retry_after,
    } = outcome
    else {
        panic!("expected Deferred, got {outcome:?}");
    };
    assert_eq!(ticket.status, Status::Notifying);
    assert_eq!(retry_after, Duration::from_millis(400), "maxBackoff");
    assert_eq!(
        ticket.attempts[&Step::Notify],
        3,
        "maxAttempts in this pass"
    );
    let error = ticket.last_error.as_ref().unwrap();
    assert!(error.message.contains("channel webhook"), "{error:?}");
    let notification = ticket.facts.notification.as_ref().unwrap();
    assert_eq!(notification.state, NotificationState::Sending);
    assert_eq!(
        notification.receipt.keys().collect::<Vec<_>>(),
        ["wecom"],
        "WeCom confirmed and is recorded"
    );
    assert_eq!(env.stubs.wecom.messages().len(), 1, "WeCom told once");
    assert_eq!(env.stubs.sink.total_calls(), 3);
    assert_eq!(env.store().await.watchdog().held(), 0);

    // The receiver recovers; the next pass sends to the webhook only.
    env.stubs.sink.faults().clear();
    let done = run_to_end(&pipeline, &req, &()).await;
    assert_eq!(done.status, Status::Finished);
    let notification = done.facts.notification.as_ref().unwrap();
    assert_eq!(notification.state, NotificationState::Sent);
    assert_eq!(
        notification.receipt.keys().collect::<Vec<_>>(),
        ["webhook", "wecom"]
    );
    assert_eq!(env.stubs.wecom.messages().len(), 1, "WeCom not told twice");
    assert_eq!(env.stubs.sink.effects(), 1);
    assert_eq!(
        done.attempts[&Step::Notify],
        4,
        "attempts add up across passes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_channel_error_fails_the_run() {
    let env = Env::start("5s").await;
    let mut req = request("A", &[XZ], Policy::default());
    req.channels = vec!["nope".into()];
    let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
    assert_eq!(ticket.status, Status::Failed);
    let error = ticket.last_error.as_ref().unwrap();
    assert_eq!((error.step, error.attempt), (Step::Notify, 1));
    assert!(
        error.message.contains("channel nope: not configured"),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_risk_without_channels_is_recorded_as_skipped() {
    let env = Env::start("5s").await;
    let mut req = request("A", &[XZ], Policy::default());
    req.channels.clear();
    let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
    assert_eq!(ticket.status, Status::Finished);
    let notification = ticket.facts.notification.as_ref().unwrap();
    assert_eq!(notification.state, NotificationState::Skipped);
    assert_eq!(notification.sent_at, None, "nobody was told");
    assert_eq!(env.stubs.sink.total_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_threat_intel_does_not_hide_a_cvss_high_risk() {
    let env = Env::start("5s").await;
    env.stubs.kev.faults().always(Fault::Status(500));
    let policy = Policy {
        threat_intel: ThreatIntelPolicy::Always,
        ..Policy::default()
    };
    let ticket = run_to_end(&env.pipeline().await, &request("A", &[XZ], policy), &()).await;
    assert_eq!(ticket.status, Status::Finished);
    assert!(ticket.facts.risk.as_ref().unwrap().high_risk);
    assert_eq!(ticket.facts.threat_intel, None);
    assert_eq!(env.stubs.sink.effects(), 1, "the alert went out");
    assert_eq!(
        env.stubs.kev.total_calls(),
        3,
        "intel was tried maxAttempts times"
    );
}
