//! Online as the inventory service says.

use super::error::OnlineError;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, join_path, parse_http_url};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

const PROFILE: HttpProfile = HttpProfile::api("inventory", Duration::from_secs(3), 64 * 1024);

/// `GET <baseUrl>/assets/<id>` answers `{"online": true|false}` (other keys
/// are ignored). A 404 means the inventory does not know the asset: a
/// permanent error, not "offline".
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryConfig {
    /// e.g. `https://inventory.internal/api`.
    pub base_url: String,
    /// `timeout` (default `3s`), `maxBodyBytes` (default 64 KiB),
    /// `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
}

/// Asks an inventory service whether the asset is online.
#[derive(Clone, Debug)]
pub struct InventoryProbe {
    http: HttpClient,
    base: Url,
}

impl InventoryProbe {
    pub fn new(config: &InventoryConfig) -> Result<InventoryProbe, ProviderConfigError> {
        Ok(InventoryProbe {
            http: HttpClient::new(&PROFILE, &config.http)?,
            base: parse_http_url(PROFILE.provider, "baseUrl", &config.base_url)?,
        })
    }

    /// `id` is the asset's id in the inventory: one path segment below
    /// `baseUrl` (checked again here, whatever built the target).
    pub async fn check(&self, id: &str) -> Result<bool, OnlineError> {
        assetscan_domain::reference::segment(id)
            .map_err(|e| OnlineError::InvalidTarget(format!("inventoryRef: {e}")))?;
        #[derive(Deserialize)]
        struct Answer {
            online: bool,
        }
        let request = self.http.get(join_path(&self.base, &["assets", id]));
        let answer: Answer = self.http.json(request).await?;
        Ok(answer.online)
    }
}
