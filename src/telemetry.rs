//! Logging and metrics, wired once at start-up.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use tracing_subscriber::EnvFilter;

mod replicas;

use crate::store::WatchdogStats;
pub use replicas::ReplicaMetrics;

mod security;
pub use security::{SafeguardLabels, SecurityMetrics};

mod fleet;
pub use fleet::{GateCounters, ShardMetrics, StartMetrics};

/// Log format on stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global tracing subscriber; `RUST_LOG` overrides `default`.
pub fn init_logging(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second call (tests) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Lets one warning through per `every`, and counts the ones held back in
/// between: a failure that repeats for every object (an API server refusing
/// Events, say) is said once a minute with how often, not once per object.
pub struct Throttle {
    every: Duration,
    state: Mutex<ThrottleState>,
}

struct ThrottleState {
    last: Option<Instant>,
    held_back: u64,
}

impl Throttle {
    pub const fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            state: Mutex::new(ThrottleState {
                last: None,
                held_back: 0,
            }),
        }
    }

    /// `Some(n)` if a warning may be logged at `now`, `n` being how many
    /// were held back since the last one; `None` if this one is held back.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let due = state
            .last
            .is_none_or(|last| now.saturating_duration_since(last) >= self.every);
        if due {
            state.last = Some(now);
            Some(std::mem::take(&mut state.held_back))
        } else {
            state.held_back += 1;
            None
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub step: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabels {
    pub channel: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

/// The operator's metrics.
pub struct Metrics {
    pub registry: Registry,
    /// Reconciles by outcome (`finished`, `failed`, `locked`, `superseded`, …).
    pub reconciles: Family<ResultLabels, Counter>,
    /// Reconcile errors by reason (`RedisUnavailable`, `KubernetesApi`, …).
    pub failures: Family<ReasonLabels, Counter>,
    pub step_duration: Family<StepLabels, Histogram>,
    pub step_errors: Family<StepLabels, Counter>,
    /// Writes the store refused because a newer executor owns the run.
    pub stale_writes_rejected: Counter,
    /// Acquisitions that found the asset locked by another holder.
    pub lock_contention: Counter,
    /// Finalizer patches that lost a race with another replica (not
    /// failures: the other replica's patch did the work).
    pub finalizer_races: Counter,
    /// Events the API server did not take (the run goes on without them).
    pub events_unpublished: Counter,
    pub sharding: ShardMetrics,
    pub notifications_sent: Family<ChannelLabels, Counter>,
    pub starts: StartMetrics,
    pub watchdog_renewals: Gauge,
    pub watchdog_losses: Gauge,
    pub locks_held: Gauge,
    pub replicas: ReplicaMetrics,
    pub promise: PromiseMetrics,
    pub security: SecurityMetrics,
    /// The metrics port's access reviews asked of the API server, by
    /// answer (`allowed`, `forbidden`, `unauthenticated`, `error`), and the
    /// requests refused without one because their address spent its
    /// budget (`limited`): a flood of new tokens shows here.
    pub access_reviews: Family<OutcomeLabels, Counter>,
}

/// The help of `assetscan_access_reviews_total`.
const ACCESS_REVIEWS: &str = "Access reviews of the metrics port's callers by outcome, \
    and requests refused without one over their address's budget (limited)";

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered under the `assetscan_` prefix in the order
    /// the fields are listed (which is the order a scrape shows them in).
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("assetscan");
        let step_buckets = || Histogram::new(exponential_buckets(0.005, 2.0, 14));
        let r = &mut registry;
        Metrics {
            reconciles: registered(r, "reconciles", "Reconciles by outcome", Family::default()),
            failures: registered(
                r,
                "reconcile_failures",
                "Reconcile errors by reason",
                Family::default(),
            ),
            step_duration: registered(
                r,
                "step_duration_seconds",
                "Provider call duration per pipeline step",
                Family::new_with_constructor(step_buckets),
            ),
            step_errors: registered(r, "step_errors", "Failed step attempts", Family::default()),
            stale_writes_rejected: registered(
                r,
                "stale_writes_rejected",
                "Writes rejected because a newer executor holds the run",
                Counter::default(),
            ),
            lock_contention: registered(
                r,
                "lock_contention",
                "Acquisitions that found the asset locked",
                Counter::default(),
            ),
            finalizer_races: registered(
                r,
                "finalizer_races",
                "Finalizer patches that lost a race with another replica",
                Counter::default(),
            ),
            events_unpublished: registered(
                r,
                "events_unpublished",
                "Kubernetes Events that could not be published",
                Counter::default(),
            ),
            sharding: ShardMetrics::register(r),
            notifications_sent: registered(
                r,
                "notifications_sent",
                "Notifications delivered per channel",
                Family::default(),
            ),
            starts: StartMetrics::register(r),
            watchdog_renewals: registered(
                r,
                "watchdog_renewals",
                "Lock renewals by the watchdog since start",
                Gauge::default(),
            ),
            watchdog_losses: registered(
                r,
                "watchdog_losses",
                "Locks lost since start (renewal failed or lease deadline passed)",
                Gauge::default(),
            ),
            locks_held: registered(
                r,
                "locks_held",
                "Locks held by this process",
                Gauge::default(),
            ),
            replicas: ReplicaMetrics::register(r),
            promise: PromiseMetrics::register(r),
            security: SecurityMetrics::register(r),
            access_reviews: registered(r, "access_reviews", ACCESS_REVIEWS, Family::default()),
            registry,
        }
    }

    pub fn reconciled(&self, result: &str) {
        self.reconciles
            .get_or_create(&ResultLabels {
                result: result.to_owned(),
            })
            .inc();
    }

    pub fn failed(&self, reason: &str) {
        self.failures
            .get_or_create(&ReasonLabels {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Copies the watchdog's counters into the gauges before a scrape.
    pub fn observe_watchdog(&self, stats: &WatchdogStats, held: usize) {
        self.watchdog_renewals
            .set(stats.renewals.load(Ordering::Relaxed) as i64);
        self.watchdog_losses
            .set(stats.losses.load(Ordering::Relaxed) as i64);
        self.locks_held.set(held as i64);
    }

    /// The text exposition format. The status-derived gauges are computed
    /// first, from the watch cache ([`StatusGauges::computed_by`]).
    pub fn encode(&self) -> String {
        // One scrape at a time: the gauges are reset and set anew for each.
        let _scrape = self
            .promise
            .status
            .scrape
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.promise.status.refresh();
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

// ---------------------------------------------------------------------------
// The promise as numbers: how long a confirmed high risk waits for its
// notification, what the watch cache says is waiting now, and how long
// reconciles take.

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabels {
    /// This replica's shard index (`0` without sharding): a shard's
    /// replicas see the same objects, different shards different ones.
    pub shard: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScanLabels {
    pub shard: String,
    /// The status's phase (a ticket status), or `NONE` before the first run.
    pub phase: String,
    /// `HighRisk`, `NoHighRisk`, `CoverageLow` (no high risk among too few
    /// packages asked about), `Offline` or `NotAssessed`.
    pub verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotAskedLabels {
    pub shard: String,
    /// Why the packages were not asked about (`noPurl`, `noAdvisorySource`,
    /// `unknownDistribution`, `unknownRelease`, …).
    pub reason: String,
}

/// Detection-to-notification buckets, in seconds: fine below a second
/// (0.25 is the bound `make scale` checks the p99 against), then up to an
/// hour, past which the alert on the oldest unnotified risk has long fired.
const NOTIFY_BUCKETS: [f64; 17] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0,
];

/// Reconcile duration buckets, in seconds: a reconcile that waits is a few
/// milliseconds; one that drives a run lasts as long as its provider calls.
const RECONCILE_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The promise as numbers.
pub struct PromiseMetrics {
    /// Seconds from the accepted `HIGH_RISK_FOUND` write to the accepted
    /// `NOTIFIED` write of the same run, per channel notified, from the
    /// ticket's own timestamps (an executor that took the run over measures
    /// from the confirmation the first one recorded).
    pub detection_to_notification: Family<ChannelLabels, Histogram>,
    /// Seconds per reconcile, whatever its outcome.
    pub reconcile_duration: Histogram,
    pub status: StatusGauges,
}

impl PromiseMetrics {
    fn register(r: &mut Registry) -> PromiseMetrics {
        PromiseMetrics {
            detection_to_notification: registered(
                r,
                "detection_to_notification_seconds",
                "Seconds from the accepted HIGH_RISK_FOUND write to the accepted NOTIFIED write of the same run, per channel",
                Family::new_with_constructor(|| Histogram::new(NOTIFY_BUCKETS)),
            ),
            reconcile_duration: registered(
                r,
                "reconcile_duration_seconds",
                "Seconds per reconcile of an AssetScan",
                Histogram::new(RECONCILE_BUCKETS),
            ),
            status: StatusGauges::register(r),
        }
    }

    /// Observes the time to notification of `channel` (in ms).
    pub fn notified(&self, channel: &str, latency_ms: u64) {
        self.detection_to_notification
            .get_or_create(&ChannelLabels {
                channel: channel.to_owned(),
            })
            .observe(latency_ms as f64 / 1000.0);
    }
}

type SecondsGauge = Gauge<f64, AtomicU64>;

/// What sets the status-derived gauges before a scrape.
type ComputeGauges = dyn Fn(&StatusGauges) + Send + Sync;

/// What the watch cache says, computed at each scrape by the function the
/// controller installs ([`StatusGauges::computed_by`]). Every series has the
/// replica's `shard` label, so the alerts can take the `max` over a
/// shard's replicas (which see the same objects) and the `sum` over shards.
pub struct StatusGauges {
    /// AssetScans by phase and verdict.
    pub scans: Family<ScanLabels, Gauge>,
    /// Age in seconds of the oldest high risk confirmed and not notified
    /// yet (0 when there is none).
    pub unnotified_high_risk_age: Family<ShardLabels, SecondsGauge>,
    /// Age in seconds of the oldest AssetScan whose run is due and has not
    /// started (0 when there is none).
    pub overdue_age: Family<ShardLabels, SecondsGauge>,
    /// The number of shards, from each replica: a shard none of whose
    /// replicas is scraped has no series.
    pub shards: Family<ShardLabels, Gauge>,
    /// Packages the last run of each AssetScan did not ask about, summed
    /// by reason.
    pub packages_not_asked: Family<NotAskedLabels, Gauge>,
    compute: OnceLock<Box<ComputeGauges>>,
    scrape: Mutex<()>,
}

impl StatusGauges {
    fn register(r: &mut Registry) -> StatusGauges {
        StatusGauges {
            scans: registered(
                r,
                "scans",
                "AssetScans in this replica's watch cache by phase and verdict",
                Family::default(),
            ),
            unnotified_high_risk_age: registered(
                r,
                "high_risk_unnotified_oldest_age_seconds",
                "Age of the oldest confirmed high risk not notified yet (0: none)",
                Family::default(),
            ),
            overdue_age: registered(
                r,
                "overdue_oldest_age_seconds",
                "Age of the oldest AssetScan whose run is due and has not started (0: none)",
                Family::default(),
            ),
            shards: registered(
                r,
                "shards",
                "The number of shards; the label shard is this replica's",
                Family::default(),
            ),
            packages_not_asked: registered(
                r,
                "packages_not_asked",
                "Packages the AssetScans' last runs listed and did not ask about, by reason",
                Family::default(),
            ),
            compute: OnceLock::new(),
            scrape: Mutex::new(()),
        }
    }

    /// Installs what sets the gauges before each scrape; the first one
    /// installed stays (one controller per process).
    pub fn computed_by(&self, compute: impl Fn(&StatusGauges) + Send + Sync + 'static) -> bool {
        self.compute.set(Box::new(compute)).is_ok()
    }

    fn refresh(&self) {
        if let Some(compute) = self.compute.get() {
            // Phases, verdicts and reasons no longer held drop out.
            self.scans.clear();
            self.packages_not_asked.clear();
            compute(self);
        }
    }
}

/// Registers `metric` and hands it back. Metrics are shared handles: the
/// registry's clone and the returned one count into the same cell, so each
/// metric is named once, where it is registered.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_counters_by_label() {
        let m = Metrics::new();
        m.reconciled("finished");
        m.failed("RedisUnavailable");
        m.stale_writes_rejected.inc();
        let text = m.encode();
        assert!(
            text.contains("assetscan_reconciles_total{result=\"finished\"} 1"),
            "{text}"
        );
        assert!(text.contains("assetscan_reconcile_failures_total{reason=\"RedisUnavailable\"} 1"));
        assert!(text.contains("assetscan_stale_writes_rejected_total 1"));
    }

    #[test]
    fn a_throttle_lets_one_through_per_interval_and_counts_the_rest() {
        let throttle = Throttle::new(Duration::from_secs(60));
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(throttle.admit(at(0)), Some(0), "the first one goes through");
        assert_eq!(throttle.admit(at(1)), None);
        assert_eq!(throttle.admit(at(59)), None);
        assert_eq!(throttle.admit(at(60)), Some(2), "with the two held back");
        assert_eq!(throttle.admit(at(61)), None);
        assert_eq!(throttle.admit(at(200)), Some(1));
        assert_eq!(throttle.admit(at(260)), Some(0), "nothing held back");
    }
}
