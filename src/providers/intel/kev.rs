//! The known-exploited vulnerabilities catalog, in CISA KEV's JSON feed
//! format, fetched from a configured URL and kept in memory.
//!
//! The catalog is refreshed once it is older than `refreshInterval`. If a
//! refresh fails, the last good catalog keeps serving (the failure is
//! logged) and the next attempt waits `retryFailedRefresh`. Only when no
//! catalog was ever loaded does a lookup fail — with a retryable error,
//! since the feed may come back — and each lookup then tries the feed again.

use super::error::IntelError;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpError, HttpProfile, HttpSettings, parse_http_url};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

const PROVIDER: &str = "kev";

const PROFILE: HttpProfile = HttpProfile::api(PROVIDER, Duration::from_secs(30), 16 * 1024 * 1024);

/// `threatIntel.kev` in the config. Every key is optional.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct KevConfig {
    /// Set to false to skip the known-exploited lookup. Default true.
    pub enabled: bool,
    /// Default: CISA's feed,
    /// `https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json`.
    pub url: String,
    /// `timeout` per fetch (default `30s`: the catalog is over 1 MB),
    /// `maxBodyBytes` (default 16 MiB; the 2025 catalog is 1.2 MB),
    /// `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
    /// Age after which the catalog is fetched again. Default `6h`;
    /// CISA updates it a few times a week.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub refresh_interval: Duration,
    /// Wait after a failed refresh before trying again. Default `5m`.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub retry_failed_refresh: Duration,
}

impl Default for KevConfig {
    fn default() -> KevConfig {
        KevConfig {
            enabled: true,
            url: "https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json".to_owned(),
            http: HttpSettings::default(),
            refresh_interval: Duration::from_secs(6 * 3600),
            retry_failed_refresh: Duration::from_secs(300),
        }
    }
}

/// One catalog entry. All 11 keys of the feed are read; all but `cveID` may
/// be missing.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KevEntry {
    #[serde(rename = "cveID")]
    pub cve_id: String,
    #[serde(default)]
    pub vendor_project: String,
    #[serde(default)]
    pub product: String,
    #[serde(default)]
    pub vulnerability_name: String,
    /// `YYYY-MM-DD`.
    #[serde(default)]
    pub date_added: String,
    #[serde(default)]
    pub short_description: String,
    #[serde(default)]
    pub required_action: String,
    /// `YYYY-MM-DD`.
    #[serde(default)]
    pub due_date: String,
    /// `Known` or `Unknown`.
    #[serde(default)]
    pub known_ransomware_campaign_use: String,
    /// URLs separated by ` ; `.
    #[serde(default)]
    pub notes: String,
    #[serde(default)]
    pub cwes: Vec<String>,
}

/// A parsed catalog, indexed by CVE id.
#[derive(Clone, Debug)]
pub struct KevCatalog {
    /// `catalogVersion`, e.g. `2025.08.25`.
    pub version: String,
    /// `dateReleased`.
    pub date_released: String,
    entries: HashMap<String, KevEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Feed {
    catalog_version: String,
    #[serde(default)]
    date_released: String,
    #[serde(default)]
    count: Option<usize>,
    vulnerabilities: Vec<KevEntry>,
}

impl KevCatalog {
    /// Parses the feed's JSON. A `count` that disagrees with the list is
    /// logged, not fatal: the list is what gets used.
    pub fn parse(json: &[u8]) -> Result<KevCatalog, serde_json::Error> {
        let feed: Feed = serde_json::from_slice(json)?;
        if let Some(count) = feed.count.filter(|c| *c != feed.vulnerabilities.len()) {
            tracing::warn!(
                count,
                listed = feed.vulnerabilities.len(),
                "KEV catalog count mismatch"
            );
        }
        let entries = feed
            .vulnerabilities
            .into_iter()
            .map(|e| (e.cve_id.trim().to_ascii_uppercase(), e))
            .collect();
        Ok(KevCatalog {
            version: feed.catalog_version,
            date_released: feed.date_released,
            entries,
        })
    }

    pub fn get(&self, cve: &str) -> Option<&KevEntry> {
        self.entries.get(cve.trim().to_ascii_uppercase().as_str())
    }

    pub fn contains(&self, cve: &str) -> bool {
        self.get(cve).is_some()
    }

    /// Distinct CVEs listed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Fetches and caches the catalog.
#[derive(Debug)]
pub struct KevFeed {
    http: HttpClient,
    url: Url,
    refresh_interval: Duration,
    retry_failed_refresh: Duration,
    state: Mutex<Cached>,
}

#[derive(Debug, Default)]
struct Cached {
    catalog: Option<Arc<KevCatalog>>,
    /// No fetch before this instant; `None` means fetch now.
    next_fetch: Option<Instant>,
}

impl KevFeed {
    pub fn new(config: &KevConfig) -> Result<KevFeed, ProviderConfigError> {
        if config.refresh_interval.is_zero() {
            return Err(ProviderConfigError::invalid(
                PROVIDER,
                "refreshInterval",
                "must be at least 1",
            ));
        }
        Ok(KevFeed {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: parse_http_url(PROVIDER, "url", &config.url)?,
            refresh_interval: config.refresh_interval,
            retry_failed_refresh: config.retry_failed_refresh,
            state: Mutex::new(Cached::default()),
        })
    }

    /// The current catalog, fetching it first when it is due (always, while
    /// none is loaded). Concurrent callers wait for one fetch rather than
    /// each starting their own.
    pub async fn catalog(&self) -> Result<Arc<KevCatalog>, IntelError> {
        let mut cached = self.state.lock().await;
        let fresh = cached.next_fetch.is_some_and(|at| Instant::now() < at);
        if let (Some(catalog), true) = (&cached.catalog, fresh) {
            return Ok(Arc::clone(catalog));
        }
        match self.fetch().await {
            Ok(catalog) => {
                tracing::info!(version = %catalog.version, entries = catalog.len(), "KEV catalog loaded");
                let catalog = Arc::new(catalog);
                cached.catalog = Some(Arc::clone(&catalog));
                cached.next_fetch = Some(Instant::now() + self.refresh_interval);
                Ok(catalog)
            }
            Err(error) => {
                cached.next_fetch = Some(Instant::now() + self.retry_failed_refresh);
                match &cached.catalog {
                    Some(stale) => {
                        tracing::warn!(%error, version = %stale.version, "KEV refresh failed; keeping the last good catalog");
                        Ok(Arc::clone(stale))
                    }
                    None => Err(IntelError::NoCatalog(error)),
                }
            }
        }
    }

    async fn fetch(&self) -> Result<KevCatalog, HttpError> {
        let reply = self
            .http
            .send(self.http.get(self.url.clone()))
            .await?
            .success()?;
        KevCatalog::parse(&reply.body)
            .map_err(|e| reply.malformed("not a KEV catalog", format!("not a KEV catalog: {e}")))
    }
}
