//! The operator's configuration file (YAML): Redis, the lock, step timeouts
//! and retries, how fast runs start, providers and notification channels. `examples/config.yaml`
//! is a complete, commented example; docs/configuration.md documents every key.

use crate::kubernetes::channel_access::ChannelAccess;
use crate::pipeline::StepPolicies;
use crate::providers::ProvidersConfig;
use crate::store::{ReplicaAck, StoreConfig};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub redis: RedisSection,
    #[serde(default)]
    pub lock: LockSection,
    #[serde(default)]
    pub tickets: TicketsSection,
    #[serde(default)]
    pub steps: StepPolicies,
    pub providers: ProvidersConfig,
    #[serde(default)]
    pub status: StatusSection,
    #[serde(default)]
    pub scan_starts: ScanStartsSection,
    #[serde(default)]
    pub reports: ReportsSection,
    #[serde(default)]
    pub events: EventsSection,
    /// Which namespaces may use each notification channel (see
    /// [`crate::kubernetes::channel_access`]); a channel not listed is
    /// open to the watched namespace alone, or to none when all are watched.
    #[serde(default)]
    pub channel_access: BTreeMap<String, ChannelAccess>,
}

/// What a run leaves in the API server: its AssetScanReport, bounded so
/// that the operator's bytes in etcd per asset do not grow with the
/// findings (docs/scaling.md, "What the operator keeps in etcd").
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ReportsSection {
    /// The most bytes of a report's content (its `spec`, as JSON). Past
    /// it, the lowest EPSS scores, then the least severe findings, then
    /// known-exploited CVEs, then reasons are left out, each counted in
    /// the report (`omitted`, `epssOmitted`, `knownExploitedOmitted`,
    /// `reasonsOmitted`); the run's ticket keeps them all for
    /// `tickets.retention` (`assetscan-operator ticket show`).
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
#[derive(Clone, Debug, Default, Deserialize)]
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

/// How the AssetScan's status follows a run.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StatusSection {
    /// A run's claim and its end are always written to the status; a step
    /// in between only once this long has passed since the status was last
    /// written (a slow run shows its progress, a fast one costs two
    /// writes). `0s`: every step.
    #[serde(deserialize_with = "crate::duration::config")]
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
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ScanStartsSection {
    /// Runs started (or resumed) per second, sustained: a reconcile about to
    /// claim or continue a run takes one start, or waits for one.
    pub per_second: u32,
    /// Starts that may go at once after a quiet spell. Any one second sees
    /// at most `burst + perSecond` starts.
    pub burst: u32,
    /// A finished run's next scan is due `rescanInterval` after it ended,
    /// plus up to this fraction of the interval (0 to 1): each AssetScan's
    /// own share, derived from its uid, so that AssetScans that finished
    /// together are not all due again together.
    pub rescan_spread: f64,
    /// The least time between a run's end and the run a new value of the
    /// rescan annotation asks for: changing it again and again starts a run
    /// at most this often per AssetScan. `0s`: at every change.
    #[serde(deserialize_with = "crate::duration::config")]
    pub rescan_min_interval: Duration,
    /// Replicas heartbeat in Redis every third of this; one whose heartbeat
    /// lapsed this long ago has left the membership, and the runs it
    /// preferred move to the others (see the controller's `share` module).
    /// `0s`: no membership, every replica reconciles every object.
    #[serde(deserialize_with = "crate::duration::config")]
    pub membership_ttl: Duration,
    /// A run due this long that its preferred replica has not started is
    /// started by any replica: the safety net of the shares.
    #[serde(deserialize_with = "crate::duration::config")]
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

impl ScanStartsSection {
    /// The bound as a GCRA quota: `perSecond` per second, `burst` at once
    /// (the config refuses zeros; one stands in for them here).
    pub fn quota(&self) -> governor::Quota {
        let per_second =
            std::num::NonZeroU32::new(self.per_second).unwrap_or(std::num::NonZeroU32::MIN);
        let burst = std::num::NonZeroU32::new(self.burst).unwrap_or(std::num::NonZeroU32::MIN);
        governor::Quota::per_second(per_second).allow_burst(burst)
    }

    /// The most starts any one second sees, on one replica.
    pub fn peak_per_second(&self) -> u64 {
        u64::from(self.burst) + u64::from(self.per_second)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RedisSection {
    /// `redis://host:6379/0`, `rediss://…` (TLS),
    /// `redis+sentinel://host:26379,…/<master>` or `cluster:url1,url2,…`.
    /// `--redis-url` / `REDIS_URL` take precedence. Put a password in the
    /// environment variable rather than in this file.
    pub url: Option<String>,
    /// Key prefix.
    pub prefix: String,
    /// Bound on connecting and on each Redis reply.
    #[serde(deserialize_with = "crate::duration::config")]
    pub timeout: Duration,
    /// Whether the writes around a notification (its intent, its receipts)
    /// wait until a replica has them before the run acts on them.
    pub replica_ack: ReplicaAck,
    /// Behind Sentinel: how long a command whose master went away keeps
    /// asking the sentinels for the new master and resending.
    #[serde(deserialize_with = "crate::duration::config")]
    pub failover_wait: Duration,
    /// The bridge to the previous release's key layout (see
    /// [`StoreConfig::identity_bridge`]): on until no replica of the
    /// previous release runs.
    pub identity_bridge: bool,
}

impl Default for RedisSection {
    fn default() -> Self {
        let store = StoreConfig::default();
        RedisSection {
            url: None,
            prefix: store.prefix,
            timeout: store.timeout,
            replica_ack: store.replica_ack,
            failover_wait: store.failover_wait,
            identity_bridge: store.identity_bridge,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LockSection {
    /// Lock time to live; renewed every third of it while the run works.
    #[serde(deserialize_with = "crate::duration::config")]
    pub ttl: Duration,
}

impl Default for LockSection {
    fn default() -> Self {
        LockSection {
            ttl: Duration::from_secs(30),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TicketsSection {
    /// How long a finished or failed ticket is kept (`0s`: until its
    /// AssetScan is deleted).
    #[serde(deserialize_with = "crate::duration::config")]
    pub retention: Duration,
    /// How long a ticket that is not finished is kept after its last write
    /// (a run nobody drives any more: its object was deleted while an
    /// executor was paused), and how long a deleted AssetScan's tombstone
    /// refuses late executors.
    #[serde(deserialize_with = "crate::duration::config")]
    pub abandon_after: Duration,
    /// Approximate number of records kept in each asset's audit stream.
    pub audit_cap: u32,
}

impl Default for TicketsSection {
    fn default() -> Self {
        TicketsSection {
            retention: Duration::from_secs(7 * 24 * 3600),
            abandon_after: Duration::from_secs(24 * 3600),
            audit_cap: 1000,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: crate::yaml::YamlError,
    },
    #[error("config file {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Parses and checks the values the types cannot.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = crate::yaml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |reason: String| ConfigError::Invalid {
            path: path.to_owned(),
            reason,
        };
        if config.lock.ttl < Duration::from_millis(300) {
            return Err(invalid("lock.ttl must be at least 300ms".into()));
        }
        for (name, step) in [
            ("onlineCheck", &config.steps.online_check),
            ("vulnQuery", &config.steps.vuln_query),
            ("threatIntel", &config.steps.threat_intel),
            ("notify", &config.steps.notify),
        ] {
            if step.max_attempts == 0 {
                return Err(invalid(format!(
                    "steps.{name}.maxAttempts must be at least 1"
                )));
            }
            if step.timeout.is_zero() {
                return Err(invalid(format!("steps.{name}.timeout must be positive")));
            }
        }
        if config.tickets.abandon_after < Duration::from_secs(1) {
            return Err(invalid("tickets.abandonAfter must be at least 1s".into()));
        }
        if config.redis.prefix.is_empty() || config.redis.prefix.contains(['{', '}', ' ']) {
            return Err(invalid(
                "redis.prefix must be non-empty, without braces or spaces".into(),
            ));
        }
        let ack = &config.redis.replica_ack;
        if ack
            .timeout
            .is_some_and(|t| t.is_zero() || t >= config.redis.timeout)
        {
            return Err(invalid(
                "redis.replicaAck.timeout must be positive and below redis.timeout (other commands queue behind the wait)".into(),
            ));
        }
        let starts = &config.scan_starts;
        if starts.per_second == 0 {
            return Err(invalid("scanStarts.perSecond must be at least 1".into()));
        }
        if starts.burst == 0 {
            return Err(invalid("scanStarts.burst must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&starts.rescan_spread) {
            return Err(invalid(
                "scanStarts.rescanSpread must be between 0 and 1".into(),
            ));
        }
        Ok(config)
    }

    pub fn store(&self) -> StoreConfig {
        StoreConfig {
            prefix: self.redis.prefix.clone(),
            lock_ttl: self.lock.ttl,
            audit_cap: self.tickets.audit_cap,
            terminal_retention: self.tickets.retention,
            abandon_after: self.tickets.abandon_after,
            timeout: self.redis.timeout,
            replica_ack: self.redis.replica_ack,
            failover_wait: self.redis.failover_wait,
            identity_bridge: self.redis.identity_bridge,
            // Credentials and TLS files come from the command line
            // (environment), never from this file.
            security: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_config_parses() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config.yaml"));
        let config = Config::load(path).unwrap();
        assert_eq!(config.redis.prefix, "asc");
        assert!(config.lock.ttl >= Duration::from_secs(1));
    }

    #[test]
    fn bad_values_are_named() {
        let path = Path::new("test.yaml");
        let base = "providers: {vulnerabilities: {kind: osv}}\n";
        let err = Config::parse(&format!("{base}lock: {{ttl: 10ms}}"), path).unwrap_err();
        assert!(err.to_string().contains("lock.ttl"), "{err}");
        let err = Config::parse(
            &format!("{base}steps: {{notify: {{maxAttempts: 0}}}}"),
            path,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("steps.notify.maxAttempts"),
            "{err}"
        );
        for (section, key) in [
            ("{perSecond: 0}", "scanStarts.perSecond"),
            ("{burst: 0}", "scanStarts.burst"),
            ("{rescanSpread: 1.5}", "scanStarts.rescanSpread"),
            ("{rescanSpread: -0.1}", "scanStarts.rescanSpread"),
        ] {
            let err = Config::parse(&format!("{base}scanStarts: {section}"), path).unwrap_err();
            assert!(err.to_string().contains(key), "{section}: {err}");
        }
        for ack in ["{timeout: 0s}", "{timeout: 5s}", "{mode: sometimes}"] {
            let err =
                Config::parse(&format!("{base}redis: {{replicaAck: {ack}}}"), path).unwrap_err();
            assert!(
                err.to_string().contains("replicaAck") || err.to_string().contains("sometimes"),
                "{ack}: {err}"
            );
        }
        let err = Config::parse(&format!("{base}lokc: {{}}"), path).unwrap_err();
        assert!(err.to_string().contains("lokc"), "{err}");
        // A YAML error names the line and column, and quotes no line of
        // the file (a Redis URL may hold a password).
        let text = format!("{base}redis: {{url: 'redis://:hunter2@r:6379'}}\nlock: {{ttl: 10x}}");
        let err = Config::parse(&text, path).unwrap_err().to_string();
        assert!(
            err.starts_with("config file test.yaml: line 3 column 13: invalid duration"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
        assert!(Config::parse(base, path).is_ok());
    }
}
