//! The operator end to end: the real controller (kube-runtime, finalizer,
//! fenced status mirror, events) against the Kubernetes API emulator, a real
//! redis-server and the provider stubs with real data.
//!
//! This file: the example AssetScans to their terminal phases, two
//! controllers on the same objects, the status fence, and what the status
//! and Events say of a rescan the minimum interval holds back. Lifecycle (spec
//! changes, suspend, deletion, rescans) is in `controller_lifecycle.rs`,
//! outages and API faults in `controller_faults.rs`, the `run` process and
//! its HTTP endpoints in `controller_process.rs`.

#[path = "../controller_kit/mod.rs"]
mod controller_kit;

use assetscan_operator::domain::RESCAN_ANNOTATION;
use assetscan_operator::domain::ticket::{NotificationState, Status, Ticket};
use assetscan_operator::duration;
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::controller::{StatusMirror, rescan_after};
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::pipeline::{ClaimRecord, Observer};
use assetscan_operator::telemetry::Metrics;
use controller_kit::*;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// `(status, reason)` of a condition.
fn cond(obj: &AssetScan, type_: ConditionType) -> (String, String) {
    let c = obj
        .status
        .as_ref()
        .and_then(|s| type_.find(&s.conditions))
        .unwrap_or_else(|| panic!("{}: condition {type_:?} missing", obj.name_any()));
    (c.status.clone(), c.reason.clone())
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_owned(), reason.to_owned())
}

/// The events.k8s.io Events about one object: (type, reason, note).
async fn events_of(harness: &Harness, name: &str) -> Vec<(String, String, String)> {
    (events_about(&harness.client, NAMESPACE, name)
        .await
        .into_iter())
    .map(|e| {
        assert_eq!(
            e.reporting_controller.as_deref(),
            Some("assetscan-operator")
        );
        (
            e.type_.unwrap_or_default(),
            e.reason.unwrap_or_default(),
            e.note.unwrap_or_default(),
        )
    })
    .collect()
}

mod fence;
mod replicas;
mod rescans;
mod statuses;
