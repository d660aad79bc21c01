use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_frozen_past_its_ttl_makes_no_provider_call_when_it_wakes() {
    let env = Env::start("400ms").await;
    let waiting = Arc::new(tokio::sync::Notify::new());
    let (reply, reply_rx) = tokio::sync::oneshot::channel();
    let (thaw, thaw_rx) = std::sync::mpsc::channel();
    // A runs in a process of its own: its own thread and runtime.
    let a = {
        let (config, url, waiting) = (env.config.clone(), env.redis.url(), Arc::clone(&waiting));
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let store = TicketStore::connect(&RedisTarget::Standalone(url), config.store())
                    .await
                    .unwrap();
                let effects = Twisted {
                    inner: Providers::from_config(&config.providers).unwrap(),
                    twist: Twist::FreezesMidStep(Freeze {
                        waiting,
                        reply: Mutex::new(Some(reply_rx)),
                        thaw: Mutex::new(Some(thaw_rx)),
                    }),
                };
                // The step's own timeout is not what stops A here.
                let mut steps = config.steps.clone();
                steps.vuln_query.timeout = Duration::from_secs(600);
                let pipeline = Pipeline::new(store, effects, steps);
                let req = request("A", &[XZ], Policy::default());
                let outcome = pipeline.run(&req, &(), &CancellationToken::new()).await;
                format!("{:?}", outcome.unwrap())
            })
        })
    };
    tokio::time::timeout(Duration::from_secs(5), waiting.notified())
        .await
        .expect("A reaches its second round trip");

    // A's lock expires unrenewed (Redis' own ttl: A's frozen clock is the
    // point); B takes the run over and finishes it.
    let b = env.pipeline().await;
    let done = run_to_end(&b, &request("B", &[XZ], Policy::default()), &()).await;
    assert_eq!(done.status, Status::Finished);
    let before = env.counters();
    assert_eq!((before.deliveries, before.effects), (1, 1));
    // The reply A waits for arrives while A is still frozen; then A
    // wakes up.
    reply.send(()).unwrap();
    thaw.send(()).unwrap();

    let outcome = tokio::task::spawn_blocking(move || a.join().unwrap())
        .await
        .unwrap();
    assert!(
        outcome.starts_with("LockLost") || outcome.starts_with("Superseded"),
        "{outcome}"
    );
    // Awake, A sent nothing more to any provider, and wrote nothing.
    assert_eq!(env.counters(), before, "A's outcome: {outcome}");
    let store = env.store().await;
    assert_eq!(store.get_ticket(&asset(), RUN).await.unwrap(), Some(done));
}
