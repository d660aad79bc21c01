//! Waiting for a replica to hold a write before acting on it.
//!
//! Redis replicates asynchronously: a write the master acknowledged can be
//! lost when a replica is promoted before it got the write. For most writes
//! that only repeats work. Not for the writes around an external side
//! effect: the notification's intent (a write to `NOTIFYING`, which records
//! the idempotency key before the send) and its receipts (`NOTIFYING` with
//! channels confirmed, `NOTIFIED`). Lose the intent and a run that notified
//! goes back to before `NOTIFYING` on the new master, and notifies again.
//!
//! So those writes are followed by `WAIT <n> <timeout>` **in the same
//! request, on the same connection** (a pipeline): `WAIT` counts the
//! replicas that acknowledged this connection's writes, so on another
//! connection (one replaced after a failover) it would answer for writes it
//! never sent. `n` is the number of replicas the master has, connected and
//! in sync, at most one ([`replicas`]): none, and the write goes
//! ahead unreplicated (there is nothing a failover could promote that holds
//! it), counted and warned about. Fewer than `n` within the timeout is
//! [`StoreError::NotReplicated`]: the write may be lost, so the caller does
//! not act on it (the pipeline sends nothing and the run is retried like any
//! Redis outage). On a Cluster every write waits for one replica. The
//! scripts are untouched: the wait is the client's, so operators of an
//! older version running beside this one are unaffected.
//!
//! `WAITAOF` (Redis 7.2+) would also wait for the append-only file to be
//! written; Redis 7.0 does not have it, and `WAIT` is what protects against a
//! failover, so the store uses `WAIT` everywhere.

pub(super) mod replicas;

use crate::store::conn::{RedisConn, RedisTarget};
use crate::store::{StoreError, millis};
use assetscan_domain::Alert;
use assetscan_domain::ticket::Status;
use redis::{FromRedisValue, Script, ScriptInvocation, Value};
use replicas::{MAX_WAIT, Replicas};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// When the writes around a side effect wait for a replica: `auto` behind
/// Sentinel and on a Cluster, where replicas exist by design, not with a
/// single URL (often a server without replicas); `always`, for a single URL
/// whose server has replicas; `never`, leaving the asynchronous
/// replication's window open. (Said here rather than on each variant, so
/// that the values schema lists the three as one `enum`.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReplicaAckMode {
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether the writes around a notification wait until a replica has them,
/// and for how long (`redis.replicaAck`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ReplicaAck {
    /// `auto`: behind Sentinel and on a Cluster; `always`; `never`.
    pub mode: ReplicaAckMode,
    /// How long a write waits for a replica before it counts as possibly
    /// lost. The connection is shared: other commands queue behind the wait,
    /// so it is kept short, and below the Redis response timeout. Unset:
    /// 1s, or half the response timeout when that is less.
    #[serde(deserialize_with = "crate::duration::config_optional")]
    #[schemars(schema_with = "crate::duration::config_optional_schema")]
    pub timeout: Option<Duration>,
}

/// The wait's bound unless set: a replica on the same network answers in
/// about a millisecond, so a second means it is not there.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);

impl ReplicaAck {
    /// The wait's timeout for `target` under the response timeout
    /// `response`, or `None` when writes do not wait.
    pub(super) fn resolve(&self, target: &RedisTarget, response: Duration) -> Option<Duration> {
        let replicated = match self.mode {
            ReplicaAckMode::Auto => !matches!(target, RedisTarget::Standalone(_)),
            ReplicaAckMode::Always => true,
            ReplicaAckMode::Never => false,
        };
        replicated.then(|| self.timeout.unwrap_or(DEFAULT_TIMEOUT.min(response / 2)))
    }
}

/// Whether a write to `to` records a side effect's intent or receipt (the
/// state machine's [`Alert::Sending`] and [`Alert::Sent`]): the writes
/// that must survive a failover.
pub(super) fn guards_side_effect(to: Status) -> bool {
    matches!(to.alert(), Some(Alert::Sending | Alert::Sent))
}

/// The wait as a store applies it: the timeout, and the view of the
/// master's replicas (none on a Cluster, where every write waits for one).
#[derive(Clone)]
pub(super) struct ReplicaWait {
    pub(super) timeout: Duration,
    pub(super) replicas: Option<Replicas>,
}

impl ReplicaWait {
    /// Starts the view of `conn`'s master's replicas unless on a Cluster;
    /// `grace` is the failover wait.
    pub(super) fn start(conn: &RedisConn, timeout: Duration, grace: Duration) -> ReplicaWait {
        ReplicaWait {
            timeout,
            replicas: (!conn.is_cluster()).then(|| Replicas::start(conn, grace)),
        }
    }

    /// The write to `key` may be lost: not acted on.
    fn not_replicated(&self, key: &str) -> StoreError {
        StoreError::NotReplicated {
            key: key.to_owned(),
            timeout: self.timeout,
        }
    }
}

/// Runs `invocation` of `script` and `WAIT <n> <timeout>` in one request on
/// one connection (routed to the master of `key`'s slot on a Cluster),
/// loading the script once if the node lost it; `n` is what `wait` says
/// (none: the script alone, then a fresh check that its master is still
/// alone, else the same again with the wait).
/// The script's error replies come first, then a refused `WAIT`; then a
/// write fewer replicas acknowledged than it waited for is
/// [`StoreError::NotReplicated`], unless its master turns out to be alone
/// now (its replica gone, the sentinels naming it).
pub(super) async fn invoke_acknowledged<T: FromRedisValue>(
    conn: &mut RedisConn,
    script: &Script,
    invocation: &ScriptInvocation<'_>,
    (op, key): (&'static str, &str),
    wait: &ReplicaWait,
) -> Result<T, StoreError> {
    let mut wanted = match &wait.replicas {
        Some(replicas) => replicas.to_wait().await,
        None => MAX_WAIT,
    };
    if let (0, Some(replicas)) = (wanted, &wait.replicas) {
        let reply = invocation
            .invoke_async(conn)
            .await
            .map_err(|e| StoreError::from_redis(op, key, e))?;
        wanted = replicas.to_wait_now().await;
        if wanted == 0 {
            replicas.went_unreplicated(key);
            return Ok(reply);
        }
        // A replica by now, or another master named: the same write again
        // (`X → X` under the same token), this time with the wait.
    }
    let mut pipe = redis::pipe();
    pipe.invoke_script(invocation)
        .cmd("WAIT")
        .arg(wanted)
        .arg(millis(wait.timeout));
    let redis_err = StoreError::redis(op);
    let mut replies = (conn.pipeline_on_master_of(key, &pipe, 2).await).map_err(redis_err)?;
    if is_noscript(replies.first()) {
        script.load_async(conn).await.map_err(redis_err)?;
        replies = (conn.pipeline_on_master_of(key, &pipe, 2).await).map_err(redis_err)?;
    }
    let mut replies = replies.into_iter();
    let (Some(reply), Some(acked)) = (replies.next(), replies.next()) else {
        return Err(StoreError::Protocol {
            script: op,
            reason: "a script call and WAIT answered with fewer than two replies".into(),
        });
    };
    let reply = reply
        .extract_error()
        .map_err(|e| StoreError::from_redis(op, key, e))?;
    // A `WAIT` the ACL refuses is an error reply, like a script's.
    let acked = acked
        .extract_error()
        .map_err(|e| StoreError::from_redis(op, key, e))?;
    let acked: i64 =
        redis::from_redis_value(acked).map_err(|e| redis_err(redis::RedisError::from(e)))?;
    match &wait.replicas {
        Some(replicas) if acked >= i64::from(wanted) => replicas.acknowledged(),
        Some(replicas) if replicas.to_wait_now().await == 0 => replicas.went_unreplicated(key),
        None if acked >= i64::from(wanted) => {}
        _ => {
            return Err(wait.not_replicated(key));
        }
    }
    redis::from_redis_value(reply).map_err(|e| StoreError::from_redis(op, key, e.into()))
}

fn is_noscript(reply: Option<&Value>) -> bool {
    matches!(reply, Some(Value::ServerError(e)) if e.code() == "NOSCRIPT")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_waits_behind_sentinel_and_cluster_only() {
        let ack = ReplicaAck::default();
        let five = Duration::from_secs(5);
        let standalone = RedisTarget::parse("redis://127.0.0.1:6379").unwrap();
        let sentinel = RedisTarget::parse("redis+sentinel://s1/m").unwrap();
        let cluster = RedisTarget::parse("cluster:redis://a:1").unwrap();
        assert_eq!(ack.resolve(&standalone, five), None);
        assert_eq!(ack.resolve(&sentinel, five), Some(DEFAULT_TIMEOUT));
        assert_eq!(ack.resolve(&cluster, five), Some(DEFAULT_TIMEOUT));
        let short = Duration::from_millis(800);
        assert_eq!(ack.resolve(&sentinel, short), Some(short / 2));
        let always = ReplicaAck {
            mode: ReplicaAckMode::Always,
            timeout: Some(Duration::from_millis(300)),
        };
        assert_eq!(
            always.resolve(&standalone, five),
            Some(Duration::from_millis(300))
        );
        let never = ReplicaAck {
            mode: ReplicaAckMode::Never,
            ..ack
        };
        assert_eq!(never.resolve(&sentinel, five), None);
    }
}
