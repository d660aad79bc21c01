//! The promise as numbers, on real operator processes against the emulator,
//! a real redis-server and the provider stubs: a confirmed high risk that
//! cannot be notified (its channel fails, or Redis is down) ages on
//! `assetscan_high_risk_unnotified_oldest_age_seconds` until it goes out,
//! then counts once in `assetscan_detection_to_notification_seconds`; a
//! replica stopped while it holds runs shows on the other replica's
//! `assetscan_overdue_oldest_age_seconds` until that one takes them over.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_testkit::stubs::Fault;
use controller_kit::*;
use k8s_openapi::api::events::v1::Event;
use nix::sys::signal::Signal;

const UNNOTIFIED: &str = "assetscan_high_risk_unnotified_oldest_age_seconds{shard=\"0\"}";
const OVERDUE: &str = "assetscan_overdue_oldest_age_seconds{shard=\"0\"}";
const NOTIFIED: &str =
    "assetscan_detection_to_notification_seconds_count{channel=\"secops-webhook\"}";
const NOTIFIED_SUM: &str =
    "assetscan_detection_to_notification_seconds_sum{channel=\"secops-webhook\"}";

/// The age, in seconds, past which the tests expect the gauge: what an
/// alert's threshold is to the gauge, in a test's time.
const THRESHOLD_SECS: f64 = 3.0;

/// `assetscan-operator run` as a process with its metrics on a port of its
/// own, with the config file `config`.
fn spawn_operator(h: &Harness, instance: &str, config: &std::path::Path) -> OperatorProcess {
    let port = free_port();
    h.operator(instance, config, |c| c.metrics_port(port))
}

/// The test config with `from` replaced by `to`, in a file of its own.
fn config_with(h: &Harness, from: &str, to: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&h.config_path).expect("config");
    let patched = text.replace(from, to);
    assert_ne!(patched, text, "the test config has {from}");
    let path = h
        .dir
        .path()
        .join(format!("config-{}.yaml", to.replace([' ', ':'], "")));
    std::fs::write(&path, patched).expect("write config");
    path
}

async fn scrape(op: &OperatorProcess) -> String {
    let (code, text) = op.get("/metrics").await.expect("/metrics answers");
    assert_eq!(code, 200, "{text}");
    text
}

/// Waits until `sample` on `op` satisfies `holds`; returns the scrape.
async fn wait_metric(
    op: &OperatorProcess,
    what: &str,
    sample: &str,
    holds: impl Fn(f64) -> bool,
) -> String {
    op.wait_for(what, PATIENCE, async || {
        // Not listening yet at the start: look again.
        let (_, text) = op.get("/metrics").await.ok()?;
        holds(metric(&text, sample)).then_some(text)
    })
    .await
}

/// After the notification went out: the gauge is back to 0, and the
/// histogram has the one observation, at least as long as the wait (which
/// the gauge counts from the whole second of the confirmation, as the
/// status records times: up to a second early).
async fn check_notified_once(h: &Harness, op: &OperatorProcess, name: &str, waited: f64) {
    let done = h.wait_terminal(name, PATIENCE).await;
    assert_eq!(status(&done).phase, Some(Status::Finished));
    assert_eq!(status(&done).high_risk, Some(true));
    let text = wait_metric(op, "the gauge back to 0", UNNOTIFIED, |v| v == 0.0).await;
    assert_eq!(metric(&text, NOTIFIED), 1.0, "{text}");
    let latency = metric(&text, NOTIFIED_SUM);
    assert!(
        latency > waited - 1.0,
        "{latency} s < the {waited} s waited"
    );
    assert_eq!(h.stubs.sink.effects(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_risk_whose_channel_fails_ages_until_it_goes_out() {
    let h = Harness::start().await;
    h.stubs.sink.faults().always(Fault::Status(503));
    let op = spawn_operator(&h, "promise-hook", &h.config_path);
    h.create(&h.online(scan("risky").high_risk())).await;
    let text = wait_metric(&op, "the high risk aged", UNNOTIFIED, |v| {
        v > THRESHOLD_SECS
    })
    .await;
    assert_eq!(metric(&text, NOTIFIED), 0.0, "{text}");
    assert!(
        metric(
            &text,
            "assetscan_reconciles_total{result=\"notify_deferred\"}"
        ) >= 1.0,
        "the channel failed: {text}"
    );
    let waited = metric(&text, UNNOTIFIED);
    h.stubs.sink.faults().clear();
    check_notified_once(&h, &op, "risky", waited).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_risk_held_up_by_redis_ages_until_it_goes_out() {
    let mut h = Harness::start_with(Options { appendonly: true }).await;
    // Progress is written rarely, as in production; the channel's answer
    // is held until Redis is down, so that the run waits where a high risk
    // is confirmed and not notified.
    let config = config_with(&h, "progressEvery: 0s", "progressEvery: 1h");
    h.stubs.sink.faults().hold();
    let op = spawn_operator(&h, "promise-redis", &config);
    h.create(&h.online(scan("held").high_risk())).await;
    wait_metric(&op, "the high risk confirmed", UNNOTIFIED, |v| v > 0.0).await;
    // A confirmed risk is in the status at once, whatever the progress
    // interval: the first call to the channel is still waiting.
    let confirmed = h.api().get("held").await.expect("get");
    assert_eq!(phase(&confirmed), Some(Status::HighRiskFound));
    h.redis.stop();
    h.stubs.sink.faults().release();
    let down = metric(&scrape(&op).await, UNNOTIFIED);
    wait_metric(&op, "the high risk aged with Redis down", UNNOTIFIED, |v| {
        v > down + THRESHOLD_SECS
    })
    .await;
    // Redis is the cause: the channel answers, the object says Redis.
    let stalled = h
        .wait("held", "stalled on Redis", PATIENCE, |o| {
            has_condition(o, ConditionType::Stalled, "True", "RedisUnavailable")
        })
        .await;
    assert!(
        matches!(
            phase(&stalled),
            Some(Status::HighRiskFound | Status::Notifying)
        ),
        "{:?}",
        stalled.status
    );
    let failures = "assetscan_reconcile_failures_total{reason=\"RedisUnavailable\"}";
    let text = wait_metric(&op, "several failed reconciles", failures, |v| v >= 3.0).await;
    assert_eq!(metric(&text, NOTIFIED), 0.0, "{text}");
    // The streak of failures is said on the object once.
    let events = reconcile_failures(&h, "held").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event.action.as_deref(), Some("RedisUnavailable"));
    assert!(event.series.is_none(), "published once: {event:#?}");
    assert!(
        event.note.as_deref().is_some_and(|n| n.contains("redis")),
        "{event:#?}"
    );

    let waited = metric(&scrape(&op).await, UNNOTIFIED);
    h.redis.restart().expect("redis restarts");
    check_notified_once(&h, &op, "held", waited).await;
}

/// The `ReconcileFailed` Events about `name`.
async fn reconcile_failures(h: &Harness, name: &str) -> Vec<Event> {
    (events_about(&h.client, NAMESPACE, name).await.into_iter())
        .filter(|e| e.reason.as_deref() == Some("ReconcileFailed"))
        .collect()
}

/// Two replicas without sharding (both watch every object). Replica A holds
/// two runs (their online checks wait for the inventory) and is stopped
/// (SIGSTOP): replica B finds their locks held; once A's heartbeat lapsed
/// (`membershipTtl`, 1 s here) its overdue gauge rises, until the locks
/// expire (6 s) and it takes the runs over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_replicas_runs_are_overdue_on_the_other_until_taken_over() {
    let h = Harness::start().await;
    // A lock ttl long enough for the gauge to be seen rising.
    let config = config_with(&h, &format!("ttl: {LOCK_TTL_MS}ms"), "ttl: 6s");

    h.stubs.inventory.faults().hold();
    let a = spawn_operator(&h, "promise-a", &config);
    let names = ["held-1", "held-2"];
    for name in names {
        h.create(&h.online(scan(name))).await;
    }
    wait_metric(&a, "A holds both runs", "assetscan_locks_held", |v| {
        v == 2.0
    })
    .await;
    let mut tokens = Vec::new();
    for name in names {
        let claimed = h
            .wait(name, "A's claim recorded", PATIENCE, |o| {
                o.status.as_ref().is_some_and(|s| s.fencing_token.is_some())
            })
            .await;
        tokens.push(status(&claimed).fencing_token.unwrap_or_default());
    }
    a.signal(Signal::SIGSTOP);
    a.wait_stopped(PATIENCE).await;
    h.stubs.inventory.faults().release();

    let b = spawn_operator(&h, "promise-b", &config);
    let rising = wait_metric(&b, "overdue on B", OVERDUE, |v| v > 0.0).await;
    let first = metric(&rising, OVERDUE);
    wait_metric(&b, "the overdue age rising", OVERDUE, |v| v >= first + 1.0).await;
    for (name, token) in names.into_iter().zip(tokens) {
        let done = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(status(&done).phase, Some(Status::Finished));
        assert!(
            status(&done).fencing_token > Some(token),
            "taken over from token {token}: {:#?}\n{}",
            done.status,
            b.log()
        );
    }
    wait_metric(&b, "nothing overdue after the takeover", OVERDUE, |v| {
        v == 0.0
    })
    .await;
    assert!(a.is_stopped(), "A stayed stopped throughout");
}
