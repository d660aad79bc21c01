//! The pipeline's outside world: is the asset online, what vulnerabilities
//! does it have, which of them are exploited, whom to tell.
//!
//! Every provider follows the same pattern: a config struct read from the
//! operator's YAML (camelCase keys, unknown keys rejected, defaults for
//! everything that has a sensible one), a constructor that validates it and
//! loads its secrets, and an async call that returns a typed result or a
//! typed error whose `is_retryable()` tells the step runner whether to try
//! again. All HTTP goes through [`http`]: per-call timeouts, bodies read
//! with a size cap, one failure classification, URLs redacted in errors.

mod effects;
pub mod epss;
pub mod generic;
pub mod http;
pub mod intel;
pub mod kev;
pub mod notify;
pub mod online;
pub mod osv;
pub mod risk;
pub mod secret;
pub mod slack;
mod text;
pub mod vulns;
pub mod webhook;
pub mod wecom;

pub use http::HttpError;
pub use intel::{IntelError, ThreatIntel, ThreatIntelConfig};
pub use notify::{Notification, Notifier, NotifierConfig, NotifyError};
pub use online::{OnlineConfig, OnlineError, OnlineProbe};
pub use risk::{assess, needs_threat_intel};
pub use secret::{Secret, SecretError, SecretFrom};
pub use vulns::{VulnError, VulnSource, VulnSourceConfig};

use serde::Deserialize;
use std::collections::BTreeMap;

/// reqwest is built without a default TLS crypto provider; install ring's,
/// process-wide. Harmless when one is installed already (by an earlier call
/// or by another library).
pub fn install_crypto_provider() {
    // `Err` only says a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A provider's configuration is unusable. Names the provider and the
/// config key; never contains a secret.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{provider}: {field}: {reason}")]
    Invalid {
        provider: &'static str,
        field: &'static str,
        reason: String,
    },
    #[error("{provider}: {field}: {source}")]
    Secret {
        provider: &'static str,
        field: &'static str,
        source: SecretError,
    },
    #[error("{provider}: cannot build the HTTP client: {reason}")]
    HttpClient {
        provider: &'static str,
        reason: String,
    },
}

impl ConfigError {
    pub(crate) fn invalid(
        provider: &'static str,
        field: &'static str,
        reason: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            provider,
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn secret(
        provider: &'static str,
        field: &'static str,
        source: SecretError,
    ) -> ConfigError {
        ConfigError::Secret {
            provider,
            field,
            source,
        }
    }
}

/// All providers' configuration, as one section of the operator's config.
/// Durations are strings (`500ms`, `10s`, `6h`). Risk thresholds and the
/// threat-intel policy are per asset, in the AssetScan's `spec.policy`.
///
/// ```yaml
/// online:
///   tcp: {timeout: 3s}
///   inventory: {baseUrl: https://inventory.internal/api}
/// vulnerabilities: {kind: osv, baseUrl: https://api.osv.dev, maxFindings: 50}
/// threatIntel:
///   kev: {refreshInterval: 6h}
///   epss: {enabled: true}
/// notifications:
///   sec-slack: {kind: slack, urlFrom: {env: SLACK_WEBHOOK_URL}}
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvidersConfig {
    #[serde(default)]
    pub online: OnlineConfig,
    pub vulnerabilities: VulnSourceConfig,
    #[serde(default)]
    pub threat_intel: ThreatIntelConfig,
    /// Channels by name; empty means nobody is told.
    #[serde(default)]
    pub notifications: BTreeMap<String, NotifierConfig>,
}

/// Every provider, built and validated. Implements the pipeline's
/// `Effects` (in `effects.rs`).
#[derive(Debug)]
pub struct Providers {
    pub online: OnlineProbe,
    pub vulnerabilities: VulnSource,
    pub threat_intel: ThreatIntel,
    pub notifiers: BTreeMap<String, Notifier>,
}

impl Providers {
    pub fn from_config(config: &ProvidersConfig) -> Result<Providers, ConfigError> {
        Ok(Providers {
            online: OnlineProbe::from_config(&config.online)?,
            vulnerabilities: VulnSource::from_config(&config.vulnerabilities)?,
            threat_intel: ThreatIntel::from_config(&config.threat_intel)?,
            notifiers: notify::notifiers_from_config(&config.notifications)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_section_parses_and_builds() {
        let yaml = r#"
online: {inventory: {baseUrl: "http://127.0.0.1:9/api", timeout: 2s}}
vulnerabilities: {kind: osv, baseUrl: "http://127.0.0.1:9", concurrency: 4}
threatIntel:
  kev: {url: "http://127.0.0.1:9/kev.json", refreshInterval: 1h}
  epss: {enabled: false}
"#;
        let config: ProvidersConfig = serde_yaml::from_str(yaml).unwrap();
        let providers = Providers::from_config(&config).unwrap();
        assert!(providers.notifiers.is_empty());
        assert!(
            serde_yaml::from_str::<ProvidersConfig>("{vulnerabilities: {kind: osv}, extra: 1}")
                .is_err()
        );
        let bad_duration = "{vulnerabilities: {kind: osv, timeout: 15}}";
        assert!(serde_yaml::from_str::<ProvidersConfig>(bad_duration).is_err());
    }

    #[test]
    fn osv_config_rejects_bad_values() {
        let bad: VulnSourceConfig = serde_yaml::from_str("{kind: osv, concurrency: 0}").unwrap();
        let err = VulnSource::from_config(&bad).unwrap_err();
        assert!(err.to_string().contains("concurrency"), "{err}");
        assert!(serde_yaml::from_str::<VulnSourceConfig>("{kind: osv, concurrancy: 2}").is_err());
    }
}
