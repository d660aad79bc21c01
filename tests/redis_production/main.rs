//! Redis as production runs it, all real processes on loopback: a Sentinel
//! group (master, replica, three sentinels) failing over under the
//! controller; the ACL user of docs/redis.md; TLS with a private CA and client
//! certificates; and credentials or certificates that are wrong, which must
//! give one clear error and a backoff, not a retry storm.
//!
//!   cargo test --all-features --test redis_production

#[path = "../controller_kit/mod.rs"]
mod controller_kit;

use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{Fact, Status, Step, Ticket};
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::probes::observe_store;
use assetscan_operator::store::{
    Patch, RedisTarget, ReplicaAckMode, StoreConfig, StoreError, TicketStore,
};
use assetscan_testkit::redis::{RedisOptions, RedisServer, SentinelGroup, ServerTls, TlsFiles};
use controller_kit::*;
use serde_json::json;
use std::time::Duration;

fn fence_of(obj: &AssetScan) -> (i64, i64) {
    let s = obj.status.as_ref().expect("status");
    (s.fencing_token.unwrap_or(-1), s.revision.unwrap_or(-1))
}

/// Runs a blocking fixture call (sentinel waits) without stalling the
/// runtime's other worker.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// A new spec generation: a new run, which must take a new token.
async fn bump_generation(h: &Harness, name: &str) {
    h.merge(name, json!({"spec": {"policy": {"cvssThreshold": 6.5}}}))
        .await;
}

mod credentials;
mod sentinel;
