//! The vulnerability step: the configured source (OSV or a generic
//! endpoint), one query for the asset's packages.

mod error;
mod findings;
mod generic;
mod osv;

pub use error::VulnError;
pub use generic::{GenericVulnClient, GenericVulnConfig};
pub use osv::{OsvClient, OsvConfig};

use crate::providers::error::ProviderConfigError;
use assetscan_domain::ticket::VulnFacts;
use assetscan_domain::{Package, Triage};
use schemars::JsonSchema;
use serde::Deserialize;

/// `vulnerabilities:` in the config, by `kind`.
///
/// ```yaml
/// vulnerabilities:
///   kind: osv             # or: generic
///   baseUrl: https://api.osv.dev
/// ```
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum VulnSourceConfig {
    Osv(OsvConfig),
    Generic(GenericVulnConfig),
}

/// The configured vulnerability source.
#[derive(Debug)]
pub enum VulnSource {
    Osv(OsvClient),
    Generic(GenericVulnClient),
}

impl VulnSource {
    pub fn from_config(config: &VulnSourceConfig) -> Result<VulnSource, ProviderConfigError> {
        Ok(match config {
            VulnSourceConfig::Osv(c) => VulnSource::Osv(OsvClient::new(c)?),
            VulnSourceConfig::Generic(c) => VulnSource::Generic(GenericVulnClient::new(c)?),
        })
    }

    /// The vulnerabilities of `software`, the findings `triage` covers set
    /// apart.
    pub async fn query(
        &self,
        asset_id: &str,
        software: &[Package],
        triage: &Triage,
    ) -> Result<VulnFacts, VulnError> {
        match self {
            VulnSource::Osv(osv) => osv.query(software, triage).await,
            VulnSource::Generic(generic) => generic.query(asset_id, software, triage).await,
        }
    }
}
