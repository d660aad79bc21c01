//! The vulnerability step's shared parts: the error type, the configured
//! source (OSV or a generic endpoint), and how findings become [`VulnFacts`].

use super::ConfigError;
use super::generic::{GenericVulnClient, GenericVulnConfig};
use super::http::HttpError;
use super::osv::{OsvClient, OsvConfig};
use crate::domain::Package;
use crate::ticket::{Finding, Severity, VulnFacts};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeSet;

/// A failed vulnerability query.
#[derive(Debug, thiserror::Error)]
pub enum VulnError {
    /// The server kept handing out page tokens; a bug or a loop somewhere.
    #[error("{provider}: still paging after {pages} pages; giving up")]
    TooManyPages { provider: &'static str, pages: u32 },
    #[error(transparent)]
    Http(#[from] HttpError),
}

impl VulnError {
    pub fn is_retryable(&self) -> bool {
        match self {
            VulnError::TooManyPages { .. } => false,
            VulnError::Http(e) => e.is_retryable(),
        }
    }
}

/// `vulnerabilities:` in the config, by `kind`.
///
/// ```yaml
/// vulnerabilities:
///   kind: osv             # or: generic
///   baseUrl: https://api.osv.dev
/// ```
#[derive(Clone, Debug, Deserialize)]
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
    pub fn from_config(config: &VulnSourceConfig) -> Result<VulnSource, ConfigError> {
        Ok(match config {
            VulnSourceConfig::Osv(c) => VulnSource::Osv(OsvClient::new(c)?),
            VulnSourceConfig::Generic(c) => VulnSource::Generic(GenericVulnClient::new(c)?),
        })
    }

    pub async fn query(
        &self,
        asset_id: &str,
        software: &[Package],
    ) -> Result<VulnFacts, VulnError> {
        match self {
            VulnSource::Osv(osv) => osv.query(software).await,
            VulnSource::Generic(generic) => generic.query(asset_id, software).await,
        }
    }
}

/// Where a severity sorts, most severe first. An unscored finding ranks
/// below `Low` (it may be anything, but nothing says it is bad) and above
/// `None` (which says it is not).
pub(crate) fn rank(severity: Severity) -> u8 {
    match severity {
        Severity::Critical => 5,
        Severity::High => 4,
        Severity::Medium => 3,
        Severity::Low => 2,
        Severity::Unknown => 1,
        Severity::None => 0,
    }
}

/// Counts every finding, keeps the `max_findings` most severe (by bucket,
/// then score, then id, so the order is stable), and lists every CVE — also
/// those of findings cut off — so that threat intel sees them all.
pub(crate) fn summarize(mut findings: Vec<Finding>, max_findings: usize) -> VulnFacts {
    findings.sort_by(|a, b| {
        rank(b.severity)
            .cmp(&rank(a.severity))
            .then(b.cvss.unwrap_or(-1.0).total_cmp(&a.cvss.unwrap_or(-1.0)))
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut facts = VulnFacts {
        total: findings.len() as u32,
        max_cvss: findings.iter().filter_map(|f| f.cvss).reduce(f64::max),
        cves: findings
            .iter()
            .flat_map(|f| f.cves.iter().cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        ..VulnFacts::default()
    };
    for f in &findings {
        *facts.by_severity.entry(f.severity).or_default() += 1;
    }
    findings.truncate(max_findings);
    facts.findings = findings;
    facts
}

/// CVSS scores are kept to one decimal, as they are published.
pub(crate) fn round_score(score: f64) -> f64 {
    (score * 10.0).round() / 10.0
}

/// A JSON array that may also be `null` or missing.
pub(crate) fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(id: &str, cvss: Option<f64>, severity: Severity, cves: &[&str]) -> Finding {
        Finding {
            id: id.into(),
            cves: cves.iter().map(|c| c.to_string()).collect(),
            package: "p".into(),
            cvss,
            severity,
            summary: String::new(),
        }
    }

    #[test]
    fn summarize_counts_all_and_keeps_the_worst() {
        let facts = summarize(
            vec![
                finding("low", Some(2.7), Severity::Low, &["CVE-2024-0003"]),
                finding("unknown", None, Severity::Unknown, &["CVE-2024-0004"]),
                finding("crit", Some(10.0), Severity::Critical, &["CVE-2024-0001"]),
                finding("med", Some(4.4), Severity::Medium, &[]),
                finding(
                    "high",
                    Some(8.1),
                    Severity::High,
                    &["CVE-2024-0002", "CVE-2024-0001"],
                ),
            ],
            3,
        );
        assert_eq!(facts.total, 5);
        assert_eq!(facts.max_cvss, Some(10.0));
        let ids: Vec<_> = facts.findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["crit", "high", "med"]);
        assert_eq!(facts.by_severity[&Severity::Unknown], 1);
        assert_eq!(facts.by_severity.values().sum::<u32>(), 5);
        assert_eq!(
            facts.cves,
            [
                "CVE-2024-0001",
                "CVE-2024-0002",
                "CVE-2024-0003",
                "CVE-2024-0004"
            ]
        );
    }
}
