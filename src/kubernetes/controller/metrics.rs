//! The controller's metrics computed at each scrape, registered by
//! [`install`] when the controller starts (`run`), beside the rooms: the
//! status-derived gauges, what the watch cache says about the promise
//! at the moment of a scrape. AssetScans by phase and verdict, the oldest
//! confirmed high risk not notified yet, and the oldest AssetScan whose run
//! is due and has not started.
//!
//! They are computed from the cache (this replica's shard's objects) when
//! `/metrics` is scraped, not kept up to date on every watch event: a scrape
//! costs one pass over the cached objects, and nothing is counted twice or
//! missed when an event is. Each series carries the replica's shard, so the
//! alerts take the `max` over a shard's replicas (they watch the same
//! objects) and the `sum` (counts) or `max` (ages) over shards.
//!
//! An AssetScan's run is overdue when it is due and has not started:
//! - as its status tells: no run yet (due since its creation), or the next
//!   scan's time has passed (due since then);
//! - as this replica found it ([`Waiting`]): its run could not be started
//!   or continued because the start bound delayed it, or because another
//!   replica holds its lock and that replica is gone from the live
//!   membership ([`Members`]), since the first time that happened. A run
//!   whose lock a live replica holds is running there: not overdue. A
//!   replica that stopped while holding runs shows here on the replicas
//!   that find its locks once its heartbeat lapsed, until one of them takes
//!   the runs over after the lock's ttl.
//!
//! A shard none of whose replicas is scraped has no series at all: the
//! alerts notice that by `assetscan_shards` (see docs/operations.md, "Monitoring").

use super::fleet::members::Members;
use super::fleet::waiting::Waiting;
use super::reconcile::request::due_since;
use super::status::conditions::ConditionType;
use crate::kubernetes::crd::AssetScan;
use crate::telemetry::{Metrics, NotAskedLabels, ScanLabels, ShardLabels, StatusGauges};
use assetscan_domain::Alert;
use assetscan_domain::shard::Shard;
use assetscan_domain::ticket::Status;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// What one pass over the cached objects found.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    /// `(phase, verdict)` → AssetScans.
    pub scans: BTreeMap<(&'static str, &'static str), i64>,
    /// When the oldest high risk not notified yet was confirmed.
    pub unnotified_since: Option<Timestamp>,
    /// Since when the oldest overdue run is due (by the statuses alone).
    pub overdue_since: Option<Timestamp>,
    /// Packages the last runs did not ask about, by reason.
    pub not_asked: BTreeMap<String, i64>,
}

impl Summary {
    /// Takes in one object, at `now`.
    pub fn add(&mut self, obj: &AssetScan, now: Timestamp) {
        *self.scans.entry((phase(obj), verdict(obj))).or_default() += 1;
        let coverage = obj.status.as_ref().and_then(|s| s.coverage.as_ref());
        for (reason, count) in coverage.into_iter().flat_map(|c| &c.not_asked) {
            *self.not_asked.entry(reason.clone()).or_default() += i64::from(*count);
        }
        earliest(&mut self.unnotified_since, unnotified_since(obj));
        earliest(&mut self.overdue_since, due_since(obj, now));
    }
}

fn earliest(slot: &mut Option<Timestamp>, candidate: Option<Timestamp>) {
    if let Some(at) = candidate {
        *slot = Some(slot.map_or(at, |old| old.min(at)));
    }
}

/// Sets the gauges from the cache at each scrape.
pub fn install(
    metrics: &Metrics,
    store: Store<AssetScan>,
    waiting: Arc<Waiting>,
    shard: Shard,
    members: Arc<Members>,
) {
    metrics.promise.status.computed_by(move |gauges| {
        let now = Timestamp::now();
        let mut summary = Summary::default();
        let mut present = HashSet::new();
        for obj in store.state() {
            summary.add(&obj, now);
            present.insert(ObjectRef::from_obj(&*obj));
        }
        earliest(
            &mut summary.overdue_since,
            waiting.oldest(&present, &members),
        );
        set(gauges, shard, &summary, now);
    });
}

fn set(gauges: &StatusGauges, shard: Shard, summary: &Summary, now: Timestamp) {
    let index = shard.index().to_string();
    for (&(phase, verdict), &count) in &summary.scans {
        let labels = ScanLabels {
            shard: index.clone(),
            phase: phase.to_owned(),
            verdict: verdict.to_owned(),
        };
        gauges.scans.get_or_create(&labels).set(count);
    }
    for (reason, &count) in &summary.not_asked {
        let labels = NotAskedLabels {
            shard: index.clone(),
            reason: reason.clone(),
        };
        gauges.packages_not_asked.get_or_create(&labels).set(count);
    }
    let labels = ShardLabels { shard: index };
    let age = |since: Option<Timestamp>| {
        since.map_or(0.0, |at| now.duration_since(at).as_secs_f64().max(0.0))
    };
    gauges
        .unnotified_high_risk_age
        .get_or_create(&labels)
        .set(age(summary.unnotified_since));
    gauges
        .overdue_age
        .get_or_create(&labels)
        .set(age(summary.overdue_since));
    gauges
        .shards
        .get_or_create(&labels)
        .set(i64::from(shard.count()));
}

/// The `phase` label: the status's, or `NONE` before the first run.
fn phase(obj: &AssetScan) -> &'static str {
    obj.status
        .as_ref()
        .and_then(|s| s.phase)
        .map_or("NONE", Status::as_str)
}

/// The `verdict` label, from the status's verdict and its `HighRisk`
/// condition (which says when the asset was offline). No high risk among
/// too few packages asked about is `CoverageLow`, never `NoHighRisk`.
fn verdict(obj: &AssetScan) -> &'static str {
    let Some(status) = obj.status.as_ref() else {
        return "NotAssessed";
    };
    let coverage_low = status.coverage.as_ref().is_some_and(|c| c.low);
    match status.high_risk {
        Some(true) => "HighRisk",
        Some(false) if coverage_low => "CoverageLow",
        Some(false) => "NoHighRisk",
        None if ConditionType::HighRisk
            .find(&status.conditions)
            .is_some_and(|c| c.reason == "AssetOffline") =>
        {
            "Offline"
        }
        None => "NotAssessed",
    }
}

/// When the high risk of the object's run was confirmed, while it is not
/// notified: the `HighRisk` condition turned `True` at the confirmation
/// (the status takes its time from the ticket).
fn unnotified_since(obj: &AssetScan) -> Option<Timestamp> {
    if obj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = obj.status.as_ref()?;
    let waiting = matches!(
        status.phase.and_then(Status::alert),
        Some(Alert::Confirmed | Alert::Sending)
    );
    let risk = ConditionType::HighRisk.find(&status.conditions)?;
    (waiting && risk.status == "True").then_some(risk.last_transition_time.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::crd::AssetScanStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::json;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    /// An object created at second 0, with `status` (JSON) if given.
    fn object(name: &str, status: Option<serde_json::Value>) -> AssetScan {
        let spec = serde_json::json!({"assetId": name, "target": {}, "rescanInterval": "1h"});
        let mut obj = AssetScan::new(name, serde_json::from_value(spec).unwrap());
        obj.metadata.namespace = Some("ns".into());
        obj.metadata.uid = Some("1234abcd-5678".into());
        obj.metadata.generation = Some(1);
        obj.metadata.creation_timestamp = Some(Time(at(0)));
        obj.status = status.map(|s| serde_json::from_value::<AssetScanStatus>(s).unwrap());
        obj
    }

    fn high_risk_since(secs: i64) -> Condition {
        Condition {
            type_: "HighRisk".into(),
            status: "True".into(),
            reason: "HighRiskFound".into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(at(secs)),
        }
    }

    fn run_status(phase: &str, high_risk: Option<bool>) -> serde_json::Value {
        serde_json::json!({
            "phase": phase, "run": "1234abcd-g1-s0", "fencingToken": 1, "revision": 1,
            "observedGeneration": 1, "highRisk": high_risk,
        })
    }

    /// A status whose run asked about 1 of 4 packages listed.
    fn coverage_low(mut status: serde_json::Value) -> serde_json::Value {
        status["coverage"] = json!({"summary": "25% (1/4)", "listed": 4, "asked": 1,
            "minimum": 50, "low": true, "notAsked": {"noPurl": 1, "unknownRelease": 2}});
        status
    }

    fn summary(objects: &[AssetScan], now: i64) -> Summary {
        let mut summary = Summary::default();
        for obj in objects {
            summary.add(obj, at(now));
        }
        summary
    }

    #[test]
    fn scans_are_counted_by_phase_and_verdict() {
        let mut notifying = object("a", Some(run_status("NOTIFYING", Some(true))));
        notifying.status.as_mut().unwrap().conditions = vec![high_risk_since(50)];
        let objects = [
            object("new", None),
            notifying,
            object("b", Some(run_status("FINISHED", Some(false)))),
            object("c", Some(run_status("FINISHED", Some(false)))),
            object("d", Some(coverage_low(run_status("FINISHED", Some(false))))),
            object("e", Some(coverage_low(run_status("NOTIFYING", Some(true))))),
        ];
        let s = summary(&objects, 100);
        assert_eq!(
            s.scans,
            BTreeMap::from([
                (("FINISHED", "CoverageLow"), 1),
                (("FINISHED", "NoHighRisk"), 2),
                (("NONE", "NotAssessed"), 1),
                (("NOTIFYING", "HighRisk"), 2),
            ])
        );
        let not_asked =
            BTreeMap::from([("noPurl".to_owned(), 2), ("unknownRelease".to_owned(), 4)]);
        assert_eq!(s.not_asked, not_asked);
        assert_eq!(s.unnotified_since, Some(at(50)));
    }

    #[test]
    fn a_high_risk_waits_until_notified_or_deleted() {
        for (phase, waits) in [
            ("HIGH_RISK_FOUND", true),
            ("NOTIFYING", true),
            ("NOTIFIED", false),
            ("FINISHED", false),
        ] {
            let mut obj = object("a", Some(run_status(phase, Some(true))));
            obj.status.as_mut().unwrap().conditions = vec![high_risk_since(10)];
            assert_eq!(
                summary(std::slice::from_ref(&obj), 100).unnotified_since,
                waits.then_some(at(10)),
                "{phase}"
            );
            obj.metadata.deletion_timestamp = Some(Time(at(20)));
            assert_eq!(summary(&[obj], 100).unnotified_since, None, "{phase}");
        }
    }

    #[test]
    fn a_run_is_overdue_from_its_due_time_until_it_starts() {
        // Never run: due since its creation.
        assert_eq!(
            summary(&[object("new", None)], 100).overdue_since,
            Some(at(0))
        );
        // A finished run's next scan: overdue once its time has passed.
        let mut done = run_status("FINISHED", Some(false));
        done["nextScanTime"] = serde_json::json!("1970-01-01T00:01:00Z");
        let done = object("a", Some(done));
        assert_eq!(summary(std::slice::from_ref(&done), 30).overdue_since, None);
        assert_eq!(
            summary(std::slice::from_ref(&done), 90).overdue_since,
            Some(at(60))
        );
        // A run in progress has started.
        let running = object("b", Some(run_status("VULN_CHECK_DONE", None)));
        assert_eq!(summary(&[running], 100).overdue_since, None);
        // Suspended: nothing is due.
        let mut suspended = object("new", None);
        suspended.spec.suspend = true;
        assert_eq!(summary(&[suspended], 100).overdue_since, None);
    }
}
