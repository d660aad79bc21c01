//! What the metrics cost at scale: one scrape of `/metrics` (the
//! status-derived gauges computed from a watch cache of N AssetScans, then
//! everything encoded) timed, and its size. A command that prints numbers,
//! not a test: `make metrics-cost` (N = 10 000), or
//! `cargo run --release --example metrics_cost -- 50000`.
//!
//! The cache holds AssetScans as a replica's does after a first round:
//! most finished clean and due again later, some with a high risk (a few
//! still waiting for their notification), some in progress; every
//! histogram and counter family has the children a busy replica has.

use assetscan_operator::domain::shard::Shard;
use assetscan_operator::kubernetes::controller::{Members, Waiting, install_status_gauges};
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::telemetry::Metrics;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SCRAPES: usize = 30;

fn main() {
    let count = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => 10_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("usage: metrics_cost [OBJECTS]: {e}");
            std::process::exit(2);
        }
    };
    let metrics = Metrics::new();
    let mut writer = Writer::<AssetScan>::default();
    let now = Timestamp::now();
    for i in 0..count {
        writer.apply_watcher_event(&Event::Apply(object(i, now)));
    }
    install_status_gauges(
        &metrics,
        writer.as_reader(),
        Arc::new(Waiting::default()),
        Shard::ALL,
        // No membership: no lock holder is live but this process.
        Arc::new(Members::new(
            Shard::ALL,
            "metrics-cost".into(),
            std::time::Duration::ZERO,
            Default::default(),
        )),
    );
    busy(&metrics);
    let mut times = Vec::with_capacity(SCRAPES);
    let mut text = String::new();
    for _ in 0..SCRAPES {
        let started = Instant::now();
        text = metrics.encode();
        times.push(started.elapsed());
    }
    times.sort();
    let series = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("metrics cost at {count} AssetScans ({SCRAPES} scrapes, one replica, no sharding)");
    println!(
        "  scrape time   p50 {:.2} ms   max {:.2} ms",
        ms(times[SCRAPES / 2]),
        ms(times[SCRAPES - 1])
    );
    println!("  scrape size   {} bytes, {series} series", text.len());
    let status_series = text
        .lines()
        .filter(|l| {
            [
                "assetscan_scans{",
                "assetscan_shards{",
                "_oldest_age_seconds{",
            ]
            .iter()
            .any(|m| l.contains(m))
        })
        .count();
    println!(
        "  of which status-derived gauges: {status_series} series (bounded: no object in a label)"
    );
}

/// AssetScan `i` of the cache: 90 % finished clean, 5 % finished with a
/// high risk, 2 % waiting for their notification, 3 % in progress.
fn object(i: usize, now: Timestamp) -> AssetScan {
    let name = format!("asset-{i:05}");
    let spec = json!({
        "assetId": format!("{name}.dc1.example.com"),
        "target": {"inventoryRef": format!("{name}.dc1.example.com")},
        "notify": ["secops-webhook"],
        "rescanInterval": "6h",
    });
    let mut obj = AssetScan::new(
        &name,
        serde_json::from_value(spec).unwrap_or_else(|e| panic!("{e}")),
    );
    obj.metadata.namespace = Some("secops".into());
    obj.metadata.uid = Some(format!("{i:08x}-0000-0000-0000-000000000000"));
    obj.metadata.generation = Some(1);
    let (phase, high_risk) = match i % 100 {
        0..90 => ("FINISHED", Some(false)),
        90..95 => ("FINISHED", Some(true)),
        95..97 => ("NOTIFYING", Some(true)),
        _ => ("VULN_CHECK_DONE", None),
    };
    let at = |secs: i64| (now + SignedDuration::from_secs(secs)).to_string();
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "observedGeneration": 1, "lastTransitionTime": at(-600)})
    };
    let status = json!({
        "phase": phase,
        "run": format!("{i:08x}-g1-s0"),
        "ticketId": format!("{name}.dc1.example.com/{i:08x}-g1-s0"),
        "fencingToken": 3, "revision": 8, "observedGeneration": 1,
        "highRisk": high_risk,
        "completedSteps": ["online_check", "vuln_query"],
        "nextScanTime": at(3600),
        "lastScanTime": at(-600),
        "conditions": [
            condition("Ready", "True", "Finished"),
            condition("Reconciling", "False", "Finished"),
            condition("Stalled", "False", "Finished"),
            condition("HighRisk", if high_risk == Some(true) { "True" } else { "False" }, "HighRiskFound"),
        ],
    });
    obj.status = Some(serde_json::from_value(status).unwrap_or_else(|e| panic!("{e}")));
    obj
}

/// Every labelled family with the children a busy replica has.
fn busy(metrics: &Metrics) {
    for result in [
        "finished",
        "failed",
        "locked",
        "superseded",
        "notify_deferred",
        "up_to_date",
    ] {
        metrics.reconciled(result);
    }
    for reason in ["RedisUnavailable", "KubernetesApi"] {
        metrics.failed(reason);
    }
    for step in ["online_check", "vuln_query", "threat_intel", "notify"] {
        let labels = assetscan_operator::telemetry::StepLabels { step: step.into() };
        metrics.step_duration.get_or_create(&labels).observe(0.05);
        metrics.step_errors.get_or_create(&labels).inc();
    }
    for channel in ["secops-webhook", "secops-wecom", "secops-slack"] {
        metrics.promise.notified(channel, 120);
    }
    metrics.promise.reconcile_duration.observe(0.02);
}
