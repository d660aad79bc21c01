//! The pipeline's outside world: is the asset online, what vulnerabilities
//! does it have, which of them are exploited, whom to tell.
//!
//! One folder per step (`online/`, `vulns/`, `intel/`, `notify/`), each with
//! its configuration, its error type and a dispatch over its providers;
//! shared helpers (`http/`, `secret`, `cve`, `error`) are leaves that import
//! no step. This module sits on top: the whole `providers` section of the
//! configuration, every provider built from it, and (in `effects.rs`) the
//! pipeline's `Effects` over them.
//!
//! Every provider follows the same pattern: a config struct read from the
//! operator's YAML (camelCase keys, unknown keys rejected, defaults for
//! everything that has a sensible one), a constructor that validates it and
//! loads its secrets, and an async call that returns a typed result or a
//! typed error whose `is_retryable()` tells the step runner whether to try
//! again. All HTTP goes through [`http`]: one settings type
//! ([`HttpSettings`]: `timeout`, `maxBodyBytes`, `bearerTokenFrom`), per-call
//! timeouts, bodies read with a size cap, one failure classification, URLs
//! redacted in errors.

mod cve;
mod effects;
pub mod egress;
mod error;
pub mod http;
pub mod intel;
pub mod notify;
pub mod online;
pub mod pace;
pub mod sbom;
pub mod secret;
pub mod vulns;

pub use error::ProviderConfigError;
pub use http::{HttpError, HttpSettings, install_crypto_provider};
pub use secret::{Secret, SecretError, SecretFrom};

use assetscan_domain::Origin;
use intel::{ThreatIntel, ThreatIntelConfig};
use notify::{ChannelObjects, Notifier, NotifierConfig, notifiers_from_config};
use online::{OnlineConfig, OnlineProbe};
use sbom::{SbomSourceConfig, SbomSources};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use vulns::{VulnSource, VulnSourceConfig};

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
#[derive(Clone, Debug, Deserialize, JsonSchema)]
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
    /// SBOM sources by name, for AssetScans that name their software by
    /// reference (`spec.sbom`); empty means none can.
    #[serde(default)]
    pub sbom_sources: BTreeMap<String, SbomSourceConfig>,
}

/// Every provider, built and validated. Implements the pipeline's
/// `Effects` (in `effects.rs`).
#[derive(Debug)]
pub struct Providers {
    pub online: OnlineProbe,
    pub vulnerabilities: VulnSource,
    pub threat_intel: ThreatIntel,
    pub notifiers: BTreeMap<String, Notifier>,
    /// The channels defined as objects (a team's, the cluster's), kept
    /// current by the Kubernetes side; a run looks in its own namespace's
    /// first, then the cluster's, then the configured ones.
    pub channel_objects: Arc<ChannelObjects>,
    pub sbom_sources: SbomSources,
    /// Each provider's bucket of the start bound, when paced.
    pace: Option<pace::Pace>,
}

impl Providers {
    pub fn from_config(config: &ProvidersConfig) -> Result<Providers, ProviderConfigError> {
        Ok(Providers {
            online: OnlineProbe::from_config(&config.online)?,
            vulnerabilities: VulnSource::from_config(&config.vulnerabilities)?,
            threat_intel: ThreatIntel::from_config(&config.threat_intel)?,
            notifiers: notifiers_from_config(&config.notifications)?,
            channel_objects: Arc::default(),
            sbom_sources: SbomSources::from_config(&config.sbom_sources)?,
            pace: None,
        })
    }

    /// Each provider called at most at `quota`, the start bound's (see
    /// [`pace`]).
    pub fn paced(mut self, quota: governor::Quota) -> Providers {
        self.pace = Some(pace::Pace::new(quota, self.notifiers.keys()));
        self
    }

    /// Waits until `provider` may be called for the object `origin` names,
    /// when paced.
    async fn until_ready(&self, provider: pace::Provider<'_>, origin: Option<&Origin>) {
        if let Some(pace) = &self.pace {
            let namespace = origin.map_or("", |o| o.namespace.as_str());
            pace.until_ready(provider, namespace).await;
        }
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
        let config: ProvidersConfig = crate::yaml::from_str(yaml).unwrap();
        let providers = Providers::from_config(&config).unwrap();
        assert!(providers.notifiers.is_empty());
        assert!(
            crate::yaml::from_str::<ProvidersConfig>("{vulnerabilities: {kind: osv}, extra: 1}")
                .is_err()
        );
        let bad_duration = "{vulnerabilities: {kind: osv, timeout: 15}}";
        assert!(crate::yaml::from_str::<ProvidersConfig>(bad_duration).is_err());
    }

    #[test]
    fn osv_config_rejects_bad_values() {
        let bad: VulnSourceConfig = crate::yaml::from_str("{kind: osv, concurrency: 0}").unwrap();
        let err = VulnSource::from_config(&bad).unwrap_err();
        assert!(err.to_string().contains("concurrency"), "{err}");
        assert!(crate::yaml::from_str::<VulnSourceConfig>("{kind: osv, concurrancy: 2}").is_err());
    }

    #[test]
    fn every_http_section_takes_the_shared_keys_and_refuses_others() {
        let shared = "timeout: 2s, maxBodyBytes: 2048, bearerTokenFrom: {env: TOKEN}";
        let osv = "vulnerabilities: {kind: osv";
        for (head, tail) in [
            ("online: {inventory: {baseUrl: 'http://i'", "}}"),
            (osv, "}"),
            ("vulnerabilities: {kind: generic, url: 'http://g'", "}"),
            ("threatIntel: {kev: {", "}}"),
            ("threatIntel: {epss: {", "}}"),
            (
                "notifications: {a: {kind: webhook, urlFrom: {env: U}, secretFrom: {env: S}",
                "}}",
            ),
            ("notifications: {a: {kind: wecom, keyFrom: {env: K}", "}}"),
            ("notifications: {a: {kind: slack, urlFrom: {env: U}", "}}"),
        ] {
            let base = if head.starts_with("vulnerabilities") {
                String::new()
            } else {
                format!("{osv}}}\n")
            };
            let sep = if head.ends_with('{') { "" } else { ", " };
            let good = format!("{base}{head}{sep}{shared}{tail}");
            crate::yaml::from_str::<ProvidersConfig>(&good)
                .unwrap_or_else(|e| panic!("{good}: {e}"));
            let typo = format!("{base}{head}{sep}{shared}, timeuot: 1s{tail}");
            assert!(
                crate::yaml::from_str::<ProvidersConfig>(&typo).is_err(),
                "{typo}"
            );
        }
        let config: ProvidersConfig = crate::yaml::from_str(&format!("{osv}, {shared}}}")).unwrap();
        let VulnSourceConfig::Osv(osv) = config.vulnerabilities else {
            panic!("osv");
        };
        assert_eq!(
            osv.http,
            HttpSettings {
                timeout: Some(std::time::Duration::from_secs(2)),
                max_body_bytes: Some(2048),
                bearer_token_from: Some(SecretFrom::Env("TOKEN".into())),
                egress: None,
            }
        );
    }
}
