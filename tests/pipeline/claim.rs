use super::*;

struct RefusesClaims;

impl Observer for RefusesClaims {
    async fn on_ticket(&self, _ticket: &Ticket) {}

    async fn record_claim(&self, _ticket: &Ticket) -> ClaimRecord {
        ClaimRecord::Refused
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_claim_stops_the_run_before_any_provider_call() {
    let env = Env::start("5s").await;
    let (pipeline, own) = env.pipeline_and_store().await;
    let req = request("A", &[XZ], Policy::default());
    let outcome = pipeline
        .run(&req, &RefusesClaims, &CancellationToken::new())
        .await
        .unwrap();
    let Outcome::ClaimUnrecorded(ticket) = outcome else {
        panic!("expected ClaimUnrecorded, got {outcome:?}");
    };
    assert_eq!(ticket.status, Status::Init);
    let c = env.counters();
    assert_eq!(
        (c.inventory, c.querybatch, c.deliveries),
        (0, 0, 0),
        "no provider call"
    );
    assert_eq!(own.watchdog().held(), 0);
    // The lock was released: another runner gets in at once.
    let done = run_to_end(&pipeline, &request("B", &[XZ], Policy::default()), &()).await;
    assert_eq!(done.status, Status::Finished);
    assert!(done.fencing_token > ticket.fencing_token);
}

/// A caller that has seen the run open (the operator) claims without
/// reading the ticket first: the same run in one round trip fewer. Once
/// the run has ended, that claim answers with the ticket as found; it
/// takes no lock, writes nothing, and the observer is shown the ticket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_seen_open_is_claimed_without_a_read_and_the_claim_answers_once_it_ended() {
    // A ttl far longer than the test: no renewal falls in a count.
    let env = Env::start("60s").await;
    let (pipeline, own) = env.pipeline_and_store().await;
    let trips = || own.round_trips();
    let unread = |run: &str| ScanRequest {
        run: run.into(),
        expect_open: true,
        ..request("A", &[XZ], Policy::default())
    };

    // The first run loads the scripts into Redis: not counted.
    let read = |run: &str| ScanRequest {
        run: run.into(),
        ..request("A", &[XZ], Policy::default())
    };
    run_to_end(&pipeline, &read("r0"), &()).await;
    let before = trips();
    let read_first = run_to_end(&pipeline, &read("r1"), &()).await;
    let with_read = trips() - before;
    let before = trips();
    let claimed_at_once = run_to_end(&pipeline, &unread("r2"), &()).await;
    let without_read = trips() - before;
    assert_eq!(read_first.status, Status::Finished);
    assert_eq!(claimed_at_once.status, Status::Finished);
    assert_eq!(without_read + 1, with_read);
    assert_eq!(
        env.stubs.sink.deliveries().len(),
        3,
        "each run notified once"
    );

    let store = env.store().await;
    let audit = store.audit(&asset(), 1000).await.unwrap();
    let recorder = Recorder::default();
    let before = trips();
    let outcome = pipeline
        .run(&unread("r2"), &recorder, &CancellationToken::new())
        .await
        .unwrap();
    let Outcome::Terminal(again) = outcome else {
        panic!("expected Terminal, got {outcome:?}");
    };
    assert_eq!(again, claimed_at_once);
    assert_eq!(trips() - before, 1, "the claim alone");
    assert_eq!(
        store.audit(&asset(), 1000).await.unwrap(),
        audit,
        "nothing written"
    );
    let holder: Option<String> = env
        .redis
        .query(redis::cmd("GET").arg(store.keys(&asset()).lock()))
        .unwrap();
    assert_eq!(holder, None, "no lock taken");
    assert_eq!(own.watchdog().held(), 0);
    let seen: Vec<Ticket> = recorder.tickets().into_iter().map(|(_, t)| t).collect();
    assert_eq!(seen, [claimed_at_once]);
}
