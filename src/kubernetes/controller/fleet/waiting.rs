//! The runs this replica found due and could not start (the start bound
//! delayed them, or a replica that is not live holds their lock), since
//! when: fleet state the reconcile writes and the overdue gauge
//! (`controller::metrics`) reads.

use super::members::Members;
use crate::kubernetes::crd::AssetScan;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// Why a due run could not start, and since when (the first time).
struct Blocked {
    since: Timestamp,
    /// The replica (member id) that held the run's lock, when that was why.
    holder: Option<String>,
}

/// The objects whose run this replica found due and could not start. An
/// entry goes with the next reconcile of its object that does not find it
/// so, or with the object.
#[derive(Default)]
pub struct Waiting {
    since: Mutex<HashMap<ObjectRef<AssetScan>, Blocked>>,
}

impl Waiting {
    /// The run of `obj` is due and could not start now (the start bound).
    pub fn blocked(&self, obj: &AssetScan) {
        self.found(obj, None);
    }

    /// The run of `obj` could not start: replica `holder` holds its lock.
    /// Overdue only while that replica is not live.
    pub fn held_by(&self, obj: &AssetScan, holder: &str) {
        self.found(obj, Some(holder.to_owned()));
    }

    fn found(&self, obj: &AssetScan, holder: Option<String>) {
        self.lock()
            .entry(ObjectRef::from_obj(obj))
            .and_modify(|blocked| blocked.holder.clone_from(&holder))
            .or_insert_with(|| Blocked {
                since: Timestamp::now(),
                holder,
            });
    }

    /// The run of `obj` started, or is not due.
    pub fn cleared(&self, obj: &AssetScan) {
        self.lock().remove(&ObjectRef::from_obj(obj));
    }

    /// The oldest entry among the objects in `present` that is not held by
    /// a live replica; entries of objects no longer cached are dropped.
    pub(in crate::kubernetes::controller) fn oldest(
        &self,
        present: &HashSet<ObjectRef<AssetScan>>,
        members: &Members,
    ) -> Option<Timestamp> {
        let mut since = self.lock();
        since.retain(|key, _| present.contains(key));
        (since.values())
            .filter(|b| b.holder.as_deref().is_none_or(|h| !members.is_live(h)))
            .map(|b| b.since)
            .min()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectRef<AssetScan>, Blocked>> {
        self.since.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::shard::Shard;
    use prometheus_client::metrics::gauge::Gauge;
    use std::time::Duration;

    fn object(name: &str) -> AssetScan {
        let spec = serde_json::json!({"assetId": name, "target": {}});
        let mut obj = AssetScan::new(name, serde_json::from_value(spec).unwrap());
        obj.metadata.namespace = Some("ns".into());
        obj
    }

    #[test]
    fn a_run_found_locked_waits_until_cleared_or_gone() {
        let members = Members::new(
            Shard::ALL,
            "me#1".into(),
            Duration::from_secs(3),
            Gauge::default(),
        );
        let waiting = Waiting::default();
        let obj = object("a");
        let here = || HashSet::from([ObjectRef::from_obj(&obj)]);
        waiting.blocked(&obj);
        let first = waiting.oldest(&here(), &members);
        assert!(first.is_some());
        waiting.blocked(&obj);
        assert_eq!(
            waiting.oldest(&here(), &members),
            first,
            "since the first time"
        );
        waiting.cleared(&obj);
        assert_eq!(waiting.oldest(&here(), &members), None);
        // Held by a replica that is not live (no heartbeat heard): overdue.
        waiting.held_by(&obj, "gone#2");
        assert!(waiting.oldest(&here(), &members).is_some());
        // Held by a live replica (here, this one): running, not overdue.
        waiting.held_by(&obj, "me#1");
        assert_eq!(waiting.oldest(&here(), &members), None);
        waiting.blocked(&obj);
        assert_eq!(
            waiting.oldest(&HashSet::new(), &members),
            None,
            "no longer cached"
        );
        assert!(waiting.lock().is_empty(), "and forgotten");
    }
}
