//! The fenced ticket store: the Redis half of the fence. The whole defence
//! reads top to bottom in [`assetscan_domain::fence`]; here it runs:
//!
//! - [`TicketStore::acquire_run`] (`claim.rs`, `acquire.lua`) takes the
//!   lock and claims the ticket under a new token above the caller's floor;
//! - the [`Watchdog`] renews the lock while the holder works and fires the
//!   lease's cancellation when it cannot (or when the holder's own monotonic
//!   deadline passes, e.g. after a pause). That stops work early; it proves
//!   nothing about writes;
//! - [`TicketStore::advance`] (`write.rs`, `advance.lua`), the only write
//!   after a claim, refuses a stale token server-side, atomically, audits
//!   the refusal and answers [`StoreError::StaleToken`]: the caller stops;
//! - [`TicketStore::retire`] (`end.rs`, `retire.lua`) ends a deleted
//!   owner's runs for good: a later [`TicketStore::acquire_owned`] is
//!   refused with [`StoreError::RunRetired`], an executor still driving a
//!   run finds its ticket gone ([`StoreError::TicketNotFound`]). Every
//!   ticket that is not written for [`StoreConfig::abandon_after`] expires,
//!   so no ticket outlives its object without bound.
//!
//! What a write costs does not depend on what the ticket has learned: the
//! ticket key holds the fenced header (status, token, revision, holder,
//! steps), which the scripts check and rewrite; the facts live beside it in
//! a hash, one field per fact, written as the caller's JSON only when a step
//! learns them and never decoded in Redis. Each operation is one round trip.
//! Because every accepted write proves that nobody else wrote since this
//! executor's last one (the token would have changed), the executor keeps
//! its copy of the facts and gets only the header back
//! ([`TicketStore::advance_from`]).

mod audit;
mod claim;
mod conn;
mod doors;
mod end;
mod error;
mod keys;
mod members;
mod replica_ack;
mod scripts;
mod settings;
mod watchdog;
mod write;

pub use audit::AuditEntry;
pub use claim::{Acquired, Claim};
pub use conn::{
    Credentials, RedisConn, RedisExposure, RedisHealth, RedisSecurity, RedisTarget, SentinelTarget,
    TlsCertificates,
};
pub use error::StoreError;
pub use keys::AssetKeys;
pub use keys::layout::{BridgeDecision, CLOSED_HOLDER, IdentityBridge, Layout};
pub use replica_ack::replicas::ReplicaStats;
pub use replica_ack::{ReplicaAck, ReplicaAckMode};
pub use settings::{LockSection, RedisSection, StoreSettingsError, TicketsSection};
pub use watchdog::{LeaseGuard, Watchdog, WatchdogStats};
pub use write::{LastErrorChange, Patch};

use assetscan_domain::AssetId;
use assetscan_domain::asset::validate_run;
use assetscan_domain::ticket::Ticket;
use redis::AsyncCommands;
use std::sync::Arc;
use std::time::Duration;

/// Store settings.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Key prefix (`asc` by default).
    pub prefix: String,
    /// Lock time to live; the watchdog renews at a third of it.
    pub lock_ttl: Duration,
    /// Approximate cap of each asset's audit stream.
    pub audit_cap: u32,
    /// How long a terminal ticket is kept; zero keeps it until deleted.
    pub terminal_retention: Duration,
    /// How long a ticket that is not terminal is kept after its last write
    /// (a run nobody drives any more), and how long a retired owner's
    /// tombstone keeps late executors out. Must be positive.
    pub abandon_after: Duration,
    /// Bound on connecting and on each Redis response.
    pub timeout: Duration,
    /// Credentials and TLS settings applied to every connection.
    pub security: RedisSecurity,
    /// Whether the writes around a side effect wait for a replica
    /// ([`replica_ack`]).
    pub replica_ack: ReplicaAck,
    /// Behind Sentinel: how long a command whose master went away keeps
    /// asking the sentinels for the new one and retrying (see `conn`).
    pub failover_wait: Duration,
    /// The bridge to the previous release's layout: a namespaced claim
    /// also takes the asset's legacy lock and fence, every ticket write is
    /// copied to the legacy ticket, and retirement covers both families, so
    /// that an executor of the previous release (which knows only the
    /// legacy keys) and this one exclude each other. `Auto` (the default)
    /// decides from Redis at connect ([`layout`]): on where 0.1.0 left its
    /// keys, off on a new install. Turned off after an upgrade, 0.1.0 is
    /// refused from then on ([`Layout::Closed`]). Deprecated: it goes in
    /// the next release.
    pub identity_bridge: IdentityBridge,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            prefix: "asc".to_owned(),
            lock_ttl: Duration::from_secs(30),
            audit_cap: 1000,
            terminal_retention: Duration::from_secs(7 * 24 * 3600),
            abandon_after: Duration::from_secs(24 * 3600),
            timeout: Duration::from_secs(5),
            security: RedisSecurity::default(),
            replica_ack: ReplicaAck::default(),
            failover_wait: Duration::from_secs(10),
            identity_bridge: IdentityBridge::Auto,
        }
    }
}

/// The ticket store over one Redis deployment.
#[derive(Clone)]
pub struct TicketStore {
    conn: RedisConn,
    config: StoreConfig,
    watchdog: Watchdog,
    /// The replica wait, when writes around side effects wait.
    replica_ack: Option<replica_ack::ReplicaWait>,
    /// The namespace the asset ids are scoped by ([`TicketStore::scoped`]);
    /// `None`: the legacy layout (runs of no namespace, the CLI's).
    namespace: Option<Arc<str>>,
    /// The layout (the bridge on, off, or off and closed to 0.1.0), as
    /// decided at connect, and why.
    bridge: Arc<BridgeDecision>,
}

impl TicketStore {
    /// Connects and starts the process's watchdog.
    pub async fn connect(
        target: &RedisTarget,
        config: StoreConfig,
    ) -> Result<TicketStore, StoreError> {
        let conn = RedisConn::connect(target, &config).await?;
        let bridge = keys::layout::resolve(&conn, &config.prefix, config.identity_bridge).await?;
        let watchdog = Watchdog::start(conn.clone(), config.lock_ttl);
        let replica_ack = config
            .replica_ack
            .resolve(target, config.timeout)
            .map(|timeout| replica_ack::ReplicaWait::start(&conn, timeout, config.failover_wait));
        Ok(TicketStore {
            conn,
            config,
            watchdog,
            replica_ack,
            namespace: None,
            bridge: Arc::new(bridge),
        })
    }

    /// Whether the bridge to 0.1.0's layout is on (or off and closed to
    /// 0.1.0), and why.
    pub fn bridge(&self) -> &BridgeDecision {
        &self.bridge
    }

    /// This store with asset ids scoped by `namespace`: an asset's identity
    /// is then `(namespace, assetId)` (see `keys/mod.rs`). Refused for a name
    /// that could not be a Kubernetes namespace.
    pub fn scoped(&self, namespace: &str) -> Result<TicketStore, StoreError> {
        if !keys::valid_namespace(namespace) {
            return Err(StoreError::InvalidNamespace {
                namespace: namespace.chars().take(80).collect(),
            });
        }
        Ok(TicketStore {
            namespace: Some(namespace.into()),
            ..self.clone()
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// The latest command's outcome, from this store's and its watchdog's
    /// own traffic: what readiness answers from.
    pub fn redis_health(&self) -> &RedisHealth {
        self.conn.health()
    }

    /// What the replica wait found, when notifications' writes wait for
    /// replicas outside a Cluster.
    pub fn replica_stats(&self) -> Option<&ReplicaStats> {
        let replicas = self.replica_ack.as_ref()?.replicas.as_ref()?;
        Some(replicas.stats())
    }

    /// Requests this store and its watchdog sent to Redis so far: what an
    /// operation costs in round trips, as the client sees it.
    pub fn round_trips(&self) -> u64 {
        self.conn.round_trips()
    }

    pub fn keys(&self, asset: &AssetId) -> AssetKeys {
        match &self.namespace {
            Some(namespace) => {
                AssetKeys::namespaced(&self.config.prefix, namespace, asset, self.bridge.layout)
            }
            None => AssetKeys::new(&self.config.prefix, asset),
        }
    }

    /// Reads a ticket without the lock: the reconcile fast path. Header and
    /// facts come in one round trip (two commands, pipelined; both keys are
    /// in the asset's hash slot).
    pub async fn get_ticket(
        &self,
        asset: &AssetId,
        run: &str,
    ) -> Result<Option<Ticket>, StoreError> {
        validate_run(run)?;
        let keys = self.keys(asset);
        let families: Vec<AssetKeys> = std::iter::once(keys.clone()).chain(keys.legacy()).collect();
        let mut pipe = redis::pipe();
        for family in &families {
            pipe.get(family.ticket(run)).hgetall(family.facts(run));
        }
        let copies: Vec<(Option<String>, Facts)> = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(StoreError::redis("get ticket"))?;
        // With the bridge, the newer copy: an executor of the legacy layout
        // may have moved the run on since this one's last write.
        let mut newest: Option<Ticket> = None;
        for (family, (raw, facts)) in families.iter().zip(copies) {
            if let Some(raw) = raw {
                let ticket = assemble(&family.ticket(run), &raw, &facts)?;
                if newest.as_ref().is_none_or(|n| ticket.fence() > n.fence()) {
                    newest = Some(ticket);
                }
            }
        }
        Ok(newest)
    }

    /// The asset's audit stream, oldest first (at most `count` entries).
    pub async fn audit(
        &self,
        asset: &AssetId,
        count: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        audit::read(&mut self.conn.clone(), &self.keys(asset).audit(), count).await
    }

    /// Run ids of the asset's tickets (of both families, with the bridge).
    pub async fn runs(&self, asset: &AssetId) -> Result<Vec<String>, StoreError> {
        let keys = self.keys(asset);
        let mut found = Vec::new();
        for family in std::iter::once(keys.clone()).chain(keys.legacy()) {
            let prefix = family.ticket("");
            found.extend(
                self.scan(&family.ticket_pattern())
                    .await?
                    .into_iter()
                    .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned)),
            );
        }
        found.sort();
        found.dedup();
        Ok(found)
    }

    /// Every ticket key under the prefix (`ticket list`).
    pub async fn ticket_keys(&self) -> Result<Vec<String>, StoreError> {
        let mut found = self
            .scan(&format!("{}:{{*}}:ticket:*", self.config.prefix))
            .await?;
        found.sort();
        Ok(found)
    }

    /// Checks that Redis answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        redis::cmd("PING")
            .query_async::<String>(&mut self.conn.clone())
            .await
            .map(|_| ())
            .map_err(StoreError::redis("ping"))
    }

    /// Keys matching `pattern`: SCAN on a standalone server; on a Cluster,
    /// KEYS on every primary (the client merges the answers). Both serve
    /// troubleshooting and finalizers, never the hot path.
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let op = "scan";
        let mut conn = self.conn.clone();
        let mut found: Vec<String> = if conn.is_cluster() {
            conn.keys(pattern).await.map_err(StoreError::redis(op))?
        } else {
            use futures::TryStreamExt;
            // A thousand keys a step: a deletion lists the asset's tickets,
            // and with the default of ten that is a round trip per ten keys
            // of the whole database.
            let options = redis::ScanOptions::default()
                .with_pattern(pattern)
                .with_count(1000);
            conn.scan_options::<String>(options)
                .await
                .map_err(StoreError::redis(op))?
                .try_collect()
                .await
                .map_err(StoreError::redis(op))?
        };
        found.sort();
        found.dedup();
        Ok(found)
    }

    fn ttl_ms(&self) -> u64 {
        millis(self.config.lock_ttl)
    }

    /// How long an asset's fence and audit stream are kept after a claim:
    /// as long as anything of the asset can still be read, or forever when
    /// terminal tickets are kept until deleted.
    fn asset_keep_ms(&self) -> u64 {
        if self.config.terminal_retention.is_zero() {
            0
        } else {
            millis(
                self.config
                    .terminal_retention
                    .max(self.config.abandon_after),
            )
        }
    }
}

/// A facts hash as HGETALL gives it: name, JSON.
type Facts = Vec<(String, String)>;

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A stored ticket: the header at `key` with the fields of its facts hash.
/// `cjson` writes an empty array as `{}`; the ticket types accept both (see
/// `ticket::lenient_vec`).
///
/// A header of the older layout holds its facts itself. Those win over the
/// hash: only an executor of the older contract writes facts there, and it
/// can only have done so after the hash's last write (the scripts move them
/// into the hash at the ticket's next write).
fn assemble(key: &str, header: &str, facts: &[(String, String)]) -> Result<Ticket, StoreError> {
    let mut ticket: Ticket = serde_json::from_str(header).map_err(|e| corrupt(key, &e))?;
    let inline = std::mem::take(&mut ticket.facts);
    for (name, json) in facts {
        ticket
            .facts
            .set_named(name, json.as_str())
            .map_err(|e| corrupt(key, &e))?;
    }
    ticket.facts.overlay(inline);
    Ok(ticket)
}

fn corrupt(key: &str, err: &serde_json::Error) -> StoreError {
    StoreError::TicketCorrupt {
        key: key.to_owned(),
        reason: err.to_string(),
    }
}
