//! Vulnerabilities from an OSV-format API (<https://osv.dev>, or a mirror).
//!
//! `POST /v1/querybatch` finds which vulnerability ids affect the asset's
//! packages (only `id` and `modified` come back; a query without hits comes
//! back as `{}`), pages with `next_page_token` (re-sending only the queries
//! that carried one), then `GET /v1/vulns/{id}` fetches each distinct record,
//! a few at a time, to score it.
//!
//! Scoring: the highest base score over the record's CVSS vectors
//! (`CVSS_V2`, `CVSS_V3`, `CVSS_V4`, at record level and per affected
//! package), computed with the `cvss` crate. Only a record with no usable
//! vector falls back to a qualitative label: the `Ubuntu` severity type or
//! GHSA's `database_specific.severity` (`MODERATE` is Medium). Such a
//! finding gets that bucket but no CVSS score, so the risk verdict treats it
//! as unscored. A record with neither is [`Severity::Unknown`], and still
//! counted.

use super::error::VulnError;
use super::findings::{null_as_empty, rank, round_score, summarize};
use crate::providers::cve::embedded_cve;
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{
    Exposure, HttpClient, HttpProfile, HttpSettings, join_path, parse_http_url,
};
use assetscan_domain::Package;
use assetscan_domain::text::truncate_chars;
use assetscan_domain::ticket::{Finding, Severity, VulnFacts};
use futures::stream::{self, StreamExt, TryStreamExt};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PROVIDER: &str = "osv";

const PROFILE: HttpProfile = HttpProfile {
    provider: PROVIDER,
    timeout: Duration::from_secs(15),
    max_body_bytes: 4 * 1024 * 1024,
    exposure: Exposure::Path,
};

/// `vulnerabilities: {kind: osv, ...}`. Every key is optional.
#[derive(Clone, Debug, Deserialize)]
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
        if config.max_pages == 0 {
            return Err(ProviderConfigError::invalid(
                PROVIDER,
                "maxPages",
                "must be at least 1",
            ));
        }
        Ok(OsvClient {
            http: HttpClient::new(&PROFILE, &config.http)?,
            base: parse_http_url(PROVIDER, "baseUrl", &config.base_url)?,
            concurrency: in_range("concurrency", config.concurrency, 64)?,
            max_findings: config.max_findings,
            batch_size: in_range("batchSize", config.batch_size, 1000)?,
            max_pages: config.max_pages,
            cache: RecordCache::new(config.cache_capacity),
        })
    }

    /// The asset's vulnerabilities. An empty software list is an empty
    /// result, without a call.
    pub async fn query(&self, software: &[Package]) -> Result<VulnFacts, VulnError> {
        let hits = self.find_hits(software).await?;
        let findings: Vec<Finding> = stream::iter(hits)
            .map(|(id, hit)| self.finding(id, hit))
            .buffer_unordered(self.concurrency)
            .try_collect()
            .await?;
        Ok(summarize(findings, self.max_findings))
    }

    /// Distinct vulnerability ids over all packages, with the packages each
    /// one matched.
    async fn find_hits(&self, software: &[Package]) -> Result<BTreeMap<String, Hit>, VulnError> {
        let url = join_path(&self.base, &["v1", "querybatch"]);
        let mut hits: BTreeMap<String, Hit> = BTreeMap::new();
        for batch in software.chunks(self.batch_size) {
            // Queries still to send, with the page token each one carries.
            let mut pending: Vec<(&Package, Option<String>)> =
                batch.iter().map(|s| (s, None)).collect();
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
                        .map(|(s, token)| Query::new(s, token.as_deref()))
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
                    return Err(reply.malformed(reason).into());
                }
                let mut next = Vec::new();
                for ((software, _), result) in pending.into_iter().zip(response.results) {
                    for vuln in result.vulns {
                        let hit = hits.entry(vuln.id).or_default();
                        hit.packages.insert(software.to_string());
                        hit.modified = vuln.modified;
                    }
                    if let Some(token) = result.next_page_token.filter(|t| !t.is_empty()) {
                        next.push((software, Some(token)));
                    }
                }
                pending = next;
            }
        }
        Ok(hits)
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
                .malformed(format!("asked for {id}, got {}", record.id))
                .into());
        }
        Ok(score(&record))
    }
}

#[derive(Default)]
struct Hit {
    modified: Option<String>,
    packages: BTreeSet<String>,
}

#[derive(Serialize)]
struct BatchRequest<'a> {
    queries: Vec<Query<'a>>,
}

#[derive(Serialize)]
struct Query<'a> {
    package: PackageRef<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_token: Option<&'a str>,
}

#[derive(Serialize)]
struct PackageRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ecosystem: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    purl: Option<&'a str>,
}

impl<'a> Query<'a> {
    fn new(software: &'a Package, page_token: Option<&'a str>) -> Query<'a> {
        let (package, version) = match software {
            Package::Purl(purl) => (
                PackageRef {
                    name: None,
                    ecosystem: None,
                    purl: Some(purl.as_str()),
                },
                None,
            ),
            Package::Coordinates(c) => (
                PackageRef {
                    name: Some(c.name()),
                    ecosystem: Some(c.ecosystem()),
                    purl: None,
                },
                Some(c.version()),
            ),
        };
        Query {
            package,
            version,
            page_token,
        }
    }
}

#[derive(Deserialize)]
struct BatchResponse {
    results: Vec<BatchResult>,
}

/// One query's answer; `{}` when nothing matched.
#[derive(Deserialize)]
struct BatchResult {
    #[serde(default, deserialize_with = "null_as_empty")]
    vulns: Vec<VulnRef>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct VulnRef {
    id: String,
    #[serde(default)]
    modified: Option<String>,
}

/// The parts of an OSV record that scoring reads. Everything else, and any
/// shape of `database_specific`, is tolerated.
#[derive(Deserialize)]
struct OsvRecord {
    id: String,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    details: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    aliases: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    related: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    upstream: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    severity: Vec<SeverityEntry>,
    #[serde(default, deserialize_with = "null_as_empty")]
    affected: Vec<Affected>,
    #[serde(default)]
    database_specific: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct SeverityEntry {
    #[serde(rename = "type")]
    kind: String,
    score: String,
}

#[derive(Deserialize)]
struct Affected {
    #[serde(default, deserialize_with = "null_as_empty")]
    severity: Vec<SeverityEntry>,
}

/// What a record contributes to a finding, whatever package matched it.
#[derive(Debug)]
struct Scored {
    cves: Vec<String>,
    cvss: Option<f64>,
    severity: Severity,
    summary: String,
}

fn score(record: &OsvRecord) -> Scored {
    let entries = record
        .severity
        .iter()
        .chain(record.affected.iter().flat_map(|a| &a.severity));
    let cvss = entries.filter_map(cvss_base_score).reduce(f64::max);
    let severity = match cvss {
        Some(score) => Severity::from_score(score),
        None => qualitative(record).unwrap_or(Severity::Unknown),
    };
    Scored {
        cves: cves(record),
        cvss,
        severity,
        summary: summary(record),
    }
}

/// The base score of a `CVSS_V2`/`CVSS_V3`/`CVSS_V4` entry; `None` for other
/// types and for vectors the crate cannot parse.
fn cvss_base_score(entry: &SeverityEntry) -> Option<f64> {
    if !matches!(entry.kind.as_str(), "CVSS_V2" | "CVSS_V3" | "CVSS_V4") {
        return None;
    }
    match entry.score.parse::<cvss::Cvss>() {
        Ok(vector) => Some(round_score(vector.score())),
        Err(e) => {
            tracing::debug!(vector = %entry.score, error = %e, "unparsable CVSS vector ignored");
            None
        }
    }
}

/// The most severe qualitative label: `Ubuntu`-type severities and GHSA's
/// `database_specific.severity`. Used only when no vector scored.
fn qualitative(record: &OsvRecord) -> Option<Severity> {
    let ubuntu = record
        .severity
        .iter()
        .filter(|e| e.kind == "Ubuntu")
        .map(|e| e.score.as_str());
    let database = record
        .database_specific
        .as_ref()
        .and_then(|v| v.get("severity"))
        .and_then(|v| v.as_str());
    ubuntu
        .chain(database)
        .filter_map(bucket)
        .max_by_key(|s| rank(*s))
}

fn bucket(label: &str) -> Option<Severity> {
    match label.trim().to_ascii_uppercase().as_str() {
        "CRITICAL" => Some(Severity::Critical),
        "HIGH" => Some(Severity::High),
        "MODERATE" | "MEDIUM" => Some(Severity::Medium),
        "LOW" | "NEGLIGIBLE" => Some(Severity::Low),
        _ => None,
    }
}

/// CVE ids from the id itself, `aliases`, `related` and `upstream`, in that
/// order, deduplicated. Ubuntu records name their CVE in `related` or
/// `upstream` (and USNs point to `UBUNTU-CVE-…` ids there), never in
/// `aliases`.
fn cves(record: &OsvRecord) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let candidates = std::iter::once(&record.id)
        .chain(&record.aliases)
        .chain(&record.related)
        .chain(&record.upstream);
    for cve in candidates.filter_map(|c| embedded_cve(c)) {
        if !out.iter().any(|seen| seen == cve) {
            out.push(cve.to_owned());
        }
    }
    out
}

/// `summary`, or else the first line of `details`, at most 200 characters.
fn summary(record: &OsvRecord) -> String {
    let text = record
        .summary
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            record
                .details
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
        })
        .unwrap_or_default();
    truncate_chars(text.trim(), 200)
}

/// Scored records by id, valid while `modified` is unchanged.
#[derive(Debug)]
struct RecordCache {
    capacity: usize,
    entries: Mutex<HashMap<String, (String, Arc<Scored>)>>,
}

impl RecordCache {
    fn new(capacity: usize) -> RecordCache {
        RecordCache {
            capacity,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, id: &str, modified: Option<&str>) -> Option<Arc<Scored>> {
        let modified = modified?;
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(id)
            .filter(|(m, _)| m == modified)
            .map(|(_, scored)| Arc::clone(scored))
    }

    /// Without a `modified` stamp there is nothing to validate against, so
    /// nothing is cached.
    fn put(&self, id: &str, modified: Option<&str>, scored: Arc<Scored>) {
        let (Some(modified), true) = (modified, self.capacity > 0) else {
            return;
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(id) {
            entries.clear();
        }
        entries.insert(id.to_owned(), (modified.to_owned(), scored));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: &str) -> OsvRecord {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn highest_vector_wins_and_labels_only_fill_gaps() {
        let both = record(
            r#"{"id":"X-1","severity":[
                {"type":"CVSS_V3","score":"CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H"},
                {"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:P/I:P/A:P"}],
               "database_specific":{"severity":"LOW"}}"#,
        );
        let s = score(&both);
        assert_eq!((s.cvss, s.severity), (Some(8.8), Severity::High));

        let v2_only = record(
            r#"{"id":"X-2","severity":[{"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:P/I:P/A:P"}]}"#,
        );
        assert_eq!(score(&v2_only).cvss, Some(7.5));

        let label = record(r#"{"id":"X-3","database_specific":{"severity":"MODERATE"}}"#);
        assert_eq!(
            (score(&label).cvss, score(&label).severity),
            (None, Severity::Medium)
        );

        let garbage = record(
            r#"{"id":"X-4","severity":[{"type":"CVSS_V3","score":"CVSS:3.1/AV:Q"}],"database_specific":"<Any value>"}"#,
        );
        assert_eq!(
            (score(&garbage).cvss, score(&garbage).severity),
            (None, Severity::Unknown)
        );

        let per_package = record(
            r#"{"id":"X-5","affected":[{"severity":[{"type":"CVSS_V3","score":"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]}]}"#,
        );
        assert_eq!(score(&per_package).cvss, Some(9.8));
    }

    #[test]
    fn nulls_and_missing_arrays_are_empty() {
        let r = record(
            r#"{"id":"X-6","aliases":null,"severity":null,"details":"\n first line \nsecond"}"#,
        );
        let s = score(&r);
        assert_eq!(s.severity, Severity::Unknown);
        assert_eq!(s.summary, "first line");
    }

    #[test]
    fn cves_from_aliases_related_and_upstream() {
        // Derived: a USN-like record whose CVEs are only in its links (the
        // real UBUNTU-CVE-* records also embed theirs in the id).
        let r = record(
            r#"{"id":"USN-1","aliases":["CVE-2024-3333","GHSA-x"],"related":["CVE-2024-1111","USN-2","CVE-2024-3333"],"upstream":["UBUNTU-CVE-2024-2222"]}"#,
        );
        assert_eq!(
            cves(&r),
            ["CVE-2024-3333", "CVE-2024-1111", "CVE-2024-2222"]
        );
    }

    #[test]
    fn cache_is_keyed_by_modified() {
        let cache = RecordCache::new(1);
        let scored = || {
            Arc::new(Scored {
                cves: vec![],
                cvss: None,
                severity: Severity::Unknown,
                summary: String::new(),
            })
        };
        cache.put("A", Some("m1"), scored());
        assert!(cache.get("A", Some("m1")).is_some());
        assert!(cache.get("A", Some("m2")).is_none());
        assert!(cache.get("A", None).is_none());
        cache.put("B", Some("m1"), scored()); // over capacity: starts over
        assert!(cache.get("A", Some("m1")).is_none());
        assert!(cache.get("B", Some("m1")).is_some());
        RecordCache::new(0).put("C", Some("m"), scored());
    }
}
