//! `assetscan-operator run` as a real process, configured as in a cluster
//! (`KUBECONFIG`, `--config`, `--redis-url`, `--metrics-addr`), against the
//! emulator, a real redis-server and the provider stubs: `/healthz`,
//! `/readyz` (503 while Redis is down) and `/metrics` (reconciles, lock
//! contention, stale writes, watchdog, notifications), and a clean SIGTERM.

mod controller_kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::Status;
use assetscan_testkit::process::OperatorCommand;
use controller_kit::*;
use kube::api::{Patch, PatchParams};
use redis::AsyncCommands;
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

struct Operator {
    child: Child,
    log: std::path::PathBuf,
}

impl Operator {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_http(url: &str, want: u16, timeout: Duration, op: &Operator) -> String {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok((code, body)) = http_get(url, &[]).await
            && code == want
        {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{url} never answered {want}; operator log:\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `assetscan-operator run` as a process against the harness, configured as
/// in a cluster, its stderr kept in the harness's directory.
fn spawn_operator(h: &Harness, port: u16, instance: &str) -> Operator {
    let kubeconfig = h.dir.path().join("kubeconfig");
    h.emu.write_kubeconfig(&kubeconfig).unwrap();
    let log = h.dir.path().join("operator.log");
    let url = h.redis.url();
    let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
    let child = OperatorCommand::new(
        binary,
        &h.config_path,
        &url,
        &kubeconfig,
        instance,
        NAMESPACE,
    )
    .metrics_port(port)
    .command(&log)
    .unwrap()
    .spawn()
    .expect("operator starts");
    Operator { child, log }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_process_serves_probes_and_metrics() {
    let mut h = Harness::start().await;
    let port = free_port();
    let op = spawn_operator(&h, port, "proc-a");
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    assert_eq!(
        wait_http(&url("/healthz"), 200, Duration::from_secs(20), &op).await,
        "ok"
    );
    wait_http(&url("/readyz"), 200, Duration::from_secs(10), &op).await;

    // Another holder has one asset locked until the operator met it.
    let locked = "proc-locked.dc1.example.com";
    let store = h.store().await;
    let lock_key = store.keys(&AssetId::new(locked).unwrap()).lock();
    let mut raw = redis::Client::open(h.redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&lock_key)
        .arg("someone-else:default/other")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut raw)
        .await
        .unwrap();
    // Vulnerability answers are held: the runs keep their locks until the
    // watchdog renewed them.
    h.stubs.osv.faults().hold();
    for (name, asset) in [
        ("proc-01", "proc-01.dc1.example.com"),
        ("proc-locked", locked),
    ] {
        h.stubs.inventory.set_online(asset, true);
        h.create(&scan(name, asset, true)).await;
    }
    let metrics = async || http_get(&url("/metrics"), &[]).await.unwrap().1;
    until("a renewal and a locked asset", PATIENCE, async || {
        let text = metrics().await;
        metric(&text, "assetscan_watchdog_renewals") >= 1.0
            && metric(&text, "assetscan_lock_contention_total") >= 1.0
    })
    .await;
    h.stubs.osv.faults().release();
    // The other holder's lock expires (forced); a watch event makes the
    // operator look again now rather than at the lock's remaining ttl.
    let _: i64 = raw.del(&lock_key).await.unwrap();
    h.poke("proc-locked").await;
    let done = h.wait_terminal("proc-01", PATIENCE).await;
    h.wait_terminal("proc-locked", PATIENCE).await;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Status::Finished));
    assert_eq!(h.stubs.sink.effects(), 2);
    // Released by the run, not left to expire: the audit stream records the
    // release by the run's holder (it follows the FINISHED status).
    let proc_01 = AssetId::new("proc-01.dc1.example.com").unwrap();
    until("the run released its lock", PATIENCE, async || {
        let audit = store.audit(&proc_01, 1000).await.unwrap();
        let holder = audit
            .iter()
            .rfind(|e| e.op() == "acquire" && e.accepted())
            .and_then(|e| e.get("holder").map(str::to_owned));
        audit.last().is_some_and(|e| {
            e.op() == "release" && e.accepted() && e.get("holder").map(str::to_owned) == holder
        })
    })
    .await;
    let holder: Option<String> = raw.get(store.keys(&proc_01).lock()).await.unwrap();
    assert_eq!(holder, None, "released");

    // A newer executor's claim is in the status: the operator's older
    // ticket is not written over it, and the refusal is counted.
    let token = done.status.as_ref().unwrap().fencing_token.unwrap();
    h.api()
        .patch_status(
            "proc-01",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"fencingToken": token + 5, "revision": 1, "phase": "INIT"}}),
            ),
        )
        .await
        .unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let text = loop {
        let (code, text) = http_get(&url("/metrics"), &[]).await.unwrap();
        assert_eq!(code, 200);
        if metric(&text, "assetscan_stale_writes_rejected_total") >= 1.0 {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no stale write counted:\n{text}\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for (sample, at_least) in [
        ("assetscan_reconciles_total{result=\"finished\"}", 2.0),
        ("assetscan_reconciles_total{result=\"locked\"}", 1.0),
        ("assetscan_lock_contention_total", 1.0),
        ("assetscan_stale_writes_rejected_total", 1.0),
        ("assetscan_watchdog_renewals", 1.0),
        (
            "assetscan_notifications_sent_total{channel=\"secops-webhook\"}",
            2.0,
        ),
        (
            "assetscan_step_duration_seconds_count{step=\"vuln_query\"}",
            2.0,
        ),
    ] {
        assert!(
            metric(&text, sample) >= at_least,
            "{sample} >= {at_least}:\n{text}"
        );
    }
    assert_eq!(metric(&text, "assetscan_locks_held"), 0.0);
    assert_eq!(metric(&text, "assetscan_watchdog_losses"), 0.0);
    assert!(
        text.contains("# TYPE assetscan_reconciles counter"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"), "OpenMetrics text");

    // Redis down: not ready (but alive); back: ready at the first probe.
    h.redis.stop();
    let (code, body) = http_get(&url("/readyz"), &[]).await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("redis"), "{body}");
    assert_eq!(http_get(&url("/healthz"), &[]).await.unwrap().0, 200);
    // The scenario, not a wait for a result: the outage outlasts the Redis
    // client's own reconnect attempts (three, at most 2 s apart, each
    // refused at once by the closed port), so that the client has given up
    // when Redis returns and the probe itself must bring the connection
    // back.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(http_get(&url("/readyz"), &[]).await.unwrap().0, 503);
    h.redis.restart().unwrap();
    // Ready again once the connection's backoff between failed attempts
    // (at most 5 s) lets the next probe reconnect.
    wait_http(&url("/readyz"), 200, Duration::from_secs(10), &op).await;

    // SIGTERM: a clean shutdown.
    let mut op = op;
    let status = Command::new("kill")
        .args(["-TERM", &op.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(exit) = op.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit after SIGTERM:\n{}",
            op.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(exit.success(), "{exit:?}\n{}", op.log());
}

/// A replica started while Redis is unreachable waits for it, as it does
/// when Redis goes away later, instead of exiting; once Redis answers it
/// becomes ready and scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_process_started_before_redis_waits_for_it() {
    let mut h = Harness::start().await;
    h.redis.stop();
    let port = free_port();
    let mut op = spawn_operator(&h, port, "proc-early");
    until(
        "the operator said it waits for redis",
        PATIENCE,
        async || op.log().contains("redis unreachable at start"),
    )
    .await;
    assert!(
        op.child.try_wait().unwrap().is_none(),
        "the operator exited while Redis was down:\n{}",
        op.log()
    );
    h.redis.restart().unwrap();
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    wait_http(&url("/readyz"), 200, PATIENCE, &op).await;
    let asset = "proc-early.dc1.example.com";
    h.stubs.inventory.set_online(asset, true);
    h.create(&scan("proc-early", asset, false)).await;
    let done = h.wait_terminal("proc-early", PATIENCE).await;
    assert_eq!(done.status.as_ref().unwrap().phase, Some(Status::Finished));
}
