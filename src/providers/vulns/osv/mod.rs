//! Vulnerabilities from an OSV-format API (<https://osv.dev>, or a mirror).
//!
//! `POST /v1/querybatch` finds which vulnerability ids affect the asset's
//! packages (only `id` and `modified` come back; a query without hits comes
//! back as `{}`), pages with `next_page_token` (re-sending only the queries
//! that carried one), then `GET /v1/vulns/{id}` fetches each distinct record,
//! a few at a time, to score it ([`record`]). Scored records are kept by id
//! and `modified` ([`cache`]), so an unchanged record is fetched once; the
//! answer for each package is kept for `lookupWindow` ([`lookups`]), so the
//! same package on many assets is asked about once per window.

mod batch;
mod cache;
mod lookups;
mod record;

use super::error::VulnError;
use super::findings::summarize;
use crate::providers::error::{ProviderConfigError, check_at_least};
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, join_path, parse_http_url};
use assetscan_domain::Package;
use assetscan_domain::Triage;
use assetscan_domain::ticket::{Finding, VulnFacts};
use batch::{BatchRequest, BatchResponse, Query};
use cache::RecordCache;
use futures::stream::{self, StreamExt, TryStreamExt};
use lookups::{LookupCache, Vulns};
use record::{OsvRecord, Scored, score};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROVIDER: &str = "osv";

const PROFILE: HttpProfile = HttpProfile::api(PROVIDER, Duration::from_secs(15), 4 * 1024 * 1024);

/// `vulnerabilities: {kind: osv, ...}`. Every key is optional.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct OsvConfig {
    /// Default `https://api.osv.dev`.
    pub base_url: String,
    /// `timeout` per HTTP call (default `15s`), `maxBodyBytes` for each
    /// answer, a batch or a record (default 4 MiB), `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
    /// Records fetched in parallel. Default 8.
    pub concurrency: usize,
    /// Findings kept in the facts, most severe first; counts cover all.
    /// Default 50.
    pub max_findings: usize,
    /// Queries per `querybatch` call (OSV accepts at most 1000). Default 1000.
    pub batch_size: usize,
    /// Pages per batch before giving up. Default 20.
    pub max_pages: u32,
    /// Scored records kept in memory by id + `modified`; 0 disables. When
    /// full, the cache starts over. Default 10000.
    pub cache_capacity: usize,
    /// How long the answer for a package (which ids affect it) is reused
    /// by every asset's run: `0s` asks for each run. Default `10m`.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub lookup_window: Duration,
    /// Packages whose answer is kept; when full, expired answers go first,
    /// then all. Default 50000.
    pub lookup_capacity: usize,
}

impl Default for OsvConfig {
    fn default() -> OsvConfig {
        OsvConfig {
            base_url: "https://api.osv.dev".to_owned(),
            http: HttpSettings::default(),
            concurrency: 8,
            max_findings: 50,
            batch_size: 1000,
            max_pages: 20,
            cache_capacity: 10_000,
            lookup_window: Duration::from_secs(600),
            lookup_capacity: 50_000,
        }
    }
}

/// OSV API client.
#[derive(Debug)]
pub struct OsvClient {
    http: HttpClient,
    base: Url,
    concurrency: usize,
    max_findings: usize,
    batch_size: usize,
    max_pages: u32,
    cache: RecordCache,
    lookups: LookupCache,
}

impl OsvClient {
    pub fn new(config: &OsvConfig) -> Result<OsvClient, ProviderConfigError> {
        let in_range = |field, value: usize, max: usize| {
            if (1..=max).contains(&value) {
                Ok(value)
            } else {
                Err(ProviderConfigError::invalid(
                    PROVIDER,
                    field,
                    format!("{value} is outside 1..={max}"),
                ))
            }
        };
        let max_pages = check_at_least(PROVIDER, "maxPages", config.max_pages, 1)?;
        Ok(OsvClient {
            http: HttpClient::new(&PROFILE, &config.http)?,
            base: parse_http_url(PROVIDER, "baseUrl", &config.base_url)?,
            concurrency: in_range("concurrency", config.concurrency, 64)?,
            max_findings: config.max_findings,
            batch_size: in_range("batchSize", config.batch_size, 1000)?,
            max_pages,
            cache: RecordCache::new(config.cache_capacity),
            lookups: LookupCache::new(config.lookup_window, config.lookup_capacity),
        })
    }

    /// The asset's vulnerabilities, judged with `triage`. An empty software
    /// list is an empty result, without a call.
    pub async fn query(
        &self,
        software: &[Package],
        triage: &Triage,
    ) -> Result<VulnFacts, VulnError> {
        let hits = self.find_hits(software).await?;
        let findings: Vec<Finding> = stream::iter(hits)
            .map(|(id, hit)| self.finding(id, hit))
            .buffer_unordered(self.concurrency)
            .try_collect()
            .await?;
        Ok(summarize(findings, self.max_findings, triage))
    }

    /// Distinct vulnerability ids over all packages, with the packages each
    /// one matched: from the answers of the window, and for the other
    /// packages from `querybatch`, whose answers are kept for the window.
    async fn find_hits(&self, software: &[Package]) -> Result<BTreeMap<String, Hit>, VulnError> {
        let mut hits: BTreeMap<String, Hit> = BTreeMap::new();
        let mut unknown = Vec::new();
        for package in software {
            match self.lookups.get(&package.to_string()) {
                Some(vulns) => add_hits(&mut hits, package, &vulns),
                None => unknown.push(package),
            }
        }
        for batch in unknown.chunks(self.batch_size) {
            let asked = Instant::now();
            for (package, vulns) in batch.iter().zip(self.ask(batch).await?) {
                add_hits(&mut hits, package, &vulns);
                self.lookups.put(package.to_string(), asked, vulns);
            }
        }
        Ok(hits)
    }

    /// One batch's answers, one per package in order, every page read.
    async fn ask(&self, batch: &[&Package]) -> Result<Vec<Vulns>, VulnError> {
        let url = join_path(&self.base, &["v1", "querybatch"]);
        let mut found: Vec<Vec<(String, Option<String>)>> = vec![Vec::new(); batch.len()];
        // Queries still to send: the package's index, its page token.
        let mut pending: Vec<(usize, Option<String>)> =
            (0..batch.len()).map(|i| (i, None)).collect();
        let mut pages = 0;
        while !pending.is_empty() {
            pages += 1;
            if pages > self.max_pages {
                return Err(VulnError::TooManyPages {
                    provider: PROVIDER,
                    pages: self.max_pages,
                });
            }
            let request = BatchRequest {
                queries: pending
                    .iter()
                    .map(|(i, token)| Query::new(batch[*i], token.as_deref()))
                    .collect(),
            };
            let reply = self
                .http
                .send(self.http.post(url.clone()).json(&request))
                .await?
                .success()?;
            let response: BatchResponse = reply.json()?;
            if response.results.len() != pending.len() {
                let reason = format!(
                    "{} results for {} queries",
                    response.results.len(),
                    pending.len()
                );
                return Err(reply.malformed("not one result per query", reason).into());
            }
            let mut next = Vec::new();
            for ((i, _), result) in pending.into_iter().zip(response.results) {
                found[i].extend(result.vulns.into_iter().map(|v| (v.id, v.modified)));
                if let Some(token) = result.next_page_token.filter(|t| !t.is_empty()) {
                    next.push((i, Some(token)));
                }
            }
            pending = next;
        }
        Ok(found.into_iter().map(Vulns::from).collect())
    }

    async fn finding(&self, id: String, hit: Hit) -> Result<Finding, VulnError> {
        let scored = match self.cache.get(&id, hit.modified.as_deref()) {
            Some(scored) => scored,
            None => {
                let scored = Arc::new(self.fetch_scored(&id).await?);
                self.cache
                    .put(&id, hit.modified.as_deref(), Arc::clone(&scored));
                scored
            }
        };
        Ok(Finding {
            id,
            cves: scored.cves.clone(),
            package: hit.packages.into_iter().collect::<Vec<_>>().join(", "),
            cvss: scored.cvss,
            severity: scored.severity,
            summary: scored.summary.clone(),
        })
    }

    async fn fetch_scored(&self, id: &str) -> Result<Scored, VulnError> {
        let url = join_path(&self.base, &["v1", "vulns", id]);
        let reply = self.http.send(self.http.get(url)).await?.success()?;
        let record: OsvRecord = reply.json()?;
        if record.id != id {
            return Err(reply
                .malformed(
                    "another record than the one asked for",
                    format!("asked for {id}, got {}", record.id),
                )
                .into());
        }
        Ok(score(&record))
    }
}

/// Records that `package` is affected by each of `vulns`.
fn add_hits(hits: &mut BTreeMap<String, Hit>, package: &Package, vulns: &Vulns) {
    for (id, modified) in vulns.iter() {
        let hit = hits.entry(id.clone()).or_default();
        hit.packages.insert(package.to_string());
        hit.modified.clone_from(modified);
    }
}

#[derive(Default)]
struct Hit {
    modified: Option<String>,
    packages: BTreeSet<String>,
}
