//! The AssetScanReport of a run that ended: built from its ticket, created
//! once, owned by its AssetScan, the oldest pruned beyond the object's
//! `reportHistoryLimit`. Redis holds a run's process state and forgets it
//! (retention, data loss); the report is what the run found, kept in the
//! API server.

use super::status::{last_error_status, saturating_i64, time_from_ms};
use crate::crd::{
    AssetScan, AssetScanReport, AssetScanReportSpec, DEFAULT_REPORT_HISTORY_LIMIT, ReportFinding,
    ReportFindings, ReportNotification, ReportThreatIntel,
};
use assetscan_domain::run_order;
use assetscan_domain::ticket::{Status, Ticket};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::{Resource, ResourceExt};
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

/// The report of `ticket`'s run (which ended) of `obj`.
pub fn build(obj: &AssetScan, ticket: &Ticket) -> AssetScanReport {
    let facts = &ticket.facts;
    let findings = facts.vulnerabilities.as_ref().map(|v| {
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
    });
    let threat_intel = facts.threat_intel.as_ref().map(|t| {
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
            epss: scores
                .into_iter()
                .take(MAX_EPSS)
                .map(|(cve, score)| (cve.clone(), *score))
                .collect(),
            epss_omitted: t
                .epss_omitted
                .saturating_add(u32::try_from(t.epss.len() - kept).unwrap_or(u32::MAX)),
        }
    });
    let notification = facts.notification.as_ref().map(|n| ReportNotification {
        state: n.state,
        idempotency_key: n.idempotency_key.clone(),
        sent_at: n.sent_at.map(time_from_ms),
        receipts: n.receipt.clone(),
    });
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
            started_at: time_from_ms(ticket.created_at),
            ended_at: time_from_ms(ticket.updated_at),
            findings,
            threat_intel,
            notification,
            last_error: ticket.last_error.as_ref().map(last_error_status),
        },
    }
}

/// The AssetScan as the report's controlling owner: the garbage collector
/// deletes its reports with it.
fn owner(obj: &AssetScan) -> Option<OwnerReference> {
    let mut reference = obj.controller_owner_ref(&())?;
    reference.block_owner_deletion = Some(true);
    Some(reference)
}

/// Creates the report of `ticket`'s run; one that exists already (a retry,
/// another replica) is success: the report of a run is written once.
pub async fn create(
    api: &Api<AssetScanReport>,
    report: &AssetScanReport,
) -> Result<(), kube::Error> {
    match api.create(&PostParams::default(), report).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 && e.reason == "AlreadyExists" => Ok(()),
        Err(err) => Err(err),
    }
}

/// The reports kept once `latest` is written: `latest`, then those of
/// `kept` (newest first), at most `obj`'s `reportHistoryLimit`. The ones
/// that fall off are deleted (one already gone is fine); one that cannot be
/// deleted now stays on the list, to be deleted after the next run. No
/// list of reports is read: what a run costs does not grow with the
/// number of reports.
pub async fn prune(
    api: &Api<AssetScanReport>,
    obj: &AssetScan,
    latest: &str,
    kept: &[String],
) -> Vec<String> {
    let limit = obj
        .spec
        .report_history_limit
        .unwrap_or(DEFAULT_REPORT_HISTORY_LIMIT);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut names: Vec<String> = std::iter::once(latest.to_owned())
        .chain(kept.iter().filter(|n| *n != latest).cloned())
        .collect();
    let dropped = names.split_off(limit.min(names.len()));
    for name in dropped {
        match api.delete(&name, &DeleteParams::background()).await {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::AssetScanSpec;

    fn object(name: &str) -> AssetScan {
        let mut obj = AssetScan::new(
            name,
            AssetScanSpec {
                asset_id: "web-01".into(),
                target: Default::default(),
                software: vec![],
                policy: Default::default(),
                notify: vec![],
                rescan_interval: None,
                suspend: false,
                report_history_limit: None,
            },
        );
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
}
