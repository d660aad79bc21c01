//! Scored OSV records, kept so that a record unchanged since the last scan
//! is not fetched and scored again.

use super::record::Scored;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Scored records by id, valid while `modified` is unchanged.
#[derive(Debug)]
pub(super) struct RecordCache {
    capacity: usize,
    entries: Mutex<HashMap<String, (String, Arc<Scored>)>>,
}

impl RecordCache {
    pub(super) fn new(capacity: usize) -> RecordCache {
        RecordCache {
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn get(&self, id: &str, modified: Option<&str>) -> Option<Arc<Scored>> {
        let modified = modified?;
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(id)
            .filter(|(m, _)| m == modified)
            .map(|(_, scored)| Arc::clone(scored))
    }

    /// Without a `modified` stamp there is nothing to validate against, so
    /// nothing is cached.
    pub(super) fn put(&self, id: &str, modified: Option<&str>, scored: Arc<Scored>) {
        let (Some(modified), true) = (modified, self.capacity > 0) else {
            return;
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(id) {
            entries.clear();
        }
        entries.insert(id.to_owned(), (modified.to_owned(), scored));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::ticket::Severity;

    #[test]
    fn cache_is_keyed_by_modified() {
        let cache = RecordCache::new(1);
        let scored = || {
            Arc::new(Scored {
                cves: vec![],
                cvss: None,
                severity: Severity::Unknown,
                summary: String::new(),
            })
        };
        cache.put("A", Some("m1"), scored());
        assert!(cache.get("A", Some("m1")).is_some());
        assert!(cache.get("A", Some("m2")).is_none());
        assert!(cache.get("A", None).is_none());
        cache.put("B", Some("m1"), scored()); // over capacity: starts over
        assert!(cache.get("A", Some("m1")).is_none());
        assert!(cache.get("B", Some("m1")).is_some());
        RecordCache::new(0).put("C", Some("m"), scored());
    }
}
