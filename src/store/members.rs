//! The operator's live replicas, as heartbeats in Redis: one sorted set
//! per group of replicas that watch the same objects (a shard),
//! `<prefix>:members:<group>`, each member scored by when its heartbeat
//! lapses.
//! A heartbeat renews the sender, drops the lapsed and reads the rest, in
//! one round trip.
//!
//! Redis rather than Kubernetes Leases: the membership says which replica
//! should run which object, and the per-asset locks it steers are in Redis
//! already. One store to reach means no replica runs while seeing a
//! membership it cannot renew itself in, and no Lease objects, watches or
//! RBAC cost the API server anything. The scores are the senders' clocks:
//! replicas whose clocks differ by a fraction of the ttl (NTP keeps them
//! within milliseconds) agree on who is live.

use super::{StoreError, TicketStore};
use assetscan_domain::ticket::now_ms;
use std::time::Duration;

/// A live member, and when (ms since the epoch) its heartbeat lapses.
pub type Member = (String, u64);

impl TicketStore {
    fn members_key(&self, group: &str) -> String {
        format!("{}:members:{group}", self.config.prefix)
    }

    /// Says `member` of `group` is live for `ttl` more; returns the live
    /// members of `group`, `member` among them. One round trip.
    pub async fn heartbeat(
        &self,
        group: &str,
        member: &str,
        ttl: Duration,
    ) -> Result<Vec<Member>, StoreError> {
        let key = self.members_key(group);
        let now = now_ms();
        let lapses = now.saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        // A pipeline, not a transaction: each command is atomic on its own,
        // and another member's heartbeat between them changes nothing of
        // what this one reads (its own entry, renewed; the lapsed, dropped).
        let (live,): (Vec<(String, f64)>,) = redis::pipe()
            .zadd(&key, member, lapses)
            .ignore()
            .zrembyscore(&key, "-inf", now)
            .ignore()
            .zrange_withscores(&key, 0, -1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(StoreError::redis("heartbeat"))?;
        // Scores are whole milliseconds, well within f64's exact integers.
        Ok(live
            .into_iter()
            .map(|(member, lapses)| (member, lapses.max(0.0) as u64))
            .collect())
    }

    /// Takes `member` out of the membership at once (a graceful stop): its
    /// share moves on without waiting for its heartbeat to lapse.
    pub async fn leave(&self, group: &str, member: &str) -> Result<(), StoreError> {
        redis::cmd("ZREM")
            .arg(self.members_key(group))
            .arg(member)
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map(|_| ())
            .map_err(StoreError::redis("leave membership"))
    }
}
