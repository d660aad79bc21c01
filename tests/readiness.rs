//! `/readyz` answers from the outcome of the replica's own Redis traffic:
//! 100 probes a second send no command to a real redis-server (counted by
//! the server itself, `INFO commandstats`), and readiness still follows
//! Redis going away and coming back.
//!
//!   cargo test --all-features --test readiness -- --nocapture
//!
//! prints the commands the server counted in a window without probes and
//! in one with 100 probes a second.

use assetscan_operator::probes::{Exposure, IDLE_CHECK, serve};
use assetscan_operator::store::{RedisTarget, StoreConfig, TicketStore};
use assetscan_operator::telemetry::Metrics;
use assetscan_testkit::process::free_port;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::wait::until;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const PROBES_PER_SECOND: u32 = 100;
const WINDOW: Duration = Duration::from_secs(3);

/// Every command the server processed, less the `INFO` calls that read
/// the counts.
fn commands(server: &RedisServer) -> u64 {
    server
        .info_number("stats", "total_commands_processed")
        .unwrap()
        .saturating_sub(server.command_calls("info").unwrap())
}

async fn status(url: &str) -> u16 {
    match reqwest::get(url).await {
        Ok(answer) => answer.status().as_u16(),
        Err(_) => 0,
    }
}

/// Commands the server counted during [`WINDOW`], with `probes_per_second`
/// GETs of `/readyz` sent meanwhile (each on a task of its own, so that a
/// slow answer does not slow the rate), and how many were answered 200.
async fn commands_during_window(
    server: &RedisServer,
    readyz: &str,
    probes_per_second: u32,
) -> (u64, usize) {
    let before = commands(server);
    let start = Instant::now();
    let client = reqwest::Client::new();
    let mut probes = Vec::new();
    if probes_per_second == 0 {
        tokio::time::sleep(WINDOW).await;
    } else {
        let mut ticks = tokio::time::interval(Duration::from_secs(1) / probes_per_second);
        while start.elapsed() < WINDOW {
            ticks.tick().await;
            let probe = client.get(readyz).send();
            probes.push(tokio::spawn(async move {
                probe.await.is_ok_and(|answer| answer.status() == 200)
            }));
        }
    }
    let mut ready = 0;
    for probe in probes {
        ready += usize::from(probe.await.unwrap());
    }
    (commands(server) - before, ready)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_probes_send_no_redis_command() {
    assetscan_operator::providers::install_crypto_provider();
    let mut server = RedisServer::start().unwrap();
    let target = RedisTarget::Standalone(server.url());
    let store = TicketStore::connect(&target, StoreConfig::default())
        .await
        .unwrap();
    let port = free_port();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let endpoints = tokio::spawn(serve(
        ([127, 0, 0, 1], port).into(),
        Exposure::Plain,
        Arc::new(Metrics::new()),
        Arc::new(OnceLock::from(store.clone())),
        shutdown.clone(),
    ));
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    until("/readyz answers 200", Duration::from_secs(5), async || {
        status(&readyz).await == 200
    })
    .await;

    let (idle, _) = commands_during_window(&server, &readyz, 0).await;
    let (probed, probes) = commands_during_window(&server, &readyz, PROBES_PER_SECOND).await;
    println!(
        "redis commands in {WINDOW:?}: {idle} without probes, {probed} with {probes} probes of /readyz answered 200 ({PROBES_PER_SECOND}/s); the idle check pings after {IDLE_CHECK:?} without traffic"
    );
    let sent = WINDOW.as_secs() as usize * PROBES_PER_SECOND as usize;
    assert!(
        probes >= sent * 9 / 10,
        "{probes} of {sent} probes answered 200"
    );
    // The idle check's PINGs only: at most one per IDLE_CHECK, probes or not.
    let idle_pings = WINDOW.as_secs() / IDLE_CHECK.as_secs() + 1;
    assert!(idle <= idle_pings, "{idle} commands without probes");
    assert!(
        probed <= idle_pings,
        "{probed} commands for {probes} probes"
    );

    // Readiness still follows Redis, from the idle check's PINGs.
    server.stop();
    until("/readyz answers 503", IDLE_CHECK * 5, async || {
        status(&readyz).await == 503
    })
    .await;
    server.restart().unwrap();
    until("/readyz answers 200 again", IDLE_CHECK * 10, async || {
        status(&readyz).await == 200
    })
    .await;
    shutdown.cancel();
    endpoints.await.unwrap().unwrap();
}
