//! What both vulnerability sources do with their answers: how findings
//! become [`VulnFacts`] (most severe first, by
//! [`assetscan_domain::ticket::Severity::rank`]), and the
//! JSON quirks of their wire formats.

use assetscan_domain::Triage;
use assetscan_domain::ticket::{Finding, VulnFacts};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeSet;

/// Sets apart the findings `triage` suppresses, then counts every other
/// finding, keeps the `max_findings` most severe (by bucket, then score,
/// then id, so the order is stable), and lists every CVE — also those of
/// findings cut off — so that threat intel sees them all. A suppressed
/// finding counts nowhere but in the triage's record: it can raise no
/// high risk, neither by its score nor by its CVEs.
pub(super) fn summarize(
    mut findings: Vec<Finding>,
    max_findings: usize,
    triage: &Triage,
) -> VulnFacts {
    findings.sort_by(|a, b| {
        b.severity
            .rank()
            .cmp(&a.severity.rank())
            .then(b.cvss.unwrap_or(-1.0).total_cmp(&a.cvss.unwrap_or(-1.0)))
            .then_with(|| a.id.cmp(&b.id))
    });
    let (mut findings, triaged) = triage.apply(findings);
    let mut facts = VulnFacts {
        triage: triaged,
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
pub(super) fn round_score(score: f64) -> f64 {
    (score * 10.0).round() / 10.0
}

/// A JSON array that may also be `null` or missing.
pub(super) fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::ticket::Severity;

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
            &Triage::default(),
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
