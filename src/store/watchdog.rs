//! The watchdog: keeps held locks alive, and tells a holder when its lock is
//! lost.
//!
//! One task per process renews every held lock every ttl/3, in one round trip
//! per Redis node: `renew_many.lua` on a standalone server, a pipeline of
//! `renew.lua` calls routed to each node on a Cluster. Each lease also keeps
//! its own deadline on the monotonic clock (the send time of its last
//! successful renewal + 90 % of the ttl, a margin for clock drift): when the
//! deadline passes, the lease's cancellation fires without waiting for Redis
//! to say so, e.g. in a process that was paused and just woke up.
//!
//! The watchdog manages the lock's lifetime; it does not make a stale write
//! impossible. That is the fencing token's job (see `advance.lua`).

use super::conn::{NodeGroup, RedisConn, SlotMap};
use super::scripts::{RENEW, RENEW_MANY};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Counters of the watchdog's work, for metrics and tests.
#[derive(Debug, Default)]
pub struct WatchdogStats {
    /// Round trips sent for renewal batches.
    pub batches: AtomicU64,
    /// Locks renewed.
    pub renewals: AtomicU64,
    /// Leases lost (deadline passed or Redis said the lock is not ours).
    pub losses: AtomicU64,
}

struct Lease {
    /// The lock, and the bridge's legacy lock taken with it (same slot):
    /// the lease holds while every one of them is renewed.
    lock_keys: Vec<String>,
    holder: String,
    cancel: CancellationToken,
    deadline: Instant,
}

struct Shared {
    leases: Mutex<HashMap<u64, Lease>>,
    next_id: AtomicU64,
    ttl: Duration,
    stats: WatchdogStats,
    /// Wakes the task when a lease is added whose deadline comes before the
    /// task's next wake-up, so that deadline is watched.
    changed: Arc<tokio::sync::Notify>,
    /// When the task wakes next. Only a lease due earlier wakes it: taking
    /// a lock costs no scan of every lease held.
    next_wake: Mutex<Instant>,
}

impl Shared {
    /// How long a renewal sent at `sent_at` keeps the lease: the ttl less a
    /// tenth, so that drift between our clock and Redis' errs on our side.
    fn deadline_after(&self, sent_at: Instant) -> Instant {
        sent_at + self.ttl - self.ttl / 10
    }

    fn next_wake(&self) -> MutexGuard<'_, Instant> {
        self.next_wake.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<u64, Lease>> {
        // A panic while holding this lock cannot leave a lease half-written.
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fires and forgets the lease `id`, if still tracked.
    fn lose(&self, id: u64, why: &str) {
        if let Some(lease) = self.leases().remove(&id) {
            warn!(lock = ?lease.lock_keys, holder = %lease.holder, why, "lock lost");
            self.stats.losses.fetch_add(1, Ordering::Relaxed);
            lease.cancel.cancel();
        }
    }
}

/// Handle to the process's watchdog. Cloning shares it.
#[derive(Clone)]
pub struct Watchdog {
    shared: Arc<Shared>,
}

impl Watchdog {
    /// Starts the renewal task on the current tokio runtime. The task ends
    /// when the last `Watchdog` handle is dropped.
    pub(crate) fn start(conn: RedisConn, ttl: Duration) -> Watchdog {
        let shared = Arc::new(Shared {
            leases: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            ttl,
            stats: WatchdogStats::default(),
            changed: Arc::new(tokio::sync::Notify::new()),
            next_wake: Mutex::new(Instant::now()),
        });
        tokio::spawn(run(Arc::downgrade(&shared), conn));
        Watchdog { shared }
    }

    pub fn stats(&self) -> &WatchdogStats {
        &self.shared.stats
    }

    /// Number of leases being renewed.
    pub fn held(&self) -> usize {
        self.shared.leases().len()
    }

    /// Tracks the locks of one claim (one, or two with the bridge), taken
    /// at `taken_at` (the send time of the acquire call).
    pub(crate) fn track(
        &self,
        lock_keys: Vec<String>,
        holder: String,
        taken_at: Instant,
    ) -> LeaseGuard {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        let deadline = self.shared.deadline_after(taken_at);
        let mut leases = self.shared.leases();
        leases.insert(
            id,
            Lease {
                lock_keys,
                holder: holder.clone(),
                cancel: cancel.clone(),
                deadline,
            },
        );
        // Read under the table's lock: the task sets it under the same lock
        // when it plans its sleep, so it either saw this lease or is told.
        if deadline < *self.shared.next_wake() {
            self.shared.changed.notify_one();
        }
        drop(leases);
        LeaseGuard {
            id,
            shared: Arc::downgrade(&self.shared),
            holder,
            cancel,
        }
    }
}

/// A held lock. Dropping it (or [`LeaseGuard::untrack`]) stops its renewal at
/// once; releasing the lock in Redis is the store's `release`.
pub struct LeaseGuard {
    id: u64,
    shared: Weak<Shared>,
    holder: String,
    cancel: CancellationToken,
}

impl LeaseGuard {
    /// Fires when the lock is lost. Work done under the lock selects on it.
    pub fn cancelled(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Whether the lease is still believed held: not cancelled, and its
    /// deadline on the monotonic clock has not passed.
    pub fn is_held(&self) -> bool {
        if self.cancel.is_cancelled() {
            return false;
        }
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let expired = shared
            .leases()
            .get(&self.id)
            .is_none_or(|lease| lease.deadline <= Instant::now());
        if expired {
            shared.lose(self.id, "lease deadline passed");
        }
        !expired
    }

    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Stops renewal; synchronous, so no renewal is sent after it returns.
    pub(crate) fn untrack(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.leases().remove(&self.id);
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.untrack();
    }
}

/// The renewal loop: sleep until the next tick or the earliest deadline,
/// expire what is due, and on each tick renew the rest in batches.
async fn run(shared: Weak<Shared>, mut conn: RedisConn) {
    let mut slots = SlotMap::default();
    let mut next_tick = Instant::now();
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let interval = (strong.ttl / 3).max(Duration::from_millis(10));
        let wake = {
            let leases = strong.leases();
            let earliest = leases.values().map(|l| l.deadline).min();
            let wake = earliest.map_or(next_tick, |d| d.min(next_tick));
            *strong.next_wake() = wake;
            wake
        };
        let changed = Arc::clone(&strong.changed);
        drop(strong);
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = changed.notified() => continue,
        }
        let Some(strong) = shared.upgrade() else {
            return;
        };
        expire_due(&strong);
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + interval;
            renew_all(&strong, &mut conn, &mut slots).await;
        }
    }
}

fn expire_due(shared: &Shared) {
    let now = Instant::now();
    let due: Vec<u64> = shared
        .leases()
        .iter()
        .filter(|(_, l)| l.deadline <= now)
        .map(|(id, _)| *id)
        .collect();
    for id in due {
        shared.lose(id, "no successful renewal within the ttl");
    }
}

/// A lease to renew, as read from the table.
struct Renewal {
    id: u64,
    lock_keys: Vec<String>,
    holder: String,
}

async fn renew_all(shared: &Shared, conn: &mut RedisConn, slots: &mut SlotMap) {
    let batch: Vec<Renewal> = shared
        .leases()
        .iter()
        .map(|(id, l)| Renewal {
            id: *id,
            lock_keys: l.lock_keys.clone(),
            holder: l.holder.clone(),
        })
        .collect();
    if batch.is_empty() {
        return;
    }
    // One round trip per group: per node on a Cluster (a lease's keys share
    // one hash tag, so one node), all of them on a standalone server.
    let groups = if conn.is_cluster() {
        slots
            .group_by_node(conn, batch, |lease| {
                lease.lock_keys.first().map(String::as_str)
            })
            .await
    } else {
        vec![NodeGroup {
            node: None,
            items: batch,
        }]
    };
    let ttl_ms = shared.ttl.as_millis() as u64;
    let sends = groups.into_iter().map(|group| {
        let mut conn = conn.clone();
        async move {
            let sent_at = Instant::now();
            let result = renew_group(&mut conn, &group, ttl_ms).await;
            (group, sent_at, result)
        }
    });
    for (group, sent_at, result) in futures::future::join_all(sends).await {
        shared.stats.batches.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(renewed) => apply(shared, &group.items, &renewed, sent_at),
            Err(err) => {
                // Deadlines keep running: if Redis stays unreachable the
                // leases expire on their own clock.
                slots.invalidate();
                warn!(error = %err, locks = group.items.len(), "lock renewal failed");
            }
        }
    }
}

/// Renews one group: on a standalone server all leases with one
/// `renew_many.lua`; on a Cluster one node's leases with a pipeline of
/// `renew.lua` calls routed to that node (keys of different slots cannot
/// share one script call there). A lease whose renewal errs counts as not
/// renewed; its deadline decides.
async fn renew_group(
    conn: &mut RedisConn,
    group: &NodeGroup<Renewal>,
    ttl_ms: u64,
) -> redis::RedisResult<Vec<i64>> {
    let Some(node) = &group.node else {
        let mut call = RENEW_MANY.prepare_invoke();
        call.arg(ttl_ms);
        for lease in &group.items {
            for key in &lease.lock_keys {
                call.key(key).arg(&lease.holder);
            }
        }
        return call.invoke_async(conn).await;
    };
    let mut pipe = redis::pipe();
    for lease in &group.items {
        for key in &lease.lock_keys {
            pipe.cmd("EVALSHA")
                .arg(RENEW.get_hash())
                .arg(1)
                .arg(key)
                .arg(&lease.holder)
                .arg(ttl_ms);
        }
    }
    let count = group.items.iter().map(|l| l.lock_keys.len()).sum();
    let replies = conn.script_calls_on(node, &RENEW, pipe, count).await?;
    Ok(replies
        .iter()
        .map(|v| redis::from_redis_value_ref::<i64>(v).unwrap_or(0))
        .collect())
}

/// `renewed` holds one answer per lock key, lease by lease in `group`'s
/// order: a lease is renewed when all of its keys are.
fn apply(shared: &Shared, group: &[Renewal], renewed: &[i64], sent_at: Instant) {
    let mut answers = renewed.iter();
    for Renewal { id, lock_keys, .. } in group {
        let all = lock_keys
            .iter()
            .fold(true, |all, _| answers.next() == Some(&1) && all);
        if all {
            let mut leases = shared.leases();
            if let Some(lease) = leases.get_mut(id) {
                lease.deadline = lease.deadline.max(shared.deadline_after(sent_at));
                shared.stats.renewals.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            shared.lose(*id, "redis says the lock is no longer ours");
        }
    }
}
