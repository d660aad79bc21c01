//! Threat-intel enrichment: which of the asset's CVEs are known to be
//! exploited (KEV) and how likely exploitation is (EPSS).

mod epss;
mod error;
mod kev;

pub use epss::{EpssClient, EpssConfig, EpssScore};
pub use error::IntelError;
pub use kev::{KevCatalog, KevConfig, KevEntry, KevFeed};

use crate::providers::error::ProviderConfigError;
use assetscan_domain::ticket::{ThreatIntelFacts, VulnFacts};
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeSet;

/// `threatIntel:` in the config.
///
/// ```yaml
/// threatIntel:
///   kev: {url: https://…/known_exploited_vulnerabilities.json, refreshInterval: 6h}
///   epss: {baseUrl: https://api.first.org/data/v1}
/// ```
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreatIntelConfig {
    pub kev: KevConfig,
    pub epss: EpssConfig,
}

/// The configured threat-intel sources; either may be switched off.
#[derive(Debug)]
pub struct ThreatIntel {
    kev: Option<KevFeed>,
    epss: Option<EpssClient>,
}

impl ThreatIntel {
    pub fn from_config(config: &ThreatIntelConfig) -> Result<ThreatIntel, ProviderConfigError> {
        Ok(ThreatIntel {
            kev: config
                .kev
                .enabled
                .then(|| KevFeed::new(&config.kev))
                .transpose()?,
            epss: config
                .epss
                .enabled
                .then(|| EpssClient::new(&config.epss))
                .transpose()?,
        })
    }

    /// Looks up every CVE of the findings (also those cut from the facts'
    /// bounded `findings` list). Both sources are asked at the same time.
    pub async fn enrich(&self, vulns: &VulnFacts) -> Result<ThreatIntelFacts, IntelError> {
        let cves = cves_of(vulns);
        if cves.is_empty() {
            return Ok(ThreatIntelFacts::default());
        }
        let kev = async {
            match &self.kev {
                Some(feed) => feed.catalog().await.map(Some),
                None => Ok(None),
            }
        };
        let epss = async {
            match &self.epss {
                Some(client) => client.scores(&cves).await.map_err(IntelError::Epss),
                None => Ok(Default::default()),
            }
        };
        let (catalog, scores) = tokio::try_join!(kev, epss)?;
        Ok(ThreatIntelFacts {
            known_exploited: catalog
                .as_ref()
                .map(|c| cves.iter().filter(|cve| c.contains(cve)).cloned().collect())
                .unwrap_or_default(),
            epss: scores.into_iter().map(|(cve, s)| (cve, s.epss)).collect(),
            catalog_version: catalog.map(|c| c.version.clone()),
            ..ThreatIntelFacts::default()
        })
    }
}

/// The facts' CVE list together with the CVEs of the listed findings (facts
/// written by other code may leave the list empty), sorted and deduplicated.
fn cves_of(vulns: &VulnFacts) -> Vec<String> {
    vulns
        .cves
        .iter()
        .chain(vulns.findings.iter().flat_map(|f| &f.cves))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}
