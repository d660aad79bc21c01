//! The AssetScanReport: the immutable record of one run that ended.

use super::LastErrorStatus;
use assetscan_domain::ticket::{NotificationState, Status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Reports kept per AssetScan unless `reportHistoryLimit` says otherwise:
/// the latest run's. Earlier runs stay in their tickets for
/// `tickets.retention` (`assetscan-operator ticket history`); each report
/// kept adds up to about 2.7 KB per asset in etcd (docs/scaling.md).
pub const DEFAULT_REPORT_HISTORY_LIMIT: u32 = 1;

const REPORT_IMMUTABLE_RULE: &str = "self == oldSelf";
const REPORT_IMMUTABLE_MESSAGE: &str =
    "an AssetScanReport is the record of a run that ended: it is immutable";

/// The durable record of one run that ended, written once by the operator
/// when the run ends and never changed: what Redis held as process state,
/// kept in the API server. Owned by its AssetScan (deleted with it), named
/// from the run id (so a retry or a second replica writes it at most once).
#[allow(
    clippy::duplicated_attributes,
    reason = "two printer columns of one type read as a repeated `type_` to the lint"
)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "assetscan.io",
    version = "v1alpha1",
    kind = "AssetScanReport",
    plural = "assetscanreports",
    namespaced,
    derive = "PartialEq",
    shortname = "asr",
    category = "security",
    doc = "The record of one AssetScan run that ended: its verdict and reasons, findings, threat intelligence and notification receipts. Written once by the operator; immutable.",
    printcolumn(name = "Asset", type_ = "string", json_path = ".spec.assetId"),
    printcolumn(name = "Verdict", type_ = "string", json_path = ".spec.verdict"),
    printcolumn(
        name = "Findings",
        type_ = "integer",
        json_path = ".spec.findings.total"
    ),
    printcolumn(
        name = "Max-CVSS",
        type_ = "number",
        json_path = ".spec.findings.maxCvss"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(REPORT_IMMUTABLE_RULE).message(REPORT_IMMUTABLE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct AssetScanReportSpec {
    pub asset_id: String,
    /// The AssetScan the run belongs to.
    pub scan: String,
    /// The run's id, and the ticket's (`<assetId>/<run>`: the notification's
    /// idempotency key).
    pub run: String,
    pub ticket_id: String,
    /// The spec generation the run scanned.
    pub generation: i64,
    /// The fencing token the run ended under.
    pub fencing_token: i64,
    /// `FINISHED` or `FAILED`.
    #[schemars(schema_with = "super::phase_schema")]
    pub phase: Status,
    /// `HighRisk`, `NoHighRisk`, `Offline` or `Failed`.
    #[schemars(length(max = 16))]
    pub verdict: String,
    /// Why the verdict is high risk (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub reasons: Vec<String>,
    /// Reasons not listed in `reasons` (the report's size bound).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasons_omitted: u32,
    pub started_at: Time,
    pub ended_at: Time,
    /// The SBOM the run scanned, when the AssetScan names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbom: Option<ReportSbom>,
    /// What the vulnerability query found; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<ReportFindings>,
    /// What the query asked about, and the first packages it could not
    /// ask about with why; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<ReportCoverage>,
    /// The findings the run's VEX documents and FindingExceptions
    /// suppressed, each with its statement, and the statements that no
    /// longer applied; absent when the run had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triage: Option<ReportTriage>,
    /// Known-exploited CVEs and the highest EPSS scores, if looked up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threat_intel: Option<ReportThreatIntel>,
    /// The high-risk notification and each channel's receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<ReportNotification>,
    /// The failure that ended the run, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastErrorStatus>,
}

/// Which SBOM a run scanned: source, reference, the digest of the document
/// read, and what was taken from it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportSbom {
    pub source: String,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Distinct packages taken from its purls.
    pub packages: u32,
    /// Entries without a purl, skipped.
    pub skipped: u32,
    /// Purls of a type without a vulnerability ecosystem, skipped.
    pub unsupported: u32,
}

/// A run's coverage as the status shows it, with what was asked by
/// ecosystem and the first entries not asked.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportCoverage {
    pub listed: u32,
    pub asked: u32,
    /// Below the policy's minimum, or nothing asked. Absent: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub low: bool,
    /// Not asked, by reason.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_asked: std::collections::BTreeMap<String, u32>,
    /// Asked, by ecosystem without its release (`Debian`, `npm`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub asked_by_ecosystem: std::collections::BTreeMap<String, u32>,
    /// The first entries not asked (at most 20), with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub not_asked_listed: Vec<ReportNotAsked>,
}

/// One entry not asked about: its purl (or name) and the reason.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ReportNotAsked {
    pub package: String,
    pub reason: String,
}

/// A run's triage: what was suppressed, by which statement, and what no
/// longer applied.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportTriage {
    /// Statements in force.
    pub statements: u32,
    /// Findings suppressed, in all.
    pub suppressed_total: u32,
    /// The suppressed findings, most severe first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub suppressed: Vec<ReportSuppressed>,
    /// Statements that had expired: their findings were raised again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub expired: Vec<String>,
    /// Statements whose packages could not be told: not applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub unresolved: Vec<String>,
    /// VEX documents that could not be read, and why: their findings stand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub unread: Vec<String>,
}

/// A suppressed finding and the statement that suppressed it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportSuppressed {
    pub id: String,
    pub package: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvss: Option<f64>,
    /// `notAffected`, `falsePositive`, `fixed` or `accepted`.
    pub state: String,
    /// The statement: `FindingException <namespace>/<name>`, or
    /// `VEX <source>/<ref> #<n>`.
    pub by: String,
    pub justification: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Time>,
}

/// Findings, most severe first, bounded; what was cut is counted.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportFindings {
    pub total: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cvss: Option<f64>,
    #[schemars(length(max = 50))]
    pub items: Vec<ReportFinding>,
    /// Findings not listed in `items` (the provider's bound or the
    /// report's).
    pub omitted: u32,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportFinding {
    pub id: String,
    pub package: String,
    pub severity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cvss: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub cves: Vec<String>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportThreatIntel {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub known_exploited: Vec<String>,
    /// Known-exploited CVEs not listed (the report's size bound).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub known_exploited_omitted: u32,
    /// The highest EPSS scores (bounded), by CVE.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub epss: std::collections::BTreeMap<String, f64>,
    /// EPSS scores not listed.
    pub epss_omitted: u32,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportNotification {
    #[schemars(schema_with = "super::notification_state_schema")]
    pub state: NotificationState,
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Time>,
    /// What each channel's receiver answered.
    #[serde(default)]
    pub receipts: std::collections::BTreeMap<String, String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
