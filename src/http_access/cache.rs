//! Recent access decisions, so that a scrape every few seconds costs the
//! API server no review each time: bounded in size, each entry kept for a
//! short time (a grant longer than a denial, as kube-rbac-proxy and
//! controller-runtime's filter keep them), and keyed by a digest of the
//! token, never the token itself.
//!
//! Hand-written: a map with an expiry per entry is all it takes, where the
//! cache crates bring a scheduler or a concurrent map the operator needs
//! nowhere else.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What the API server answered for one token, path and verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The token is valid and its user may do this.
    Allowed,
    /// The token is valid, its user may not.
    Forbidden,
    /// The API server does not know the token.
    Unauthenticated,
}

/// How long decisions stay, and how many are kept.
#[derive(Debug, Clone, Copy)]
pub struct CachePolicy {
    pub allowed_for: Duration,
    pub denied_for: Duration,
    pub capacity: usize,
}

impl Default for CachePolicy {
    fn default() -> Self {
        Self {
            allowed_for: Duration::from_secs(60),
            denied_for: Duration::from_secs(10),
            capacity: 1024,
        }
    }
}

type Key = [u8; 32];

/// The decisions, bounded by [`CachePolicy::capacity`].
#[derive(Debug)]
pub struct DecisionCache {
    policy: CachePolicy,
    entries: HashMap<Key, (Decision, Instant)>,
}

impl DecisionCache {
    pub fn new(policy: CachePolicy) -> Self {
        Self {
            policy,
            entries: HashMap::new(),
        }
    }

    /// The key of a request: a digest of the token, path and verb.
    pub fn key(token: &str, path: &str, verb: &str) -> Key {
        let mut digest = Sha256::new();
        for part in [token, path, verb] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part.as_bytes());
        }
        digest.finalize().into()
    }

    /// The decision still valid at `now`, if any.
    pub fn get(&self, key: &Key, now: Instant) -> Option<Decision> {
        self.entries
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(decision, _)| *decision)
    }

    /// Keeps `decision` from `now`. When full: expired entries go first,
    /// then the one that would expire soonest.
    pub fn insert(&mut self, key: Key, decision: Decision, now: Instant) {
        let ttl = match decision {
            Decision::Allowed => self.policy.allowed_for,
            Decision::Forbidden | Decision::Unauthenticated => self.policy.denied_for,
        };
        if self.policy.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.policy.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until)| *until > now);
            if self.entries.len() >= self.policy.capacity
                && let Some(soonest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(k, _)| *k)
            {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(key, (decision, now + ttl));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(capacity: usize) -> CachePolicy {
        CachePolicy {
            allowed_for: Duration::from_secs(60),
            denied_for: Duration::from_secs(10),
            capacity,
        }
    }

    #[test]
    fn decisions_expire_denials_sooner() {
        let mut cache = DecisionCache::new(policy(8));
        let now = Instant::now();
        let (a, b) = (
            DecisionCache::key("a", "/metrics", "get"),
            DecisionCache::key("b", "/metrics", "get"),
        );
        cache.insert(a, Decision::Allowed, now);
        cache.insert(b, Decision::Forbidden, now);
        let later = now + Duration::from_secs(11);
        assert_eq!(cache.get(&a, later), Some(Decision::Allowed));
        assert_eq!(cache.get(&b, later), None);
        assert_eq!(cache.get(&a, now + Duration::from_secs(61)), None);
    }

    #[test]
    fn the_cache_never_grows_past_its_capacity() {
        let mut cache = DecisionCache::new(policy(4));
        let now = Instant::now();
        for i in 0..100 {
            let key = DecisionCache::key(&format!("token-{i}"), "/metrics", "get");
            cache.insert(key, Decision::Allowed, now + Duration::from_millis(i));
            assert!(cache.len() <= 4);
        }
        let newest = DecisionCache::key("token-99", "/metrics", "get");
        assert_eq!(cache.get(&newest, now), Some(Decision::Allowed));
    }

    #[test]
    fn the_key_tells_tokens_paths_and_verbs_apart() {
        let key = DecisionCache::key("t", "/metrics", "get");
        assert_ne!(key, DecisionCache::key("t", "/metricsget", ""));
        assert_ne!(key, DecisionCache::key("u", "/metrics", "get"));
    }
}
