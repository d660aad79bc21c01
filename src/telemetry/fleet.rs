//! What the replicas side by side do: the start bound's two gates, the
//! membership, and the sharding.

use super::registered;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The per-replica start bound at work: its gate of runs, and its gate of
/// new objects' labels (`kubernetes::controller::fleet::starts`).
pub struct StartMetrics {
    /// Runs started or resumed.
    pub runs: GateCounters,
    /// New AssetScans labelled with their shard bucket: the start of their
    /// first run, paced like it.
    pub labels: GateCounters,
    /// Live replicas, as this one last heard of them (itself included).
    pub members: Gauge,
}

/// What one gate of the start bound counts.
#[derive(Clone)]
pub struct GateCounters {
    /// Reconciles that took a start.
    pub taken: Counter,
    /// Reconciles that found no start left and look again later.
    pub delayed: Counter,
    /// Starts given back by reconciles that did not use them.
    pub returned: Counter,
}

impl GateCounters {
    /// `<prefix>_total`, `<prefix>_delayed_total` and
    /// `<prefix>_returned_total`, with their help texts in that order.
    fn register(r: &mut Registry, prefix: &str, [taken, delayed, returned]: [&str; 3]) -> Self {
        let mut counter = |suffix: &str, help: &str| {
            registered(r, &format!("{prefix}{suffix}"), help, Counter::default())
        };
        GateCounters {
            taken: counter("", taken),
            delayed: counter("_delayed", delayed),
            returned: counter("_returned", returned),
        }
    }
}

impl StartMetrics {
    pub(super) fn register(r: &mut Registry) -> StartMetrics {
        StartMetrics {
            runs: GateCounters::register(
                r,
                "scan_starts",
                [
                    "Runs started or resumed under the per-replica start bound",
                    "Run starts delayed by the per-replica start bound",
                    "Starts given back: the run was locked by, or ended by, another executor",
                ],
            ),
            labels: GateCounters::register(
                r,
                "label_starts",
                [
                    "New AssetScans labelled with their shard bucket under the per-replica start bound",
                    "Labels of new AssetScans delayed by the per-replica start bound",
                    "Label starts given back: another replica labelled the object, or it was deleted, first",
                ],
            ),
            members: registered(
                r,
                "members",
                "Live replicas sharing the objects, as this one last heard (heartbeats in Redis)",
                Gauge::default(),
            ),
        }
    }
}

/// What the sharding does: the objects a replica holds, labels, and
/// mislabelled objects.
pub struct ShardMetrics {
    /// AssetScans in this replica's watch cache: the objects of its
    /// buckets, what its memory follows.
    pub watched_objects: Gauge,
    /// Objects this replica labelled with their shard bucket.
    pub labelled: Counter,
    /// Objects whose shard label is not a bucket (scanned all the same).
    pub label_invalid: Counter,
}

impl ShardMetrics {
    pub(super) fn register(r: &mut Registry) -> ShardMetrics {
        ShardMetrics {
            watched_objects: registered(
                r,
                "watched_objects",
                "AssetScans in this replica's watch cache (the objects of its shard's buckets)",
                Gauge::default(),
            ),
            labelled: registered(
                r,
                "shard_labelled",
                "AssetScans this replica labelled with their shard bucket",
                Counter::default(),
            ),
            label_invalid: registered(
                r,
                "shard_label_invalid",
                "AssetScans whose shard label is not a bucket (scanned by the owner of their asset's bucket)",
                Counter::default(),
            ),
        }
    }
}
