//! Vulnerabilities from a generic JSON endpoint, for scanners that are not
//! OSV-shaped. The contract:
//!
//! ```text
//! POST <url>
//! {"assetId": "web-1", "software": [{"name": "jinja2", "ecosystem": "PyPI", "version": "3.1.4"}, {"purl": "pkg:…"}]}
//!
//! 200 OK
//! {"vulnerabilities": [
//!   {"id": "GHSA-…", "cves": ["CVE-…"], "cvss": 9.8, "summary": "…", "package": "jinja2"}
//! ]}
//! ```
//!
//! `id` is required; `cves` (default `[]`), `cvss` (0–10 or `null`),
//! `summary` and `package` are optional. Entries with the same `id` count
//! once. A finding without `cvss` is [`Severity::Unknown`].

use super::error::VulnError;
use super::findings::{null_as_empty, round_score, summarize};
use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpProfile, HttpSettings, parse_http_url};
use assetscan_domain::Package;
use assetscan_domain::Triage;
use assetscan_domain::text::truncate_chars;
use assetscan_domain::ticket::{Finding, Severity, VulnFacts};
use reqwest::Url;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;

const PROFILE: HttpProfile = HttpProfile::api(
    "vulnerability endpoint",
    Duration::from_secs(15),
    4 * 1024 * 1024,
);

/// `vulnerabilities: {kind: generic, url: ..., ...}`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenericVulnConfig {
    /// The endpoint that takes the POST.
    pub url: String,
    /// `timeout` (default `15s`), `maxBodyBytes` (default 4 MiB),
    /// `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
    /// Findings kept, most severe first; counts cover all. Default 50.
    #[serde(default = "default_max_findings")]
    pub max_findings: usize,
}

fn default_max_findings() -> usize {
    50
}

#[derive(Debug)]
pub struct GenericVulnClient {
    http: HttpClient,
    url: Url,
    max_findings: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    asset_id: &'a str,
    software: &'a [Package],
}

#[derive(Deserialize)]
struct Response {
    vulnerabilities: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    id: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    cves: Vec<String>,
    #[serde(default)]
    cvss: Option<f64>,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    package: Option<String>,
}

impl GenericVulnClient {
    pub fn new(config: &GenericVulnConfig) -> Result<GenericVulnClient, ProviderConfigError> {
        Ok(GenericVulnClient {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: parse_http_url(PROFILE.provider, "url", &config.url)?,
            max_findings: config.max_findings,
        })
    }

    pub async fn query(
        &self,
        asset_id: &str,
        software: &[Package],
        triage: &Triage,
    ) -> Result<VulnFacts, VulnError> {
        let request = self
            .http
            .post(self.url.clone())
            .json(&Request { asset_id, software });
        let reply = self.http.send(request).await?.success()?;
        let response: Response = reply.json()?;
        let mut seen = BTreeSet::new();
        let mut findings = Vec::new();
        for entry in response.vulnerabilities {
            if entry.id.trim().is_empty() {
                return Err(reply
                    .malformed(
                        "a vulnerability without an id",
                        "a vulnerability without an id",
                    )
                    .into());
            }
            if let Some(cvss) = entry.cvss.filter(|c| !(0.0..=10.0).contains(c)) {
                return Err(reply
                    .malformed(
                        "a CVSS score outside 0..10",
                        format!("{}: cvss {cvss} is outside 0..10", entry.id),
                    )
                    .into());
            }
            if seen.insert(entry.id.clone()) {
                findings.push(finding(entry));
            }
        }
        Ok(summarize(findings, self.max_findings, triage))
    }
}

fn finding(entry: Entry) -> Finding {
    let cvss = entry.cvss.map(round_score);
    Finding {
        id: entry.id,
        cves: entry.cves,
        package: entry.package.unwrap_or_default(),
        cvss,
        severity: cvss.map_or(Severity::Unknown, Severity::from_score),
        summary: truncate_chars(entry.summary.as_deref().unwrap_or_default().trim(), 200),
    }
}
