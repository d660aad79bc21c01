//! Which vulnerabilities affect a package, as `querybatch` last answered
//! for it, shared by every asset's run for a window: assets built from the
//! same base image list the same (ecosystem, name, version) hundreds of
//! times, and OSV is asked about each once per window, not once per asset.
//! A record published within the window is seen by the runs after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The ids (and `modified` stamps) `querybatch` gave for one package.
pub(super) type Vulns = Arc<[(String, Option<String>)]>;

/// Answers by package (its name in findings: `Debian:12/openssl@3.0.11-1`
/// or the purl), each valid for the window from when it was asked.
#[derive(Debug)]
pub(super) struct LookupCache {
    window: Duration,
    capacity: usize,
    entries: Mutex<HashMap<String, (Instant, Vulns)>>,
}

impl LookupCache {
    pub(super) fn new(window: Duration, capacity: usize) -> LookupCache {
        LookupCache {
            window,
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The answer for `package` if asked within the window.
    pub(super) fn get(&self, package: &str) -> Option<Vulns> {
        if self.window.is_zero() || self.capacity == 0 {
            return None;
        }
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(package)
            .filter(|(at, _)| at.elapsed() < self.window)
            .map(|(_, vulns)| Arc::clone(vulns))
    }

    /// Keeps the complete answer for `package`, asked at `at`. When full,
    /// the expired answers go first; if none has, the cache starts over.
    pub(super) fn put(&self, package: String, at: Instant, vulns: Vulns) {
        if self.window.is_zero() || self.capacity == 0 {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(&package) {
            entries.retain(|_, (asked, _)| asked.elapsed() < self.window);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(package, (at, vulns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vulns(ids: &[&str]) -> Vulns {
        ids.iter().map(|id| ((*id).to_owned(), None)).collect()
    }

    #[test]
    fn answers_last_a_window() {
        let cache = LookupCache::new(Duration::from_secs(60), 2);
        assert!(cache.get("PyPI/a@1").is_none());
        cache.put("PyPI/a@1".into(), Instant::now(), vulns(&["GHSA-1"]));
        assert_eq!(cache.get("PyPI/a@1").map(|v| v.len()), Some(1));
        let long_ago = Instant::now() - Duration::from_secs(61);
        cache.put("PyPI/b@1".into(), long_ago, vulns(&[]));
        assert!(cache.get("PyPI/b@1").is_none(), "expired");
        // Full: the expired answer makes room.
        cache.put("PyPI/c@1".into(), Instant::now(), vulns(&[]));
        assert!(cache.get("PyPI/a@1").is_some() && cache.get("PyPI/c@1").is_some());
        let off = LookupCache::new(Duration::ZERO, 10);
        off.put("PyPI/a@1".into(), Instant::now(), vulns(&[]));
        assert!(off.get("PyPI/a@1").is_none());
    }
}
