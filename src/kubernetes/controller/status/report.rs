//! The AssetScanReport of a run that ended: built from its ticket, created
//! once, owned by its AssetScan, the oldest pruned beyond the object's
//! `reportHistoryLimit`. Redis holds a run's process state and forgets it
//! (retention, data loss); the report is what the run found, kept in the
//! API server.

use super::from_ticket::{last_error_status, saturating_i64, time_from_ms};
use crate::kubernetes::crd::{
    AssetScan, AssetScanReport, AssetScanReportSpec, AssetScanStatus, DEFAULT_REPORT_HISTORY_LIMIT,
    ReportCoverage, ReportFinding, ReportFindings, ReportNotAsked, ReportNotification, ReportSbom,
    ReportSuppressed, ReportThreatIntel, ReportTriage, not_asked_by_reason,
};
use crate::telemetry::Metrics;
use assetscan_domain::TriageFacts;
use assetscan_domain::run_order;
use assetscan_domain::ticket::{Status, ThreatIntelFacts, Ticket, VulnFacts};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::{Client, Resource, ResourceExt};
use std::collections::BTreeMap;
use tracing::warn;

/// The label that ties a report to its AssetScan (by uid: a name may be
/// longer than a label value, and a re-created object is another one).
pub const SCAN_UID_LABEL: &str = "assetscan.io/scan-uid";

/// Findings listed in a report (the schema's `maxItems`).
const MAX_FINDINGS: usize = 50;
/// CVE ids per finding, known-exploited CVEs, EPSS scores and reasons kept.
const MAX_CVES_PER_FINDING: usize = 16;
const MAX_KNOWN_EXPLOITED: usize = 100;
const MAX_EPSS: usize = 50;
const MAX_REASONS: usize = 32;
/// Reports named in `status.reports` at most (the schema's `maxItems`).
const MAX_LISTED: usize = 100;
/// A Kubernetes object name's length limit (DNS-1123 subdomain).
const MAX_NAME: usize = 253;

/// The report's name: the AssetScan's, then the run's generation and scan
/// (`web-01-g3-s1`); one per run, so a second write of it is refused.
pub fn report_name(obj: &AssetScan, run: &str) -> String {
    let suffix = run_order(run)
        .map(|(_, (generation, scan))| format!("-g{generation}-s{scan}"))
        .unwrap_or_else(|| format!("-{run}"));
    let scan = obj.name_any();
    let keep = MAX_NAME.saturating_sub(suffix.len());
    let prefix: String = scan.chars().take(keep).collect();
    format!("{}{suffix}", prefix.trim_end_matches(['-', '.']))
}

/// The verdict in one word: what the run says about the asset.
fn verdict(ticket: &Ticket) -> &'static str {
    let facts = &ticket.facts;
    match (ticket.status, facts.online, facts.risk.as_ref()) {
        (Status::Failed, _, _) => "Failed",
        (_, Some(false), _) => "Offline",
        (_, _, Some(risk)) if risk.high_risk => "HighRisk",
        _ => "NoHighRisk",
    }
}

/// Whether the run scanned anything worth a report: not when it failed on
/// its SBOM.
fn scanned(ticket: &Ticket) -> bool {
    (ticket.facts.sbom.as_ref()).is_none_or(|sbom| sbom.problem.is_none())
}

/// The report of `ticket`'s run (which ended) of `obj`.
fn build(obj: &AssetScan, ticket: &Ticket) -> AssetScanReport {
    let facts = &ticket.facts;
    let mut labels = BTreeMap::new();
    if let Some(uid) = obj.uid() {
        labels.insert(SCAN_UID_LABEL.to_owned(), uid);
    }
    AssetScanReport {
        metadata: ObjectMeta {
            name: Some(report_name(obj, &ticket.run)),
            namespace: obj.namespace(),
            labels: Some(labels),
            owner_references: owner(obj).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: AssetScanReportSpec {
            asset_id: ticket.asset.clone(),
            scan: obj.name_any(),
            run: ticket.run.clone(),
            ticket_id: ticket.id.clone(),
            generation: run_order(&ticket.run).map_or(0, |(_, (generation, _))| generation),
            fencing_token: saturating_i64(ticket.fencing_token),
            phase: ticket.status,
            verdict: verdict(ticket).to_owned(),
            reasons: facts
                .risk
                .iter()
                .flat_map(|r| r.reasons.iter().take(MAX_REASONS).cloned())
                .collect(),
            reasons_omitted: facts.risk.as_ref().map_or(0, |r| {
                u32::try_from(r.reasons.len().saturating_sub(MAX_REASONS)).unwrap_or(u32::MAX)
            }),
            started_at: time_from_ms(ticket.created_at),
            ended_at: time_from_ms(ticket.updated_at),
            sbom: facts.sbom.as_ref().map(|s| ReportSbom {
                source: s.source.clone(),
                reference: s.reference.clone(),
                digest: s.digest.as_ref().map(|d| d.to_string()),
                packages: s.packages,
                skipped: s.skipped,
                unsupported: s.unsupported,
            }),
            findings: facts.vulnerabilities.as_deref().map(findings),
            triage: (facts.vulnerabilities.as_deref())
                .and_then(|v| v.triage.as_ref())
                .map(triage),
            coverage: facts.coverage().map(|c| ReportCoverage {
                listed: c.listed,
                asked: c.asked,
                low: c.is_low(),
                not_asked: not_asked_by_reason(c),
                asked_by_ecosystem: c.asked_by_ecosystem.clone(),
                not_asked_listed: (c.not_asked_listed.iter())
                    .map(|e| ReportNotAsked {
                        package: e.package.clone(),
                        reason: e.reason.as_str().to_owned(),
                    })
                    .collect(),
            }),
            threat_intel: facts.threat_intel.as_ref().map(threat_intel),
            notification: facts.notification.as_ref().map(|n| ReportNotification {
                state: n.state,
                idempotency_key: n.idempotency_key.clone(),
                sent_at: n.sent_at.map(time_from_ms),
                receipts: n.receipt.clone(),
            }),
            last_error: ticket.last_error.as_ref().map(last_error_status),
        },
    }
}

/// The first findings, most severe first, and how many were left out.
fn findings(v: &VulnFacts) -> ReportFindings {
    let items: Vec<ReportFinding> = v
        .findings
        .iter()
        .take(MAX_FINDINGS)
        .map(|f| ReportFinding {
            id: f.id.clone(),
            package: f.package.clone(),
            severity: serde_json::to_value(f.severity)
                .ok()
                .and_then(|s| s.as_str().map(str::to_owned))
                .unwrap_or_default(),
            cvss: f.cvss,
            cves: f.cves.iter().take(MAX_CVES_PER_FINDING).cloned().collect(),
        })
        .collect();
    ReportFindings {
        total: v.total,
        max_cvss: v.max_cvss,
        omitted: v
            .total
            .saturating_sub(u32::try_from(items.len()).unwrap_or(u32::MAX)),
        items,
    }
}

/// What the run's triage suppressed, with each statement.
fn triage(t: &TriageFacts) -> ReportTriage {
    ReportTriage {
        statements: t.statements,
        suppressed_total: t.suppressed_total,
        suppressed: (t.suppressed.iter())
            .map(|s| ReportSuppressed {
                id: s.finding.id.clone(),
                package: s.finding.package.clone(),
                cvss: s.finding.cvss,
                state: serde_json::to_value(s.triage.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                by: s.triage.by.clone(),
                justification: s.triage.justification.clone(),
                owner: s.triage.owner.clone(),
                expires: s.triage.expires_ms.map(time_from_ms),
            })
            .collect(),
        expired: t.expired.clone(),
        unresolved: t.unresolved.clone(),
        unread: t.unread.clone(),
    }
}

/// The known-exploited CVEs and the highest EPSS scores, bounded, and how
/// many scores were left out.
fn threat_intel(t: &ThreatIntelFacts) -> ReportThreatIntel {
    let mut scores: Vec<(&String, &f64)> = t.epss.iter().collect();
    scores.sort_by(|a, b| b.1.total_cmp(a.1));
    let kept = scores.len().min(MAX_EPSS);
    ReportThreatIntel {
        known_exploited: t
            .known_exploited
            .iter()
            .take(MAX_KNOWN_EXPLOITED)
            .cloned()
            .collect(),
        known_exploited_omitted: u32::try_from(
            t.known_exploited.len().saturating_sub(MAX_KNOWN_EXPLOITED),
        )
        .unwrap_or(u32::MAX),
        epss: scores
            .into_iter()
            .take(MAX_EPSS)
            .map(|(cve, score)| (cve.clone(), *score))
            .collect(),
        epss_omitted: t
            .epss_omitted
            .saturating_add(u32::try_from(t.epss.len() - kept).unwrap_or(u32::MAX)),
    }
}

/// Leaves out of `spec`, least telling first, until it is at most
/// `max_bytes` of JSON: the lowest EPSS scores, the least severe findings
/// (all but the most severe), known-exploited CVEs, reasons, and the last
/// finding; each left out is counted in the report. What is left (ids,
/// times, the verdict, the notification's receipts, each bounded) is kept
/// whatever its size: it is what the report is for.
fn fit(spec: &mut AssetScanReportSpec, max_bytes: usize) {
    fn bump(count: &mut u32) {
        *count = count.saturating_add(1);
    }
    while serde_json::to_vec(spec).map_or(0, |json| json.len()) > max_bytes {
        let threat_intel = spec.threat_intel.as_mut();
        let findings = spec.findings.as_mut();
        if let Some(t) = threat_intel.filter(|t| !t.epss.is_empty()) {
            let lowest = t
                .epss
                .iter()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(cve, _)| cve.clone());
            if let Some(cve) = lowest {
                t.epss.remove(&cve);
            }
            bump(&mut t.epss_omitted);
        } else if let Some(f) = findings.filter(|f| f.items.len() > 1) {
            f.items.pop();
            bump(&mut f.omitted);
        } else if let Some(t) = spec
            .threat_intel
            .as_mut()
            .filter(|t| !t.known_exploited.is_empty())
        {
            t.known_exploited.pop();
            bump(&mut t.known_exploited_omitted);
        } else if spec.reasons.pop().is_some() {
            bump(&mut spec.reasons_omitted);
        } else if let Some(f) = spec.findings.as_mut().filter(|f| !f.items.is_empty()) {
            f.items.pop();
            bump(&mut f.omitted);
        } else {
            return;
        }
    }
}

/// The AssetScan as the report's controlling owner: the garbage collector
/// deletes its reports with it.
fn owner(obj: &AssetScan) -> Option<OwnerReference> {
    let mut reference = obj.controller_owner_ref(&())?;
    reference.block_owner_deletion = Some(true);
    Some(reference)
}

/// Writes the report of each run of one object that ended, once, and keeps
/// the object's list of reports.
pub struct ReportRecorder<'a> {
    api: Api<AssetScanReport>,
    obj: &'a AssetScan,
    metrics: &'a Metrics,
    /// The bound on a report's spec, as JSON
    /// ([`crate::kubernetes::controller::settings::ReportsSection::max_bytes`]).
    max_bytes: usize,
}

impl<'a> ReportRecorder<'a> {
    pub fn new(client: Client, obj: &'a AssetScan, metrics: &'a Metrics) -> ReportRecorder<'a> {
        let namespace = obj.metadata.namespace.as_deref().unwrap_or("default");
        ReportRecorder {
            api: Api::namespaced(client, namespace),
            obj,
            metrics,
            max_bytes: usize::MAX,
        }
    }

    /// Bounds each report's spec to `max_bytes` of JSON (see [`fit`]).
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Writes the report of `ticket`'s run, which ended, unless `status`
    /// names it already, deletes the reports beyond the object's limit,
    /// and records both in `status` (written by the caller, in the same
    /// write as the run's end). A report that could not be written leaves
    /// `status` as it was: the next reconcile of the finished object
    /// writes it.
    ///
    /// A run that failed because its SBOM could not be used scanned
    /// nothing: it writes no report, so the previous one (the last scan of
    /// the asset) stays the latest; the status says why the run failed.
    pub async fn record(&self, ticket: &Ticket, status: &mut AssetScanStatus) {
        let name = report_name(self.obj, &ticket.run);
        if status.latest_report.as_deref() == Some(name.as_str()) || !scanned(ticket) {
            return;
        }
        let mut report = build(self.obj, ticket);
        fit(&mut report.spec, self.max_bytes);
        if let Err(err) = self.create(&report).await {
            self.metrics.failed("ReportWrite");
            let object = self.obj.metadata.name.as_deref().unwrap_or_default();
            warn!(object, report = %name, error = %err, "report not written; written at the next reconcile");
            return;
        }
        status.reports = self.prune(&name, &status.reports).await;
        status.latest_report = Some(name);
    }

    /// Creates `report`; one that exists already (a retry, another
    /// replica) is success: the report of a run is written once.
    async fn create(&self, report: &AssetScanReport) -> Result<(), kube::Error> {
        match self.api.create(&PostParams::default(), report).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && e.reason == "AlreadyExists" => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The reports kept once `latest` is written: `latest`, then those of
    /// `kept` (newest first), at most the object's `reportHistoryLimit`.
    /// The ones that fall off are deleted (one already gone is fine); one
    /// that cannot be deleted now stays on the list, to be deleted after
    /// the next run. No list of reports is read: what a run costs does not
    /// grow with the number of reports.
    async fn prune(&self, latest: &str, kept: &[String]) -> Vec<String> {
        let limit = self
            .obj
            .spec
            .report_history_limit
            .unwrap_or(DEFAULT_REPORT_HISTORY_LIMIT);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut names: Vec<String> = std::iter::once(latest.to_owned())
            .chain(kept.iter().filter(|n| *n != latest).cloned())
            .collect();
        let dropped = names.split_off(limit.min(names.len()));
        for name in dropped {
            match self.api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(err) => {
                    warn!(report = %name, error = %err, "older report not deleted; retried after the next run");
                    names.push(name);
                }
            }
        }
        // The status's bound: a report past it is left to the garbage
        // collector (it goes with its AssetScan).
        names.truncate(MAX_LISTED);
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str) -> AssetScan {
        let spec = serde_json::json!({"assetId": "web-01", "target": {}});
        let mut obj = AssetScan::new(name, serde_json::from_value(spec).expect("spec"));
        obj.metadata.uid = Some("1234abcd-5678".into());
        obj.metadata.namespace = Some("secops".into());
        obj
    }

    #[test]
    fn a_report_is_named_from_its_run_and_bounded() {
        assert_eq!(
            report_name(&object("web-01"), "1234abcd-g3-s1"),
            "web-01-g3-s1"
        );
        let long = "a".repeat(253);
        let name = report_name(&object(&long), "1234abcd-g12-s7");
        assert_eq!(name.len(), 253);
        assert!(name.ends_with("a-g12-s7"), "{name}");
    }

    /// A ticket of a run that found `n` findings (most severe first), each
    /// with 16 CVEs, as many known-exploited CVEs and EPSS scores, and a
    /// reason per finding.
    fn crowded(n: usize) -> Ticket {
        use assetscan_domain::ticket::{Finding, RiskFacts, Severity};
        let mut ticket = Ticket::new("web-01", "1234abcd-g1-s0", 1_767_225_600_000);
        ticket.status = Status::Finished;
        let cve = |i: usize| format!("CVE-2024-{i:05}");
        ticket.facts.vulnerabilities = Some(std::sync::Arc::new(VulnFacts {
            total: u32::try_from(n).unwrap(),
            max_cvss: Some(10.0),
            findings: (0..n)
                .map(|i| Finding {
                    id: format!("OSV-{i:05}"),
                    package: "Debian:10/openssl@1.1.1n-0+deb10u3".into(),
                    severity: Severity::Critical,
                    cvss: Some(10.0 - i as f64 / 100.0),
                    cves: (0..16).map(|c| cve(i * 16 + c)).collect(),
                    summary: String::new(),
                })
                .collect(),
            ..VulnFacts::default()
        }));
        ticket.facts.threat_intel = Some(ThreatIntelFacts {
            known_exploited: (0..n).map(cve).collect(),
            epss: (0..n).map(|i| (cve(i), 0.5 + i as f64 / 1000.0)).collect(),
            ..ThreatIntelFacts::default()
        });
        ticket.facts.risk = Some(RiskFacts {
            high_risk: true,
            reasons: (0..n)
                .map(|i| format!("OSV-{i:05} CVSS 10.0 >= 7.0"))
                .collect(),
            confirmed_at: None,
        });
        ticket
    }

    #[test]
    fn a_report_fits_its_bound_whatever_the_findings_and_counts_what_it_left_out() {
        let obj = object("web-01");
        for n in [0, 1, 6, 50, 500] {
            let mut report = build(&obj, &crowded(n));
            fit(&mut report.spec, 1536);
            let spec = &report.spec;
            let json = serde_json::to_vec(spec).unwrap();
            assert!(json.len() <= 1536, "{n} findings: {} bytes", json.len());
            let findings = spec.findings.as_ref().unwrap();
            assert_eq!(
                findings.items.len() + findings.omitted as usize,
                n,
                "every finding listed or counted"
            );
            if n > 0 {
                assert_eq!(findings.items[0].id, "OSV-00000", "the most severe kept");
                assert!(spec.threat_intel.as_ref().unwrap().epss.is_empty() || n < 6);
            }
            let intel = spec.threat_intel.as_ref().unwrap();
            assert_eq!(
                intel.known_exploited.len() + intel.known_exploited_omitted as usize,
                n
            );
            assert_eq!(spec.reasons.len() + spec.reasons_omitted as usize, n);
        }
        // Within the bound: nothing is left out.
        let mut small = build(&obj, &crowded(1));
        let before = small.spec.clone();
        fit(&mut small.spec, 4096);
        assert_eq!(small.spec, before);
    }

    #[test]
    fn the_verdict_and_the_owner_come_from_the_ticket_and_the_object() {
        let obj = object("web-01");
        let mut ticket = Ticket::new("web-01", "1234abcd-g3-s1", 1_767_225_600_000);
        ticket.status = Status::Finished;
        ticket.facts.online = Some(false);
        let report = build(&obj, &ticket);
        assert_eq!(report.spec.verdict, "Offline");
        assert_eq!(report.spec.generation, 3);
        let owner = &report.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("AssetScan", "1234abcd-5678", Some(true))
        );
        assert_eq!(
            report
                .metadata
                .labels
                .unwrap()
                .get(SCAN_UID_LABEL)
                .map(String::as_str),
            Some("1234abcd-5678")
        );
        ticket.status = Status::Failed;
        assert_eq!(build(&obj, &ticket).spec.verdict, "Failed");
    }

    #[test]
    fn a_report_names_its_sbom_and_a_run_failed_on_it_writes_none() {
        let obj = object("web-01");
        let mut ticket = Ticket::new("web-01", "1234abcd-g3-s1", 1_767_225_600_000);
        ticket.status = Status::Finished;
        assert!(scanned(&ticket), "listed software");
        let sbom = assetscan_domain::SbomRef::new("artifacts", "web.cdx.json", None).unwrap();
        let mut facts = assetscan_domain::SbomFacts {
            packages: 300,
            skipped: 2,
            ..assetscan_domain::SbomFacts::of(&sbom)
        };
        ticket.facts.sbom = Some(facts.clone());
        assert!(scanned(&ticket));
        let json = serde_json::to_value(build(&obj, &ticket).spec.sbom).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"source": "artifacts", "ref": "web.cdx.json",
                "packages": 300, "skipped": 2, "unsupported": 0})
        );
        ticket.status = Status::Failed;
        facts.problem = Some(assetscan_domain::SbomProblem::NotFound);
        ticket.facts.sbom = Some(facts);
        assert!(
            !scanned(&ticket),
            "nothing scanned: the previous report stays"
        );
    }
}
