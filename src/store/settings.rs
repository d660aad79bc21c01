//! The store's sections of the configuration file (`redis`, `lock`,
//! `tickets`) and the rules their types cannot state. The store owns them:
//! the CLI reads the file and builds a [`StoreConfig`] from them
//! ([`StoreConfig::from_sections`]); the chart's values schema is generated
//! from the same types, so the doc comments of their fields are what a
//! user reads there.

use super::{IdentityBridge, ReplicaAck, StoreConfig};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// The URL forms [`super::RedisTarget::parse`] knows, for the schema: a
/// wrong scheme fails `helm install` rather than the operator's start.
const URL_PATTERN: &str = r"^(rediss?://.+|rediss?\+sentinel://.+|cluster:.+)$";

/// A key prefix: non-empty, and without what would break a hash tag
/// (`{`, `}`) or a command line (a space).
const PREFIX_PATTERN: &str = "^[^{} ]+$";

/// Where Redis is and how the store talks to it.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RedisSection {
    /// `redis://host:6379/0`, `rediss://…` (TLS),
    /// `redis+sentinel://host:26379,…/<master>` or `cluster:url1,url2,…`.
    /// `--redis-url` / `REDIS_URL` take precedence. Put a password in the
    /// environment variable rather than in this file.
    #[schemars(regex(pattern = URL_PATTERN))]
    pub url: Option<String>,
    /// Key prefix: `<prefix>:n:<namespace>:{<asset>}:lock`, `:fence`,
    /// `:ticket:<run>`, `:audit`.
    #[schemars(length(min = 1), regex(pattern = PREFIX_PATTERN))]
    pub prefix: String,
    /// Bound on connecting and on each Redis reply.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub timeout: Duration,
    /// Whether the writes around a notification (its intent, its receipts)
    /// wait until a replica has them before the run acts on them, and for
    /// how long.
    pub replica_ack: ReplicaAck,
    /// Behind Sentinel: how long a command whose master went away keeps
    /// asking the sentinels for the new master and resending.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub failover_wait: Duration,
    /// The bridge to 0.1.0's key layout (its lock, fence and ticket copy):
    /// `auto` (the default) is on where 0.1.0 left its keys in Redis (an
    /// upgrade) and off on a new install; set false once no replica of
    /// 0.1.0 runs (only then are namespaces fully isolated). Goes in the
    /// next release.
    pub identity_bridge: IdentityBridge,
}

impl Default for RedisSection {
    fn default() -> Self {
        let store = StoreConfig::default();
        RedisSection {
            url: None,
            prefix: store.prefix,
            timeout: store.timeout,
            replica_ack: store.replica_ack,
            failover_wait: store.failover_wait,
            identity_bridge: store.identity_bridge,
        }
    }
}

/// The per-asset lock.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LockSection {
    /// Lock time to live (at least 300ms); renewed every third of it while
    /// a run works. The pods' termination grace period must be at least
    /// this long.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub ttl: Duration,
}

impl Default for LockSection {
    fn default() -> Self {
        LockSection {
            ttl: StoreConfig::default().lock_ttl,
        }
    }
}

/// How long tickets and audit records are kept.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TicketsSection {
    /// How long a finished or failed ticket is kept (`0s`: until its
    /// AssetScan is deleted).
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub retention: Duration,
    /// How long a ticket that is not finished is kept after its last write
    /// (a run nobody drives any more: its object was deleted while an
    /// executor was paused), and how long a deleted AssetScan's tombstone
    /// refuses late executors (at least 1s).
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub abandon_after: Duration,
    /// Approximate number of records kept in each asset's audit stream.
    pub audit_cap: u32,
}

impl Default for TicketsSection {
    fn default() -> Self {
        let store = StoreConfig::default();
        TicketsSection {
            retention: store.terminal_retention,
            abandon_after: store.abandon_after,
            audit_cap: store.audit_cap,
        }
    }
}

/// A value of the store's sections that their types accept and the store
/// cannot work with. Each message names the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StoreSettingsError {
    /// A shorter lock would expire between two renewals on a busy node.
    #[error("lock.ttl must be at least 300ms")]
    LockTtlTooShort,
    /// The tombstone of a deleted AssetScan must outlive a paused executor's
    /// next write attempt.
    #[error("tickets.abandonAfter must be at least 1s")]
    AbandonAfterTooShort,
    #[error("redis.prefix must be non-empty, without braces or spaces")]
    Prefix,
    /// The wait holds the shared connection: every other command queues
    /// behind it.
    #[error(
        "redis.replicaAck.timeout must be positive and below redis.timeout (other commands queue behind the wait)"
    )]
    ReplicaAckTimeout,
}

/// The shortest `lock.ttl`.
const MIN_LOCK_TTL: Duration = Duration::from_millis(300);
/// The shortest `tickets.abandonAfter`.
const MIN_ABANDON_AFTER: Duration = Duration::from_secs(1);

impl RedisSection {
    pub fn check(&self) -> Result<(), StoreSettingsError> {
        if self.prefix.is_empty() || self.prefix.contains(['{', '}', ' ']) {
            return Err(StoreSettingsError::Prefix);
        }
        if self
            .replica_ack
            .timeout
            .is_some_and(|t| t.is_zero() || t >= self.timeout)
        {
            return Err(StoreSettingsError::ReplicaAckTimeout);
        }
        Ok(())
    }
}

impl LockSection {
    pub fn check(&self) -> Result<(), StoreSettingsError> {
        if self.ttl < MIN_LOCK_TTL {
            return Err(StoreSettingsError::LockTtlTooShort);
        }
        Ok(())
    }
}

impl TicketsSection {
    pub fn check(&self) -> Result<(), StoreSettingsError> {
        if self.abandon_after < MIN_ABANDON_AFTER {
            return Err(StoreSettingsError::AbandonAfterTooShort);
        }
        Ok(())
    }
}

impl StoreConfig {
    /// The store's settings from its sections of the configuration file.
    /// Credentials and TLS files come from the command line (the
    /// environment), never from the file: [`StoreConfig::security`] is
    /// left empty for the caller to fill.
    pub fn from_sections(
        redis: &RedisSection,
        lock: &LockSection,
        tickets: &TicketsSection,
    ) -> StoreConfig {
        StoreConfig {
            prefix: redis.prefix.clone(),
            lock_ttl: lock.ttl,
            audit_cap: tickets.audit_cap,
            terminal_retention: tickets.retention,
            abandon_after: tickets.abandon_after,
            timeout: redis.timeout,
            replica_ack: redis.replica_ack,
            failover_wait: redis.failover_wait,
            identity_bridge: redis.identity_bridge,
            security: Default::default(),
        }
    }
}
