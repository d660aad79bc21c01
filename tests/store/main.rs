//! The fenced Redis core against real redis-server instances: the zombie
//! scenario, the claim at acquisition, the transition table, token floors,
//! lock ownership, the watchdog, Cluster, corruption and outages, and a race.

#[path = "../kit/mod.rs"]
mod kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{
    Fact, Finding, RiskFacts, Severity, Status, Step, Ticket, VulnFacts,
};
use assetscan_operator::store::{
    Claim, Patch, RedisTarget, StoreConfig, StoreError, TicketStore, WatchdogStats,
};
use assetscan_testkit::redis::{RedisCluster, RedisServer};
use assetscan_testkit::wait::{until, until_some};
use kit::setup::connect as raw;
use kit::tickets::{Held, OFFLINE, asset_id as asset, claim, high_risk_to};
use redis::AsyncCommands;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

fn config(ttl_ms: u64) -> StoreConfig {
    StoreConfig {
        lock_ttl: Duration::from_millis(ttl_ms),
        audit_cap: 10_000,
        timeout: Duration::from_secs(2),
        ..StoreConfig::default()
    }
}

async fn store(server: &RedisServer, ttl_ms: u64) -> TicketStore {
    TicketStore::connect(&RedisTarget::Standalone(server.url()), config(ttl_ms))
        .await
        .expect("connect")
}

/// A redis-server, and a store on it with a lock ttl of `ttl_ms`.
async fn start(ttl_ms: u64) -> (RedisServer, TicketStore) {
    let server = RedisServer::start().unwrap();
    let store = store(&server, ttl_ms).await;
    (server, store)
}

/// Makes the asset's lock expire now, as Redis would after its ttl: these
/// tests are about what happens after expiry, not about its timing.
fn expire_lock(server: &RedisServer, store: &TicketStore, asset: &AssetId) {
    kit::setup::expire_lock(server, &store.keys(asset).lock());
}

/// What an online check confirms.
fn online_fact() -> Patch {
    Patch::default().fact(Fact::Online, true)
}

/// A guard against hangs only: conditions are awaited, not timed.
const PATIENCE: Duration = Duration::from_secs(30);

/// Waits until the watchdog has counted `at_least` in `stat`.
async fn watchdog_reaches(
    store: &TicketStore,
    what: &str,
    stat: fn(&WatchdogStats) -> &AtomicU64,
    at_least: u64,
) {
    until(what, PATIENCE, async || {
        stat(store.watchdog().stats()).load(Ordering::Relaxed) >= at_least
    })
    .await;
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

mod fence;
mod lifetimes;
mod operations;
