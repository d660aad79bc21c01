//! The controller's sections of the configuration file: how the status
//! follows a run (`status`), how fast runs start (`scanStarts`), what a run
//! leaves in the API server (`reports`, `events`). Only the controller reads
//! them; the CLI reads the file and hands them over in
//! [`super::ControllerSettings`]. The chart's values schema is generated
//! from the same types, so the doc comments of their fields are what a user
//! reads there.

use schemars::JsonSchema;
use serde::Deserialize;
use std::num::NonZeroU32;
use std::time::Duration;

/// What a run leaves in the API server: its AssetScanReport, bounded so
/// that the operator's bytes in etcd per asset do not grow with the
/// findings.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ReportsSection {
    /// The most bytes of an AssetScanReport's spec, as JSON (the chart asks
    /// for at least 512). Past it, the lowest EPSS scores, then the least
    /// severe findings, then known-exploited CVEs, then reasons are left
    /// out, each counted in the report; the run's ticket keeps them all for
    /// `tickets.retention`.
    #[schemars(range(min = 512))]
    pub max_bytes: usize,
}

impl Default for ReportsSection {
    /// 1 536 bytes: about six findings beside a notification's receipt;
    /// with the object's status, one report stays under 6 KB per asset.
    fn default() -> Self {
        ReportsSection { max_bytes: 1536 }
    }
}

/// Which runs announce their end with an Event.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EventsSection {
    /// A `Normal` `ScanComplete` Event for every run that ends without a
    /// high risk, too. Off by default: such a run is in the status
    /// (`Ready`, `lastScanTime`) and its report, and an Event for each
    /// would be one more write per scan and about 1 KB per asset in etcd
    /// until it expires. Runs that end with a high risk or fail always get
    /// one (`HighRiskFound`, `ScanFailed`).
    pub scan_complete: bool,
}

/// The channels defined as objects: the teams' NotificationChannels and
/// the platform's ClusterNotificationChannels.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TeamChannelsSection {
    /// Watch NotificationChannels and, when every namespace is watched,
    /// ClusterNotificationChannels, and read the Secrets they name (`get`,
    /// by name). Off: no channel object exists, and the operator needs no
    /// access to Secrets.
    pub enabled: bool,
    /// Every channel is built again this often: a Secret created, fixed
    /// or rotated is taken within it, and the `Delivered` condition
    /// follows the deliveries at this pace (below `1s` counts as `1s`).
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub resync_interval: Duration,
}

impl Default for TeamChannelsSection {
    fn default() -> Self {
        TeamChannelsSection {
            enabled: true,
            resync_interval: Duration::from_secs(60),
        }
    }
}

/// How the AssetScan's status follows a run.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StatusSection {
    /// A run's claim and its end are always written to the status; a step
    /// in between only once this long has passed since the status was last
    /// written (a slow run shows its progress, a fast one costs two
    /// writes). `0s`: every step.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub progress_every: Duration,
}

impl Default for StatusSection {
    fn default() -> Self {
        StatusSection {
            progress_every: Duration::from_secs(5),
        }
    }
}

/// How fast runs start, per replica, and how rescans spread over their
/// interval: what keeps a first round of many AssetScans, or every replica
/// restarting at once, from calling the providers and the API server for
/// every object in the same second.
///
/// A run whose steps succeed at once makes one request to each provider it
/// needs (the inventory, the vulnerability source's batch query, EPSS, each
/// notified channel; the KEV catalog is cached), so no provider sees more
/// requests than runs start. More only for retries, EPSS lookups of more
/// than `maxCvesPerRequest` CVEs, and OSV records not cached yet.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScanStartsSection {
    /// Runs started (or resumed) per second, sustained: a reconcile about to
    /// claim or continue a run takes one start, or waits for one.
    #[schemars(range(min = 1))]
    pub per_second: u32,
    /// Starts that may go at once after a quiet spell. Any one second sees
    /// at most `burst + perSecond` starts.
    #[schemars(range(min = 1))]
    pub burst: u32,
    /// A finished run's next scan is due `rescanInterval` after it ended,
    /// plus up to this fraction of the interval (0 to 1): each AssetScan's
    /// own share, derived from its uid, so that AssetScans that finished
    /// together are not all due again together.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub rescan_spread: f64,
    /// The least time between a run's end and the run a new value of the
    /// rescan annotation asks for: changing it again and again starts a run
    /// at most this often per AssetScan. `0s`: at every change.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub rescan_min_interval: Duration,
    /// Replicas heartbeat in Redis every third of this; one whose heartbeat
    /// lapsed this long ago has left the membership, and the runs it
    /// preferred move to the others. `0s`: no membership, every replica
    /// reconciles every object.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub membership_ttl: Duration,
    /// A run due this long that its preferred replica has not started is
    /// started by any replica: the safety net of the shares.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub takeover_after: Duration,
}

impl Default for ScanStartsSection {
    /// 20 starts per second per replica, 20 at once. A run costs the API
    /// server about four requests (a GET before its claim, two status
    /// patches, its report; with a high risk a third patch and an Event;
    /// the label and finalizer patch on an object's first run): about 80
    /// per second per replica, sustained. Each
    /// provider sees at most 40 requests from a replica in any second, 20
    /// per second sustained. 100 000 AssetScans get their first round from
    /// two replicas in about 42 minutes, and their 6-hour rescans need 4.6
    /// starts per second. Rescans spread over a tenth of their interval
    /// (36 minutes of a 6-hour interval).
    fn default() -> Self {
        ScanStartsSection {
            per_second: 20,
            burst: 20,
            rescan_spread: 0.1,
            rescan_min_interval: Duration::from_secs(30),
            membership_ttl: Duration::from_secs(10),
            takeover_after: Duration::from_secs(300),
        }
    }
}

/// A start bound the controller cannot apply; names the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScanStartsError {
    /// No start per second would start no run, ever.
    #[error("scanStarts.perSecond must be at least 1")]
    NoRate,
    /// A bucket of no start would never let one through.
    #[error("scanStarts.burst must be at least 1")]
    NoBurst,
    /// The spread is a fraction of the rescan interval.
    #[error("scanStarts.rescanSpread must be between 0 and 1")]
    Spread,
}

impl ScanStartsSection {
    /// The rules the types cannot state.
    pub fn check(&self) -> Result<(), ScanStartsError> {
        if self.per_second == 0 {
            return Err(ScanStartsError::NoRate);
        }
        if self.burst == 0 {
            return Err(ScanStartsError::NoBurst);
        }
        if !(0.0..=1.0).contains(&self.rescan_spread) {
            return Err(ScanStartsError::Spread);
        }
        Ok(())
    }

    /// The bound as a GCRA quota: `perSecond` per second, `burst` at once
    /// ([`ScanStartsSection::check`] refuses zeros; one stands in for them
    /// here).
    pub fn quota(&self) -> governor::Quota {
        let per_second = NonZeroU32::new(self.per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(self.burst).unwrap_or(NonZeroU32::MIN);
        governor::Quota::per_second(per_second).allow_burst(burst)
    }

    /// The most starts any one second sees, on one replica.
    pub fn peak_per_second(&self) -> u64 {
        u64::from(self.burst) + u64::from(self.per_second)
    }
}
