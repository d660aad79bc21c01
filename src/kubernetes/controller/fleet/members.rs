//! This replica's view of the live replicas of its shard
//! ([`Membership::heartbeat`]),
//! kept by a heartbeat every third of `scanStarts.membershipTtl`, and what
//! it answers: whether a replica is live (a lock's holder, for the overdue
//! gauge), and which live replica each object prefers (rendezvous hashing,
//! [`assetscan_domain::share`]).
//!
//! This replica is always live to itself; another one is live until its
//! last heartbeat, as last read, lapses. A ttl of 0 keeps no membership:
//! every replica reconciles every object, and no other replica is known
//! to be live. A replica that cannot reach Redis
//! runs nothing anyway; its view ages out, and with it every other member.

use crate::ports::Membership;
use crate::telemetry::Throttle;
use assetscan_domain::shard::Shard;
use assetscan_domain::share::preferred;
use assetscan_domain::ticket::now_ms;
use futures::Stream;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// One warning a minute per process for failed heartbeats.
static HEARTBEAT_WARNINGS: Throttle = Throttle::new(Duration::from_secs(60));

/// The live replicas as this one last heard of them.
pub struct Members {
    /// The replicas that watch the same objects: this one's shard.
    group: String,
    /// This replica's member id: its lock holder prefix.
    me: String,
    /// How long a heartbeat keeps a member live.
    ttl: Duration,
    /// The other members and when (ms since the epoch) each one lapses.
    others: Mutex<Vec<(String, u64)>>,
    /// Counts the heartbeats that found a member gone or a new one.
    changes: watch::Sender<u64>,
    /// `assetscan_members`.
    count: Gauge,
}

impl Members {
    pub fn new(shard: Shard, me: String, ttl: Duration, count: Gauge) -> Members {
        count.set(1);
        Members {
            group: format!("shard-{}-of-{}", shard.index(), shard.count()),
            me,
            ttl,
            count,
            others: Mutex::new(Vec::new()),
            changes: watch::Sender::new(0),
        }
    }

    /// Fires each time the live members change: a member found gone (its
    /// objects prefer another replica now, which must reconcile them) or a
    /// new one (this replica's share shrank, and what it booked for the
    /// objects that moved, slots in its line of delayed starts, is better
    /// booked again for its own). The controller reconciles all its objects
    /// again; those of the others' shares cost no request.
    pub fn changed(&self) -> impl Stream<Item = ()> + Send + Sync + use<> {
        let changes = self.changes.subscribe();
        futures::stream::unfold(changes, |mut changes| async move {
            changes.changed().await.ok()?;
            Some(((), changes))
        })
    }

    /// Whether there is a membership: a ttl of 0 turns it off.
    fn kept(&self) -> bool {
        !self.ttl.is_zero()
    }

    /// Whether `replica` (a member id: a lock holder's prefix) is live.
    /// Without a membership only this replica is known to be.
    pub fn is_live(&self, replica: &str) -> bool {
        replica == self.me || self.live_others().iter().any(|m| m == replica)
    }

    /// Whether `key` prefers this replica among the live ones. Without a
    /// membership, every key does.
    pub fn prefers_me(&self, key: &str) -> bool {
        if !self.kept() {
            return true;
        }
        let others = self.live_others();
        let all = others.iter().map(String::as_str);
        preferred(all.chain([self.me.as_str()]), key) == Some(self.me.as_str())
    }

    /// The other members whose heartbeat has not lapsed.
    fn live_others(&self) -> Vec<String> {
        let now = now_ms();
        (self.lock().iter())
            .filter(|(_, lapses)| *lapses > now)
            .map(|(member, _)| member.clone())
            .collect()
    }

    fn heard(&self, live: Vec<(String, u64)>) {
        let live: Vec<(String, u64)> = live.into_iter().filter(|(m, _)| *m != self.me).collect();
        self.count.set(
            i64::try_from(live.len())
                .unwrap_or(i64::MAX)
                .saturating_add(1),
        );
        let changed = {
            let mut others = self.lock();
            let known =
                |list: &[(String, u64)], member: &str| list.iter().any(|(m, _)| m == member);
            let changed = (others.iter()).any(|(m, _)| !known(&live, m))
                || (live.iter()).any(|(m, _)| !known(&others, m));
            *others = live;
            changed
        };
        if changed {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(String, u64)>> {
        self.others.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Heartbeats through `pipeline` until `shutdown` fires, then leaves
    /// the membership.
    pub async fn keep(&self, membership: &dyn Membership, shutdown: &CancellationToken) {
        if !self.kept() {
            return;
        }
        let every = (self.ttl / 3).max(Duration::from_millis(100));
        loop {
            self.beat(membership).await;
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(every) => {}
            }
        }
        if let Err(err) = membership.leave(&self.group, &self.me).await {
            warn!(error = %err, "could not leave the membership; it lapses by itself");
        }
    }

    pub async fn beat(&self, membership: &dyn Membership) {
        if !self.kept() {
            return;
        }
        match membership.heartbeat(&self.group, &self.me, self.ttl).await {
            Ok(live) => self.heard(live),
            Err(err) => {
                if HEARTBEAT_WARNINGS.admit(Instant::now()).is_some() {
                    warn!(error = %err, "membership heartbeat failed");
                }
            }
        }
    }
}

/// The replica (member id) of a lock holder id, `<instance>#<random>:<object>`.
pub fn replica_of(holder: &str) -> &str {
    holder
        .split_once(':')
        .map_or(holder, |(replica, _)| replica)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replica `a#1`, its heartbeats good for 3 s.
    fn member_a() -> Members {
        Members::new(
            Shard::ALL,
            "a#1".into(),
            Duration::from_secs(3),
            Gauge::default(),
        )
    }

    #[test]
    fn a_member_is_live_until_its_heartbeat_lapses() {
        let members = member_a();
        let now = now_ms();
        members.heard(vec![
            ("a#1".into(), now + 3000),
            ("b#2".into(), now + 3000),
            ("c#3".into(), now - 1),
        ]);
        assert!(members.is_live("a#1"));
        assert!(members.is_live("b#2"));
        assert!(!members.is_live("c#3"));
        assert_eq!(members.count.get(), 3, "as heard: this one and two others");
        assert_eq!(replica_of("b#2:ns/web-01"), "b#2");
        // Alone, every object prefers this replica.
        let alone = member_a();
        assert!((0..100).all(|i| alone.prefers_me(&format!("ns/{i}"))));
        // With one other live member, about half do.
        let mine = (0..1000)
            .filter(|i| members.prefers_me(&format!("ns/{i}")))
            .count();
        assert!((400..=600).contains(&mine), "{mine}");
    }

    /// A member that joins and one that goes change the membership; the
    /// same members heard again (their heartbeats renewed) do not.
    #[test]
    fn joins_and_departures_are_changes_renewals_are_not() {
        let members = member_a();
        let changes = members.changes.subscribe();
        let now = now_ms();
        let heard = |others: &[(&str, u64)]| {
            let live = others.iter().map(|(m, at)| ((*m).to_owned(), *at));
            members.heard(live.chain([("a#1".to_owned(), now + 3000)]).collect());
            *changes.borrow()
        };
        assert_eq!(heard(&[]), 0, "alone as before");
        assert_eq!(heard(&[("b#2", now + 3000)]), 1, "b joined");
        assert_eq!(heard(&[("b#2", now + 6000)]), 1, "b renewed");
        assert_eq!(heard(&[("b#2", now + 6000), ("c#3", now + 6000)]), 2);
        assert_eq!(heard(&[("c#3", now + 9000)]), 3, "b left");
    }
}
