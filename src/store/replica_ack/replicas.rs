//! How many replicas a notification's writes wait for: the ones the master
//! has, as its replication state says, kept fresh in the background.
//!
//! `WAIT 1` on a master without a replica can only time out: behind
//! Sentinel that is the state right after the one failure Sentinel exists
//! for (the master killed, its only replica promoted), and waiting would
//! stop every alert until the dead node is back. So the store asks the
//! master (`ROLE`, which lists the replicas connected and in sync) about
//! once a second, on a task of its own, and a write waits for that many
//! replicas, at most [`MAX_WAIT`]. With none connected there is nothing a
//! failover could promote that holds the write: it goes ahead unreplicated,
//! counted ([`ReplicaStats::unreplicated_writes`]) and warned about at most
//! once a minute.
//!
//! "None" must not be a master that was just left behind. A replica that
//! disappears may have been promoted: a gracefully demoted master keeps
//! taking writes until a sentinel reconfigures it, and what it takes then is
//! lost. So a master counts as alone only when the sentinels name it as the
//! master, and only once it has been without a replica for the failover wait
//! (`redis.failoverWait`): a failover that promoted its replica has named
//! the new master by then. Until then a write waits for one replica, as
//! before, and is not acted on without it. A master the store has never
//! seen with a replica (the promoted replica after its master died, a group
//! without replicas) is alone as soon as the sentinels name it. Since the
//! view is up to a second old, a write that went ahead alone is checked
//! once more after it is applied ([`Replicas::to_wait_now`]): if the node
//! has a replica by then, or the sentinels name another master, the write
//! is sent again with the wait (the same transition under the same token,
//! which the script accepts as `X → X`).

use crate::store::conn::RedisConn;
use redis::Value;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, warn};

/// The most replicas a write waits for: one copy off the master is what
/// survives the failover of one node.
pub(in crate::store) const MAX_WAIT: u32 = 1;
/// How often the replication state is read again.
const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// A state older than this is read again before it decides a write (the
/// background task is late, e.g. while its own request waits for a new
/// master).
const MAX_AGE: Duration = Duration::from_secs(3);
/// At most one warning about unreplicated writes per this period.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the replica wait found, for metrics.
#[derive(Debug)]
pub struct ReplicaStats {
    /// Replicas connected and in sync with the master as last read; -1
    /// before the first read.
    pub online: AtomicI64,
    /// Writes of a notification's intent or receipt that went ahead without
    /// a replica to wait for.
    pub unreplicated_writes: AtomicU64,
    /// Such writes a replica acknowledged (`WAIT`).
    pub acknowledged_writes: AtomicU64,
}

impl Default for ReplicaStats {
    fn default() -> Self {
        ReplicaStats {
            online: AtomicI64::new(-1),
            unreplicated_writes: AtomicU64::new(0),
            acknowledged_writes: AtomicU64::new(0),
        }
    }
}

/// The replication state of the node that takes the writes, as last read.
#[derive(Clone, Debug)]
struct Seen {
    node: Arc<str>,
    at: Instant,
    /// Replicas connected and in sync; 0 when the node is no master.
    online: u32,
    /// Whether the sentinels named the node as master (read only when it
    /// has no replica: that is when it matters).
    named: bool,
    /// When the node was last seen with a replica.
    replica_seen_at: Option<Instant>,
}

impl Seen {
    /// How many replicas a write waits for; see the module documentation.
    fn to_wait(&self, grace: Duration) -> u32 {
        if self.online > 0 {
            return self.online.min(MAX_WAIT);
        }
        let settled = self
            .replica_seen_at
            .is_none_or(|seen| self.at.saturating_duration_since(seen) >= grace);
        if self.named && settled { 0 } else { 1 }
    }
}

/// The replica wait's view of the master; cheap to clone.
#[derive(Clone)]
pub(in crate::store) struct Replicas {
    shared: Arc<Shared>,
}

struct Shared {
    /// Its own connection handle: its requests are no operation's cost.
    conn: RedisConn,
    grace: Duration,
    seen: Mutex<Option<Seen>>,
    /// Held while the state is read, so that only one read is in flight.
    reading: tokio::sync::Mutex<()>,
    last_warning: Mutex<Option<Instant>>,
    stats: ReplicaStats,
}

impl Replicas {
    /// Starts reading the replication state of `conn`'s master in the
    /// background; the task ends when the last handle is dropped. `grace`
    /// is the failover wait.
    pub(in crate::store) fn start(conn: &RedisConn, grace: Duration) -> Replicas {
        let shared = Arc::new(Shared {
            conn: conn.counted_apart(),
            grace,
            seen: Mutex::new(None),
            reading: tokio::sync::Mutex::new(()),
            last_warning: Mutex::new(None),
            stats: ReplicaStats::default(),
        });
        tokio::spawn(refresh_in_background(Arc::downgrade(&shared)));
        Replicas { shared }
    }

    pub(in crate::store) fn stats(&self) -> &ReplicaStats {
        &self.shared.stats
    }

    /// How many replicas the next write waits for: from the state read in
    /// the background, or read now when that one is old or about another
    /// node than the one the writes go to. A state that cannot be read
    /// waits for one replica, as before.
    pub(in crate::store) async fn to_wait(&self) -> u32 {
        let shared = &self.shared;
        let current = shared.seen().clone();
        let node = shared.conn.node();
        match current {
            Some(seen) if Some(&seen.node) == node.as_ref() && seen.at.elapsed() < MAX_AGE => {
                seen.to_wait(shared.grace)
            }
            _ => self.read_now().await.map_or(1, |s| s.to_wait(shared.grace)),
        }
    }

    /// After a write that went ahead without a replica, or that fewer
    /// replicas acknowledged than it waited for: how many replicas it must
    /// wait for, read afresh after the write (its master's replicas, and
    /// whether the sentinels still name it). Only 0 lets the write count as
    /// done: a view up to a second old may predate a replica's sync or a
    /// failover that left this node behind.
    pub(in crate::store) async fn to_wait_now(&self) -> u32 {
        let _only = self.shared.reading.lock().await;
        self.shared
            .read()
            .await
            .map_or(1, |s| s.to_wait(self.shared.grace))
    }

    /// Counts a write that went ahead without a replica, and warns about it
    /// at most once per [`WARN_EVERY`].
    pub(in crate::store) fn went_unreplicated(&self, key: &str) {
        let shared = &self.shared;
        shared
            .stats
            .unreplicated_writes
            .fetch_add(1, Ordering::Relaxed);
        let mut last = shared
            .last_warning
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            warn!(
                key,
                "notifications are not replicated: the redis master has no replica connected, so a failover now would lose their record (warned at most once a minute)"
            );
        }
    }

    /// Counts a write a replica acknowledged.
    pub(in crate::store) fn acknowledged(&self) {
        let stats = &self.shared.stats;
        stats.acknowledged_writes.fetch_add(1, Ordering::Relaxed);
    }

    async fn read_now(&self) -> Option<Seen> {
        let before = self.shared.seen().as_ref().map(|s| s.at);
        let _only = self.shared.reading.lock().await;
        // Another caller may have read it while this one waited.
        let seen = self.shared.seen().clone();
        if let Some(seen) = seen
            && Some(seen.at) != before
        {
            return Some(seen);
        }
        self.shared.read().await
    }
}

impl Shared {
    fn seen(&self) -> MutexGuard<'_, Option<Seen>> {
        // Every update is a single assignment.
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the master's replication state (`ROLE`) and, when it has no
    /// replica, whether the sentinels name it; records and returns it.
    async fn read(&self) -> Option<Seen> {
        let mut conn = self.conn.clone();
        let role: Value = match redis::cmd("ROLE").query_async(&mut conn).await {
            Ok(role) => role,
            Err(error) => {
                debug!(%error, "cannot read the redis master's replicas");
                return None;
            }
        };
        let node = conn.node()?;
        let online = online_replicas(&role);
        let named = match online {
            Some(0) => conn.is_named_master(&node).await.unwrap_or_else(|error| {
                debug!(%error, "cannot ask the sentinels for the master");
                false
            }),
            Some(_) => true,
            None => false,
        };
        let online = online.unwrap_or(0);
        let at = Instant::now();
        let mut seen = self.seen();
        let before = seen
            .as_ref()
            .filter(|s| s.node == node)
            .and_then(|s| s.replica_seen_at);
        let now = Seen {
            node,
            at,
            online,
            named,
            replica_seen_at: if online > 0 { Some(at) } else { before },
        };
        self.stats
            .online
            .store(i64::from(online), Ordering::Relaxed);
        *seen = Some(now.clone());
        Some(now)
    }
}

/// The replicas a `ROLE` reply lists for a master (those connected and in
/// sync); `None` when the node is not a master.
fn online_replicas(role: &Value) -> Option<u32> {
    let Value::Array(parts) = role else {
        return None;
    };
    let is_master = match parts.first() {
        Some(Value::BulkString(name)) => name.as_slice() == b"master",
        Some(Value::SimpleString(name)) => name == "master",
        _ => false,
    };
    match parts.get(2) {
        Some(Value::Array(replicas)) if is_master => u32::try_from(replicas.len()).ok(),
        _ => None,
    }
}

async fn refresh_in_background(shared: Weak<Shared>) {
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        {
            let _only = strong.reading.lock().await;
            strong.read().await;
        }
        drop(strong);
        tokio::time::sleep(REFRESH_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(online: u32, named: bool, replica_seen_ago: Option<Duration>) -> Seen {
        let at = Instant::now() + Duration::from_secs(60);
        Seen {
            node: Arc::from("127.0.0.1:6379"),
            at,
            online,
            named,
            replica_seen_at: replica_seen_ago.map(|ago| at - ago),
        }
    }

    #[test]
    fn waits_for_the_replicas_there_are_and_goes_alone_only_when_settled() {
        let grace = Duration::from_secs(10);
        assert_eq!(seen(2, true, Some(Duration::ZERO)).to_wait(grace), 1);
        assert_eq!(seen(1, true, Some(Duration::ZERO)).to_wait(grace), 1);
        // Never seen with a replica, named: alone at once.
        assert_eq!(seen(0, true, None).to_wait(grace), 0);
        // Its replica just left (maybe promoted): wait for one still.
        assert_eq!(
            seen(0, true, Some(Duration::from_secs(3))).to_wait(grace),
            1
        );
        assert_eq!(seen(0, true, Some(grace)).to_wait(grace), 0);
        // Not the master the sentinels name: never alone.
        assert_eq!(seen(0, false, None).to_wait(grace), 1);
    }

    #[test]
    fn role_replies() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let replica = Value::Array(vec![bulk("127.0.0.1"), bulk("6380"), bulk("42")]);
        let master = |replicas: Vec<Value>| {
            Value::Array(vec![bulk("master"), Value::Int(42), Value::Array(replicas)])
        };
        assert_eq!(online_replicas(&master(vec![replica.clone()])), Some(1));
        assert_eq!(online_replicas(&master(Vec::new())), Some(0));
        let slave = Value::Array(vec![bulk("slave"), bulk("127.0.0.1"), Value::Int(6379)]);
        assert_eq!(online_replicas(&slave), None);
        assert_eq!(online_replicas(&Value::Nil), None);
    }
}
