//! The `AssetScan` custom resource: what a user asks to have scanned (spec),
//! and the durable, user-facing mirror of the scan ticket (status). Schema
//! and CEL rules only: the controller converts the spec into the pipeline's
//! request and maps tickets onto the status (`controller/request.rs`,
//! `controller/status.rs`).
//!
//! The CRD in `crds/` is generated from these types ([`crd_yaml`]) and kept in
//! sync by a test. Validation lives in the schema, so the API server rejects a
//! bad object before the operator ever sees it:
//!
//! - plain OpenAPI constraints (lengths, ranges, patterns, enums) from
//!   `#[schemars(...)]`;
//! - CEL rules (`x-kubernetes-validations`) from kube's `#[x_kube(...)]` /
//!   `#[kube(validation = ...)]`, for what OpenAPI cannot say: "exactly one
//!   of", immutability, and the fencing rule on status (see docs/design.md,
//!   "Fencing the mirror"): a status write that goes backwards in
//!   `(fencingToken, revision)` is refused by the API server itself, so a
//!   stale executor cannot overwrite newer state even if it slipped one write
//!   into Redis before the takeover.

use crate::domain::{DEFAULT_CVSS_THRESHOLD, DEFAULT_EPSS_THRESHOLD, ThreatIntelPolicy};
use crate::ticket::{NotificationState, Status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Same character set as the Redis key validation of asset ids (no `{`, `}`,
/// whitespace or control characters; at most 128 bytes), but stricter: ASCII
/// only, so 128 characters are 128 bytes, and no leading punctuation.
pub const ASSET_ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:/-]*$";

/// A Go-style duration restricted to whole `h`, `m` and `s` units (`6h`,
/// `30m`, `1h30m`): the operator's duration grammar (`crate::duration`) with
/// those units, and a subset of CEL's `duration()`, so the schema can also
/// enforce a minimum.
pub const DURATION_PATTERN: &str = "^([0-9]+[hms])+$";

const KEEP_STATUS_RULE: &str = "!has(oldSelf.status) || has(self.status)";
const KEEP_STATUS_MESSAGE: &str = "status may not be removed once written: it carries the fencing token that stops stale executors";

const ASSET_ID_IMMUTABLE_MESSAGE: &str = "assetId is immutable: the status fencing token belongs to this asset's fencing counter; create a new AssetScan for another asset";

const TARGET_RULE: &str = "has(self.inventoryRef) ? !has(self.host) && !has(self.ports) : has(self.host) && has(self.ports)";
const TARGET_MESSAGE: &str = "set exactly one of: host (with ports), or inventoryRef";

const PACKAGE_RULE: &str = "has(self.purl) ? !has(self.name) && !has(self.ecosystem) && !has(self.version) : has(self.name) && has(self.ecosystem) && has(self.version)";
const PACKAGE_MESSAGE: &str = "set exactly one of: purl, or name with ecosystem and version";

const RESCAN_RULE: &str = "duration(self) >= duration('1m')";
const RESCAN_MESSAGE: &str = "rescanInterval must be at least 1m";

const FENCE_PAIR_RULE: &str = "has(self.fencingToken) == has(self.revision)";
const FENCE_PAIR_MESSAGE: &str = "status.fencingToken and status.revision must be set together";

/// Lexicographic `(fencingToken, revision)` may not decrease. A transition
/// rule: the API server evaluates it only on update, and only once a status
/// exists, so the first status write always passes.
const FENCE_RULE: &str = "!has(oldSelf.fencingToken) || (has(self.fencingToken) && (self.fencingToken > oldSelf.fencingToken || (self.fencingToken == oldSelf.fencingToken && self.revision >= oldSelf.revision)))";
/// The API server's message when the fencing rule rejects a status write
/// (contained in the 422's message), so the operator can tell a fenced
/// stale write from any other invalid status.
pub const FENCE_MESSAGE: &str = "status.fencingToken/revision may not go backwards (a stale executor tried to overwrite newer state)";

/// `observedGeneration` may not decrease either: an executor that read an
/// older spec (a stale cache, a stall) draws a fresh, higher token like any
/// other, so the token alone cannot tell that its run is about an outdated
/// generation. A transition rule, like the token's.
const GENERATION_RULE: &str = "!has(oldSelf.observedGeneration) || (has(self.observedGeneration) && self.observedGeneration >= oldSelf.observedGeneration)";
pub const GENERATION_MESSAGE: &str = "status.observedGeneration may not go backwards (a stale executor tried to overwrite newer state)";

/// Whether an API server's refusal is one of the status fences (as opposed
/// to any other invalid status).
pub fn is_fence_refusal(message: &str) -> bool {
    message.contains(FENCE_MESSAGE) || message.contains(GENERATION_MESSAGE)
}

/// What to scan, and how to judge and report what is found.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "assetscan.io",
    version = "v1alpha1",
    kind = "AssetScan",
    plural = "assetscans",
    namespaced,
    status = "AssetScanStatus",
    derive = "PartialEq",
    shortname = "ascan",
    category = "security",
    doc = "Scan one asset: check it is online, query its vulnerabilities, enrich with threat intelligence when needed, and notify at once on a confirmed high risk.",
    printcolumn(name = "Asset", type_ = "string", json_path = ".spec.assetId"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "High-Risk", type_ = "boolean", json_path = ".status.highRisk"),
    printcolumn(name = "Notified", type_ = "string", json_path = ".status.notification.state"),
    printcolumn(name = "Token", type_ = "integer", json_path = ".status.fencingToken"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(KEEP_STATUS_RULE).message(KEEP_STATUS_MESSAGE)
)]
#[serde(rename_all = "camelCase")]
pub struct AssetScanSpec {
    /// The asset's id: the scope of the lock, the fencing counter and the
    /// tickets. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message(ASSET_ID_IMMUTABLE_MESSAGE))]
    #[schemars(length(min = 1, max = 128), regex(pattern = ASSET_ID_PATTERN))]
    pub asset_id: String,

    /// Where the online check looks.
    pub target: Target,

    /// Packages the vulnerability query asks about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 500))]
    pub software: Vec<Package>,

    /// How findings are judged.
    #[serde(default)]
    pub policy: Policy,

    /// Notification channels (names from the operator configuration) to alert
    /// on a confirmed high risk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        inner(length(min = 1, max = 63), regex(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub notify: Vec<String>,

    /// Scan again this long after a run ends (`6h`, `30m`, `1h30m`; at least
    /// `1m`). Absent: scan once per spec generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(RESCAN_RULE).message(RESCAN_MESSAGE))]
    #[schemars(length(max = 32), regex(pattern = DURATION_PATTERN))]
    pub rescan_interval: Option<String>,

    /// Start no new runs while true. A run in flight finishes.
    #[serde(default)]
    pub suspend: bool,

    /// How many AssetScanReports (one per finished run) are kept; older
    /// ones are deleted. Default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub report_history_limit: Option<u32>,
}

/// Reports kept per AssetScan unless `reportHistoryLimit` says otherwise.
pub const DEFAULT_REPORT_HISTORY_LIMIT: u32 = 5;

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
    #[schemars(schema_with = "phase_schema")]
    pub phase: Status,
    /// `HighRisk`, `NoHighRisk`, `Offline` or `Failed`.
    #[schemars(length(max = 16))]
    pub verdict: String,
    /// Why the verdict is high risk (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub reasons: Vec<String>,
    pub started_at: Time,
    pub ended_at: Time,
    /// What the vulnerability query found; absent when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<ReportFindings>,
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
    /// The highest EPSS scores (bounded), by CVE.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub epss: std::collections::BTreeMap<String, f64>,
    /// EPSS scores not listed.
    pub epss_omitted: u32,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReportNotification {
    #[schemars(schema_with = "notification_state_schema")]
    pub state: NotificationState,
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Time>,
    /// What each channel's receiver answered.
    #[serde(default)]
    pub receipts: std::collections::BTreeMap<String, String>,
}

/// Where the asset is reached: `host` with `ports`, or `inventoryRef`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new(TARGET_RULE).message(TARGET_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// Host name or IP address to probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = "^[A-Za-z0-9._:-]+$"))]
    pub host: Option<String>,

    /// TCP ports to probe on `host`; the asset is online if one answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "ports_schema")]
    pub ports: Vec<u16>,

    /// Id of the asset in the operator's inventory, which knows how to reach it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub inventory_ref: Option<String>,
}

/// A package to look up: `name` + `ecosystem` + `version` (OSV terms, e.g.
/// `openssl`, `Debian:12`, `3.0.11-1`), or a `purl`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new(PACKAGE_RULE).message(PACKAGE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Package name as the ecosystem spells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub name: Option<String>,

    /// OSV ecosystem, e.g. `PyPI`, `npm`, `Debian:12`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub ecosystem: Option<String>,

    /// Installed version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub version: Option<String>,

    /// Package URL, e.g. `pkg:npm/lodash@4.17.20`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 1024),
        regex(pattern = "^pkg:[A-Za-z][A-Za-z0-9.+-]*/\\S+$")
    )]
    pub purl: Option<String>,
}

/// How findings are judged. High risk = CVSS ≥ `cvssThreshold`, or listed as
/// known exploited, or EPSS ≥ `epssThreshold`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// CVSS base score from which a finding is high risk.
    #[serde(default = "default_cvss_threshold")]
    #[schemars(range(min = 0.0, max = 10.0))]
    pub cvss_threshold: f64,

    #[serde(default)]
    pub threat_intel: ThreatIntelPolicy,

    /// EPSS probability from which a finding is high risk.
    #[serde(default = "default_epss_threshold")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub epss_threshold: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            cvss_threshold: default_cvss_threshold(),
            threat_intel: ThreatIntelPolicy::default(),
            epss_threshold: default_epss_threshold(),
        }
    }
}

fn default_cvss_threshold() -> f64 {
    DEFAULT_CVSS_THRESHOLD
}

fn default_epss_threshold() -> f64 {
    DEFAULT_EPSS_THRESHOLD
}

/// The mirror of the current run's ticket, fenced like the ticket itself.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new(FENCE_PAIR_RULE).message(FENCE_PAIR_MESSAGE),
    validation = Rule::new(FENCE_RULE).message(FENCE_MESSAGE),
    validation = Rule::new(GENERATION_RULE).message(GENERATION_MESSAGE)
)]
#[serde(rename_all = "camelCase")]
pub struct AssetScanStatus {
    /// The ticket's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "phase_schema")]
    pub phase: Option<Status>,

    /// `<assetId>/<run>`; also the notification's idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket_id: Option<String>,

    /// The run's id: a new spec generation or a scheduled rescan starts a new run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,

    /// The fencing token of the ticket's current holder. Never decreases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub fencing_token: Option<i64>,

    /// The ticket's revision under `fencingToken`. `(fencingToken, revision)`
    /// never decreases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub revision: Option<i64>,

    /// Pipeline steps done in this run (`online_check`, `vuln_query`,
    /// `threat_intel`, `notify`); a takeover never repeats them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completed_steps: Vec<String>,

    /// The last failure of a step, kept until the run moves on or ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<LastErrorStatus>,

    /// What the vulnerability query found; absent until it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vulnerabilities: Option<VulnerabilitySummary>,

    /// The high-risk notification of this run, if one was due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<NotificationStatus>,

    /// The high-risk verdict; absent until judged (or when the asset was offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_risk: Option<bool>,

    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// When the last run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scan_time: Option<Time>,

    /// When the next run is due, if rescans are scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_scan_time: Option<Time>,

    /// The value of the `assetscan.io/rescan` annotation the last run was
    /// started for (recorded with that run's claim): a new value starts one
    /// new run once the current one has ended, the same value none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_rescan: Option<String>,

    /// The AssetScanReport of the latest run that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_report: Option<String>,

    /// The AssetScanReports kept, newest first (at most
    /// `reportHistoryLimit`): the operator deletes the ones that fall off
    /// this list, without listing reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub reports: Vec<String>,

    /// `Ready`, `Reconciling` and `Stalled` describe the operator's work;
    /// `HighRisk` describes the asset, so a finding never reads as a failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LastErrorStatus {
    /// The pipeline step that failed.
    pub step: String,
    #[schemars(length(max = 1024))]
    pub message: String,
    /// When the step failed.
    pub at: Time,
    /// Attempt number of the step that failed (1-based).
    pub attempt: i64,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VulnerabilitySummary {
    /// Findings, including those scored 0.
    pub total: i64,
    /// Findings by CVSS rating: critical ≥ 9.0, high ≥ 7.0, medium ≥ 4.0, low > 0.
    pub critical: i64,
    pub high: i64,
    pub medium: i64,
    pub low: i64,
    /// Findings without a usable CVSS score.
    pub unknown: i64,
    /// CVEs listed as known exploited; absent when threat intel was not consulted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_exploited: Option<i64>,
    /// The highest CVSS base score among the findings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cvss: Option<f64>,
    /// The most severe findings' ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub top_ids: Vec<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NotificationStatus {
    /// `sending` is recorded before the call: a takeover re-sends with the
    /// same key (at-least-once delivery, exactly-once effect at an
    /// idempotent receiver).
    #[schemars(schema_with = "notification_state_schema")]
    pub state: NotificationState,
    /// Equal to the ticket id: receivers deduplicate on it.
    pub idempotency_key: String,
    /// When delivery succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Time>,
}

/// The YAML of every CRD the operator owns (today: `AssetScan`), as the `crd`
/// subcommand prints it and as `crds/` stores it.
pub fn crd_yaml() -> String {
    serde_yaml::to_string(&AssetScan::crd()).expect("a CRD is plain data and serializes to YAML")
}

/// The AssetScanReport CRD as YAML.
pub fn report_crd_yaml() -> String {
    serde_yaml::to_string(&AssetScanReport::crd())
        .expect("a CRD is plain data and serializes to YAML")
}

/// Ports as `int32` in 1..=65535. Written out because schemars would describe
/// `u16` with format `uint16`, which the API server does not recognize.
fn ports_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "minItems": 1,
        "maxItems": 16,
        "items": { "type": "integer", "format": "int32", "minimum": 1, "maximum": 65535 },
        "x-kubernetes-list-type": "set",
    })
}

/// The ticket's wire names, so `phase` reads exactly like the ticket and the
/// audit stream.
fn phase_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    json_schema!({ "type": "string", "enum": names })
}

fn notification_state_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<serde_json::Value> = [
        NotificationState::Sending,
        NotificationState::Sent,
        NotificationState::Skipped,
    ]
    .iter()
    .map(|s| serde_json::to_value(s).expect("a unit variant serializes to a string"))
    .collect();
    json_schema!({ "type": "string", "enum": names })
}
