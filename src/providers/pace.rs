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
//! that rate already.

use governor::{DefaultDirectRateLimiter, Quota};
use std::collections::BTreeMap;

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
    online: DefaultDirectRateLimiter,
    vulnerabilities: DefaultDirectRateLimiter,
    threat_intel: DefaultDirectRateLimiter,
    channels: BTreeMap<String, DefaultDirectRateLimiter>,
}

impl Pace {
    /// Buckets of `quota` (the start bound's,
    /// [`crate::config::ScanStartsSection::quota`]) for the fixed
    /// providers and `channels`.
    pub fn new<'c>(quota: Quota, channels: impl Iterator<Item = &'c String>) -> Pace {
        let bucket = || DefaultDirectRateLimiter::direct(quota);
        Pace {
            online: bucket(),
            vulnerabilities: bucket(),
            threat_intel: bucket(),
            channels: channels.map(|name| (name.clone(), bucket())).collect(),
        }
    }

    /// Waits until `provider` may be called.
    pub async fn until_ready(&self, provider: Provider<'_>) {
        let bucket = match provider {
            Provider::Online => &self.online,
            Provider::Vulnerabilities => &self.vulnerabilities,
            Provider::ThreatIntel => &self.threat_intel,
            Provider::Channel(name) => match self.channels.get(name) {
                Some(bucket) => bucket,
                // Not configured: the call fails without a request.
                None => return,
            },
        };
        bucket.until_ready().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn a_provider_is_called_at_most_burst_plus_per_second_in_any_second() {
        let bound = crate::config::ScanStartsSection {
            per_second: 50,
            burst: 10,
            ..Default::default()
        };
        let channels = ["hook".to_owned()];
        let pace = Pace::new(bound.quota(), channels.iter());
        let started = Instant::now();
        let mut calls = Vec::new();
        for _ in 0..110 {
            pace.until_ready(Provider::Online).await;
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
            pace.until_ready(Provider::Channel("hook")).await;
        }
        assert!(other.elapsed() < Duration::from_millis(100));
    }
}
