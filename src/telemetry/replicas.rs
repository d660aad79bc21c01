//! What the replica wait around notifications found
//! ([`crate::store::ReplicaStats`]), copied into gauges before a scrape.

use super::registered;
use crate::store::ReplicaStats;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering;

pub struct ReplicaMetrics {
    /// Replicas connected and in sync with the Redis master (-1: not read
    /// yet, or no replica wait).
    pub online: Gauge,
    /// Notification writes that went ahead with no replica to wait for.
    pub unreplicated_writes: Gauge,
    /// Notification writes a replica acknowledged.
    pub acknowledged_writes: Gauge,
}

impl ReplicaMetrics {
    pub(super) fn register(r: &mut Registry) -> ReplicaMetrics {
        let online = Gauge::default();
        online.set(-1);
        ReplicaMetrics {
            online: registered(
                r,
                "redis_replicas_online",
                "Replicas connected and in sync with the Redis master, as the notification writes' wait last read them (-1: unknown)",
                online,
            ),
            unreplicated_writes: registered(
                r,
                "notification_writes_unreplicated",
                "Notification writes (intent, receipts) that went ahead because the Redis master had no replica",
                Gauge::default(),
            ),
            acknowledged_writes: registered(
                r,
                "notification_writes_replica_acknowledged",
                "Notification writes a Redis replica acknowledged (WAIT)",
                Gauge::default(),
            ),
        }
    }

    /// Copies the store's counters into the gauges.
    pub fn observe(&self, stats: &ReplicaStats) {
        self.online.set(stats.online.load(Ordering::Relaxed));
        let unreplicated = stats.unreplicated_writes.load(Ordering::Relaxed);
        self.unreplicated_writes.set(unreplicated as i64);
        let acknowledged = stats.acknowledged_writes.load(Ordering::Relaxed);
        self.acknowledged_writes.set(acknowledged as i64);
    }
}
