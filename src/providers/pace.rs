//! The providers' side of the start bound (`scanStarts`): every step's
//! call to a provider first takes a start of that provider's own bucket,
//! of the same quota as the replica's start bound.
//!
//! The start bound admits runs before their claim; a run's first provider
//! call follows a few milliseconds later (a read, the claim, its record),
//! and those milliseconds vary: calls of runs admitted in one second can
//! land in the next. Each provider's bucket takes that jitter out, so no
//! provider sees more than `burst + perSecond` calls from a replica in any
//! second, retries included. It rarely waits: the runs were admitted at
//! that rate already. When it does, the callers waiting are served fairly
//! among the namespaces that asked ([`FairTurns`]): a namespace's alerts
//! do not wait behind another namespace's mass of calls.

use crate::fair::FairTurns;
use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, Quota};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The providers a step calls: each has its own bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Provider<'a> {
    Online,
    Vulnerabilities,
    ThreatIntel,
    /// A notification channel, by name.
    Channel(&'a str),
}

/// One bucket per provider, each channel its own.
#[derive(Debug)]
pub struct Pace {
    quota: Quota,
    online: Paced,
    vulnerabilities: Paced,
    threat_intel: Paced,
    /// The configured channels' buckets, and those of the channels teams
    /// define (`<namespace>/<name>`), made at their first call.
    channels: Mutex<BTreeMap<String, Arc<Paced>>>,
}

/// A provider's bucket, and the turns of the callers waiting for it.
#[derive(Debug)]
struct Paced {
    bucket: DefaultDirectRateLimiter,
    turns: FairTurns,
}

impl Paced {
    fn new(quota: Quota) -> Paced {
        Paced {
            bucket: DefaultDirectRateLimiter::direct(quota),
            turns: FairTurns::default(),
        }
    }

    /// Takes a call of the bucket, in `namespace`'s turn.
    async fn until_ready(&self, namespace: &str) {
        let turn = self.turns.enter(namespace);
        loop {
            let left = turn.left();
            tokio::pin!(left);
            left.as_mut().enable();
            if turn.is_next() {
                let now = self.bucket.clock().now();
                match self.bucket.check() {
                    Ok(()) => return,
                    Err(refused) => {
                        tokio::time::sleep(refused.wait_time_from(now)).await;
                        continue;
                    }
                }
            }
            left.await;
        }
    }
}

impl Pace {
    /// Buckets of `quota` (the start bound's, which the CLI passes on from
    /// the controller's `scanStarts` section) for the fixed providers and
    /// `channels`.
    pub fn new<'c>(quota: Quota, channels: impl Iterator<Item = &'c String>) -> Pace {
        let bucket = || Paced::new(quota);
        Pace {
            quota,
            online: bucket(),
            vulnerabilities: bucket(),
            threat_intel: bucket(),
            channels: Mutex::new(
                channels
                    .map(|name| (name.clone(), Arc::new(bucket())))
                    .collect(),
            ),
        }
    }

    /// Waits until `provider` may be called on behalf of `namespace` (the
    /// AssetScan's; empty for runs of no object).
    pub async fn until_ready(&self, provider: Provider<'_>, namespace: &str) {
        let bucket = match provider {
            Provider::Online => &self.online,
            Provider::Vulnerabilities => &self.vulnerabilities,
            Provider::ThreatIntel => &self.threat_intel,
            Provider::Channel(name) => {
                let channel = self.channel(name);
                return channel.until_ready(namespace).await;
            }
        };
        bucket.until_ready(namespace).await;
    }
}

impl Pace {
    fn channel(&self, name: &str) -> Arc<Paced> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let quota = self.quota;
        channels
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Paced::new(quota)))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    /// The start bound's quota: `per_second` sustained, `burst` at once.
    fn quota(per_second: u32, burst: u32) -> Quota {
        let nonzero = |n| NonZeroU32::new(n).expect("a test's bound is positive");
        Quota::per_second(nonzero(per_second)).allow_burst(nonzero(burst))
    }

    /// Namespace `a` has 30 calls to a channel waiting, then `b` asks for
    /// 3: `b`'s are served among the next few calls, not after `a`'s 29.
    #[tokio::test]
    async fn a_channel_serves_the_namespaces_waiting_in_turn() {
        let channels = ["hook".to_owned()];
        let pace = Arc::new(Pace::new(quota(20, 1), channels.iter()));
        let served = Arc::new(Mutex::new(Vec::new()));
        let call = |namespace: &'static str| {
            let (pace, served) = (pace.clone(), served.clone());
            tokio::spawn(async move {
                pace.until_ready(Provider::Channel("hook"), namespace).await;
                served.lock().unwrap().push(namespace);
            })
        };
        let mut calls: Vec<_> = (0..30).map(|_| call("a")).collect();
        // The test's runtime has one thread: the spawned calls ask for
        // their turn when the test yields.
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        calls.extend((0..3).map(|_| call("b")));
        for c in calls {
            c.await.unwrap();
        }
        let served = served.lock().unwrap();
        let last_b = served.iter().rposition(|ns| *ns == "b").unwrap();
        assert!(
            last_b < 10,
            "b's last call served {}th: {served:?}",
            last_b + 1
        );
    }

    #[tokio::test]
    async fn a_provider_is_called_at_most_burst_plus_per_second_in_any_second() {
        let channels = ["hook".to_owned()];
        let pace = Pace::new(quota(50, 10), channels.iter());
        let started = Instant::now();
        let mut calls = Vec::new();
        for _ in 0..110 {
            pace.until_ready(Provider::Online, "a").await;
            calls.push(started.elapsed());
        }
        // 10 at once, then one every 20 ms: the 110th two seconds in.
        let in_first_second = calls
            .iter()
            .filter(|t| **t < Duration::from_secs(1))
            .count();
        assert!(
            in_first_second <= 60,
            "{in_first_second} in the first second"
        );
        assert!(
            calls[109] >= Duration::from_millis(1900),
            "{:?}",
            calls[109]
        );
        // Another provider's bucket is untouched.
        let other = Instant::now();
        for _ in 0..10 {
            pace.until_ready(Provider::Channel("hook"), "a").await;
        }
        assert!(other.elapsed() < Duration::from_millis(100));
    }
}
