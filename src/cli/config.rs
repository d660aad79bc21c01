//! The operator's configuration file (YAML), assembled from the sections
//! each layer owns: the store's (`redis`, `lock`, `tickets`), the
//! pipeline's (`steps`), the providers' (`providers`) and the controller's
//! (`status`, `scanStarts`, `reports`, `events`, `channelAccess`,
//! `teamChannels`). Each
//! layer states its keys, their defaults and the rules its types cannot;
//! this file only puts them side by side, reads the file and names it in
//! errors. `examples/config.yaml` is a complete, commented example;
//! docs/configuration.md documents every key; the chart's values schema is
//! generated from [`Config`] (`make chart-schema`).

use crate::kubernetes::channel_access::{ChannelAccess, ChannelPolicy};
use crate::kubernetes::controller::TeamChannelSettings;
use crate::kubernetes::controller::settings::{
    EventsSection, ReportsSection, ScanStartsError, ScanStartsSection, StatusSection,
    TeamChannelsSection,
};
use crate::pipeline::{StepPolicies, StepSettingsError};
use crate::providers::{Providers, ProvidersConfig};
use crate::store::{LockSection, RedisSection, StoreConfig, StoreSettingsError, TicketsSection};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tracing::warn;

/// The operator's configuration file (examples/config.yaml format). Unknown
/// keys are errors; secrets are never written here, each `…From` key names
/// an environment variable (`{env: NAME}`) or a file (`{file: /path}`).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
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
    /// Which namespaces may use each notification channel. A channel not
    /// listed: no namespace when all are watched, the watched namespace
    /// when one is.
    #[serde(default)]
    pub channel_access: BTreeMap<String, ChannelAccess>,
    /// The channels teams define in their namespaces (NotificationChannel).
    #[serde(default)]
    pub team_channels: TeamChannelsSection,
}

impl Config {
    /// `channelAccess` against the configured channels and the watched
    /// namespace, with a warning for every channel open to all namespaces, and
    /// for every channel no namespace may use.
    pub fn channel_policy(&self, watched: Option<&str>) -> Result<ChannelPolicy, String> {
        let policy = ChannelPolicy::new(
            &self.channel_access,
            self.providers.notifications.keys(),
            watched,
        )
        .map_err(|e| e.to_string())?;
        for channel in policy.open_to_all() {
            warn!(
                channel,
                "channel open to all namespaces (channelAccess allNamespaces): any AssetScan anywhere may raise alerts on it"
            );
        }
        for channel in policy.closed() {
            warn!(
                channel,
                "channel open to no namespace: list the namespaces that may use it in channelAccess"
            );
        }
        Ok(policy)
    }

    /// The teams' channels, over `providers`' registry, when enabled.
    pub fn team_channel_settings(
        &self,
        providers: &Providers,
    ) -> Result<Option<TeamChannelSettings>, String> {
        let egress = &self.providers.online.tcp.egress;
        TeamChannelSettings::new(&self.team_channels, providers, egress).map_err(|e| e.to_string())
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
    #[error("config file {path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: InvalidSetting,
    },
}

/// A value its section's type accepts and its layer refuses, as that layer
/// says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSetting {
    #[error(transparent)]
    Store(#[from] StoreSettingsError),
    #[error(transparent)]
    Steps(#[from] StepSettingsError),
    #[error(transparent)]
    ScanStarts(#[from] ScanStartsError),
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Parses, then asks each layer to check its sections.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = crate::yaml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        config.check().map_err(|source| ConfigError::Invalid {
            path: path.to_owned(),
            source,
        })?;
        Ok(config)
    }

    fn check(&self) -> Result<(), InvalidSetting> {
        self.lock.check()?;
        self.steps.check()?;
        self.tickets.check()?;
        self.redis.check()?;
        self.scan_starts.check()?;
        Ok(())
    }

    /// The store's settings; credentials and TLS files come from the
    /// command line (the environment), never from this file.
    pub fn store(&self) -> StoreConfig {
        StoreConfig::from_sections(&self.redis, &self.lock, &self.tickets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
