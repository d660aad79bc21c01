//! Providers that answer at once, so that what is measured is the store and
//! the pipeline, not the outside world. The scan's target says which path a
//! run takes: `Inventory { id: "offline" | "clean" | "high" }`.

use assetscan_operator::domain::ScanRequest;
use assetscan_operator::domain::Target;
use assetscan_operator::domain::Triage;
use assetscan_operator::domain::ticket::{Finding, Severity, ThreatIntelFacts, VulnFacts};
use assetscan_operator::pipeline::{Effects, Notification, StepError};
use std::collections::BTreeMap;

/// The paths a scan can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The asset does not answer: `INIT → ASSET_OFFLINE → FINISHED`.
    Offline,
    /// Online, one low finding: `… → VULN_CHECK_DONE → FINISHED`.
    Clean,
    /// Online, a critical finding, threat intel, one notification.
    HighRisk,
}

impl Path {
    pub fn target(self) -> Target {
        let id = match self {
            Path::Offline => "offline",
            Path::Clean => "clean",
            Path::HighRisk => "high",
        };
        Target::Inventory { id: id.to_owned() }
    }

    fn of(req: &ScanRequest) -> Path {
        match &req.target {
            Target::Inventory { id } if id == "offline" => Path::Offline,
            Target::Inventory { id } if id == "high" => Path::HighRisk,
            _ => Path::Clean,
        }
    }
}

/// A finding with a summary of `summary_len` bytes.
pub fn finding(i: usize, cvss: f64, summary_len: usize) -> Finding {
    Finding {
        id: format!("GHSA-{:04x}-{:04x}-bnch", i / 65536, i % 65536),
        cves: vec![format!("CVE-2024-{:05}", 10_000 + i)],
        package: format!("package-{i:04}"),
        cvss: Some(cvss),
        severity: Severity::from_score(cvss),
        summary: "x".repeat(summary_len),
    }
}

/// The vulnerability facts of `count` findings, the first one at `cvss`.
pub fn vulns(count: usize, cvss: f64, summary_len: usize) -> VulnFacts {
    let findings: Vec<Finding> = (0..count)
        .map(|i| finding(i, if i == 0 { cvss } else { 3.1 }, summary_len))
        .collect();
    let mut by_severity = BTreeMap::new();
    for f in &findings {
        *by_severity.entry(f.severity).or_default() += 1;
    }
    VulnFacts {
        total: count as u32,
        by_severity,
        max_cvss: findings.iter().filter_map(|f| f.cvss).reduce(f64::max),
        cves: findings.iter().flat_map(|f| f.cves.clone()).collect(),
        findings,
        ..VulnFacts::default()
    }
}

/// Zero-latency providers.
pub struct InstantEffects;

impl Effects for InstantEffects {
    async fn check_online(&self, req: &ScanRequest) -> Result<bool, StepError> {
        Ok(Path::of(req) != Path::Offline)
    }

    async fn query_vulnerabilities(
        &self,
        req: &ScanRequest,
        _triage: &Triage,
    ) -> Result<VulnFacts, StepError> {
        Ok(match Path::of(req) {
            Path::HighRisk => vulns(3, 9.8, 60),
            _ => vulns(1, 3.1, 60),
        })
    }

    async fn threat_intel(
        &self,
        _req: &ScanRequest,
        vulns: &VulnFacts,
    ) -> Result<ThreatIntelFacts, StepError> {
        Ok(ThreatIntelFacts {
            epss: vulns.cves.iter().map(|cve| (cve.clone(), 0.01)).collect(),
            catalog_version: Some("bench".to_owned()),
            ..ThreatIntelFacts::default()
        })
    }

    async fn notify(
        &self,
        channels: &[String],
        notification: &Notification,
    ) -> BTreeMap<String, Result<String, StepError>> {
        channels
            .iter()
            .map(|c| (c.clone(), Ok(format!("{c}:{}", notification.ticket_id))))
            .collect()
    }
}
