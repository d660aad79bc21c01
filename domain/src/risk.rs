//! The high-risk verdict and when threat intel is worth asking for. Pure
//! functions of the policy and the confirmed facts, apart from the I/O of
//! the providers: the pipeline decides with them, and the rules are tested
//! here exhaustively.
//!
//! High risk = any finding with CVSS ≥ the CVSS threshold, or any CVE listed
//! as known exploited, or any CVE with EPSS ≥ the EPSS threshold. Findings
//! that only carry a qualitative label (no vector) count as unscored.

use crate::policy::{Policy, ThreatIntelPolicy};
use crate::ticket::{Finding, RiskFacts, ThreatIntelFacts, VulnFacts};

/// Whether the threat-intel step should run for these facts.
/// `WhenNeeded`: there are findings and none reaches the CVSS threshold
/// (some are lower or unscored); once one does, the asset is high risk
/// whatever intel would add. `Always`: whenever there are findings. `Never`.
pub fn needs_threat_intel(policy: &Policy, vulns: &VulnFacts) -> bool {
    match policy.threat_intel {
        ThreatIntelPolicy::Always => vulns.total > 0,
        ThreatIntelPolicy::Never => false,
        ThreatIntelPolicy::WhenNeeded => {
            vulns.total > 0
                && !vulns
                    .max_cvss
                    .is_some_and(|max| max >= policy.cvss_threshold)
        }
    }
}

/// At most this many reasons are listed; the rest are counted.
const MAX_REASONS: usize = 20;

/// The verdict, with one human-readable reason per finding or CVE that
/// makes it.
pub fn assess(policy: &Policy, vulns: &VulnFacts, intel: Option<&ThreatIntelFacts>) -> RiskFacts {
    let mut reasons: Vec<String> = vulns
        .findings
        .iter()
        .filter_map(|f| {
            let cvss = f.cvss.filter(|c| *c >= policy.cvss_threshold)?;
            Some(format!(
                "{} CVSS {cvss:.1} >= {:.1}",
                label(f),
                policy.cvss_threshold
            ))
        })
        .collect();
    // The listed findings are a bounded selection; the maximum covers all.
    if let (true, Some(max)) = (
        reasons.is_empty(),
        vulns.max_cvss.filter(|m| *m >= policy.cvss_threshold),
    ) {
        reasons.push(format!("max CVSS {max:.1} >= {:.1}", policy.cvss_threshold));
    }
    if let Some(intel) = intel {
        let catalog = intel
            .catalog_version
            .as_deref()
            .unwrap_or("unknown version");
        reasons.extend(
            intel
                .known_exploited
                .iter()
                .map(|cve| format!("{cve} is listed as known exploited (KEV {catalog})")),
        );
        reasons.extend(
            intel
                .epss
                .iter()
                .filter(|(_, epss)| **epss >= policy.epss_threshold)
                .map(|(cve, epss)| format!("{cve} EPSS {epss:.3} >= {:.3}", policy.epss_threshold)),
        );
    }
    let high_risk = !reasons.is_empty();
    if reasons.len() > MAX_REASONS {
        let more = reasons.len() - (MAX_REASONS - 1);
        reasons.truncate(MAX_REASONS - 1);
        reasons.push(format!("… and {more} more"));
    }
    // The time of the confirmation is the executor's to record: the
    // verdict itself is pure.
    RiskFacts {
        high_risk,
        reasons,
        confirmed_at: None,
    }
}

/// `GHSA-jfh8-c2jp-5v3q (CVE-2021-44228)`, or just the id when it is the CVE.
fn label(finding: &Finding) -> String {
    match finding.cves.first() {
        Some(cve) if *cve != finding.id => format!("{} ({cve})", finding.id),
        _ => finding.id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ticket::Severity;

    fn finding(id: &str, cve: &str, cvss: Option<f64>) -> Finding {
        Finding {
            id: id.into(),
            cves: vec![cve.into()],
            package: "pkg".into(),
            cvss,
            severity: cvss.map_or(Severity::Unknown, Severity::from_score),
            summary: String::new(),
        }
    }

    fn facts(findings: Vec<Finding>) -> VulnFacts {
        VulnFacts {
            total: findings.len() as u32,
            max_cvss: findings.iter().filter_map(|f| f.cvss).reduce(f64::max),
            cves: findings.iter().flat_map(|f| f.cves.clone()).collect(),
            findings,
            ..VulnFacts::default()
        }
    }

    fn intel(threat_intel: ThreatIntelPolicy) -> Policy {
        Policy {
            threat_intel,
            ..Policy::default()
        }
    }

    #[test]
    fn policy_when_needed() {
        use ThreatIntelPolicy::*;
        let none = facts(vec![]);
        let decided = facts(vec![
            finding("A", "CVE-2024-0001", Some(9.8)),
            finding("B", "CVE-2024-0002", None),
        ]);
        let below = facts(vec![finding("A", "CVE-2024-0001", Some(6.9))]);
        let unscored = facts(vec![finding("A", "CVE-2024-0001", None)]);
        let at_threshold = facts(vec![finding("A", "CVE-2024-0001", Some(7.0))]);
        assert!(!needs_threat_intel(&intel(WhenNeeded), &none));
        assert!(!needs_threat_intel(&intel(WhenNeeded), &decided));
        assert!(!needs_threat_intel(&intel(WhenNeeded), &at_threshold));
        assert!(needs_threat_intel(&intel(WhenNeeded), &below));
        assert!(needs_threat_intel(&intel(WhenNeeded), &unscored));
        for f in [&decided, &below] {
            assert!(needs_threat_intel(&intel(Always), f));
            assert!(!needs_threat_intel(&intel(Never), f));
        }
        assert!(
            !needs_threat_intel(&intel(Always), &none),
            "nothing to enrich"
        );
    }

    #[test]
    fn cvss_alone_decides() {
        let v = facts(vec![finding(
            "UBUNTU-CVE-2024-3094",
            "CVE-2024-3094",
            Some(10.0),
        )]);
        let risk = assess(&Policy::default(), &v, None);
        assert!(risk.high_risk);
        assert_eq!(
            risk.reasons,
            ["UBUNTU-CVE-2024-3094 (CVE-2024-3094) CVSS 10.0 >= 7.0"]
        );

        let low = facts(vec![finding("CVE-2024-3177", "CVE-2024-3177", Some(2.7))]);
        let risk = assess(&Policy::default(), &low, None);
        assert!(!risk.high_risk && risk.reasons.is_empty());
    }

    #[test]
    fn known_exploited_or_epss_make_low_cvss_high_risk() {
        let v = facts(vec![
            finding("GHSA-x", "CVE-2021-44228", Some(4.0)),
            finding("GHSA-y", "CVE-2019-16759", None),
        ]);
        let kev = ThreatIntelFacts {
            known_exploited: vec!["CVE-2021-44228".into()],
            catalog_version: Some("2025.08.25".into()),
            ..Default::default()
        };
        let risk = assess(&Policy::default(), &v, Some(&kev));
        assert!(risk.high_risk);
        assert_eq!(
            risk.reasons,
            ["CVE-2021-44228 is listed as known exploited (KEV 2025.08.25)"]
        );

        let mut epss = ThreatIntelFacts::default();
        epss.epss.insert("CVE-2019-16759".into(), 0.96817);
        epss.epss.insert("CVE-2021-44228".into(), 0.2);
        let risk = assess(&Policy::default(), &v, Some(&epss));
        assert_eq!(risk.reasons, ["CVE-2019-16759 EPSS 0.968 >= 0.500"]);

        let strict = Policy {
            epss_threshold: 0.99,
            ..Policy::default()
        };
        assert!(!assess(&strict, &v, Some(&epss)).high_risk);
    }

    #[test]
    fn max_cvss_counts_when_findings_were_cut() {
        let mut v = facts(vec![finding("A", "CVE-2024-0001", Some(9.1))]);
        v.findings.clear();
        let risk = assess(&Policy::default(), &v, None);
        assert_eq!(risk.reasons, ["max CVSS 9.1 >= 7.0"]);
    }

    #[test]
    fn reasons_are_bounded() {
        let many = facts(
            (0..30)
                .map(|i| finding(&format!("V-{i}"), "CVE-2024-0001", Some(9.0)))
                .collect(),
        );
        let risk = assess(&Policy::default(), &many, None);
        assert_eq!(risk.reasons.len(), MAX_REASONS);
        assert_eq!(risk.reasons.last().unwrap(), "… and 11 more");
    }
}
