//! The `AssetScan` custom resource: what a user asks to have scanned (spec),
//! and the durable, user-facing mirror of the scan ticket (status).
//!
//! The CRD in `crds/` is generated from these types ([`crd_yaml`]) and kept in
//! sync by a test. Validation lives in the schema, so the API server rejects a
//! bad object before the operator ever sees it:
//!
//! - plain OpenAPI constraints (lengths, ranges, patterns, enums) from
//!   `#[schemars(...)]`;
//! - CEL rules (`x-kubernetes-validations`) from kube's `#[x_kube(...)]` /
//!   `#[kube(validation = ...)]`, for what OpenAPI cannot say: "exactly one
//!   of", immutability, and the fencing rule on status (see DESIGN.md,
//!   "Fencing the mirror"): a status write that goes backwards in
//!   `(fencingToken, revision)` is refused by the API server itself, so a
//!   stale executor cannot overwrite newer state even if it slipped one write
//!   into Redis before the takeover.

use crate::ticket::{NotificationState, Status, Ticket, VulnFacts};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Same character set as the Redis key validation of asset ids (no `{`, `}`,
/// whitespace or control characters; at most 128 bytes), but stricter: ASCII
/// only, so 128 characters are 128 bytes, and no leading punctuation.
pub const ASSET_ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:/-]*$";

/// A Go-style duration restricted to whole `h`, `m` and `s` units (`6h`,
/// `30m`, `1h30m`): the grammar of [`parse_duration`] and a subset of CEL's
/// `duration()`, so the schema can also enforce a minimum.
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
const FENCE_MESSAGE: &str = "status.fencingToken/revision may not go backwards (a stale executor tried to overwrite newer state)";

/// Bound on free-text messages copied into status, so that a provider's long
/// error text can never make a status write fail schema validation.
const MAX_MESSAGE_LEN: usize = 1024;

/// Vulnerability ids shown in `status.vulnerabilities.topIds`.
const MAX_TOP_IDS: usize = 5;

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
    7.0
}

fn default_epss_threshold() -> f64 {
    0.5
}

/// When to consult threat intelligence (known-exploited catalog, EPSS).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreatIntelPolicy {
    /// When vulnerabilities were found whose CVSS alone does not decide.
    #[default]
    WhenNeeded,
    /// Whenever vulnerabilities were found.
    Always,
    /// Never: judge by CVSS alone.
    Never,
}

/// The mirror of the current run's ticket, fenced like the ticket itself.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = Rule::new(FENCE_PAIR_RULE).message(FENCE_PAIR_MESSAGE),
    validation = Rule::new(FENCE_RULE).message(FENCE_MESSAGE)
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

/// Condition types and statuses (Kubernetes API conventions).
pub mod condition {
    /// The last run finished: the status describes a complete scan.
    pub const READY: &str = "Ready";
    /// A run is in progress.
    pub const RECONCILING: &str = "Reconciling";
    /// The run gave up (retries exhausted); a new spec generation or the next
    /// scheduled rescan starts a new one.
    pub const STALLED: &str = "Stalled";
    /// A high-risk vulnerability was confirmed on the asset. About the asset,
    /// not the operator.
    pub const HIGH_RISK: &str = "HighRisk";

    pub const TRUE: &str = "True";
    pub const FALSE: &str = "False";
    pub const UNKNOWN: &str = "Unknown";
}

impl AssetScan {
    /// The floor for the next fencing token (`acquire`'s ARGV): the token the
    /// status last recorded, or 0. After Redis loses data, this keeps tokens
    /// from going backwards from the cluster's point of view.
    pub fn token_floor(&self) -> u64 {
        self.status
            .as_ref()
            .and_then(|s| s.fencing_token)
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0)
    }
}

impl AssetScanStatus {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Inserts or replaces the condition of the same type, like apimachinery's
    /// `meta.SetStatusCondition`: while its status stays the same, the previous
    /// `lastTransitionTime` is kept, so mirroring an unchanged ticket again
    /// produces an identical status (no timestamp churn, no needless writes).
    pub fn set_condition(&mut self, mut condition: Condition) {
        match self
            .conditions
            .iter_mut()
            .find(|c| c.type_ == condition.type_)
        {
            Some(existing) => {
                if existing.status == condition.status {
                    condition.last_transition_time = existing.last_transition_time.clone();
                }
                *existing = condition;
            }
            None => self.conditions.push(condition),
        }
    }
}

/// The CR status mirroring `ticket`.
///
/// `previous` is the status currently stored: its conditions keep their
/// transition times when unchanged, and its `lastScanTime` is kept while a new
/// run is in progress. `generation` is the `metadata.generation` the run acts
/// on; `now` stamps conditions that change; `next_scan` is when the next run
/// is due, if any. Times are truncated to whole seconds, as `metav1.Time` is
/// on the wire, so the result compares equal to what the API server returns.
pub fn status_from_ticket(
    ticket: &Ticket,
    previous: Option<&AssetScanStatus>,
    generation: Option<i64>,
    now: Timestamp,
    next_scan: Option<Timestamp>,
) -> AssetScanStatus {
    let facts = &ticket.facts;
    let last_scan_time = if ticket.status.is_terminal() {
        Some(time_from_ms(ticket.updated_at))
    } else {
        previous.and_then(|p| p.last_scan_time.clone())
    };
    let mut status = AssetScanStatus {
        phase: Some(ticket.status),
        ticket_id: Some(ticket.id.clone()),
        run: Some(ticket.run.clone()),
        fencing_token: Some(saturating_i64(ticket.fencing_token)),
        revision: Some(saturating_i64(ticket.revision)),
        completed_steps: ticket
            .completed_steps
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect(),
        last_error: ticket.last_error.as_ref().map(|e| LastErrorStatus {
            step: e.step.as_str().to_owned(),
            message: truncate(&e.message, MAX_MESSAGE_LEN),
            at: time_from_ms(e.at),
            attempt: i64::from(e.attempt),
        }),
        vulnerabilities: facts.vulnerabilities.as_ref().map(|v| {
            summarize(
                v,
                facts.threat_intel.as_ref().map(|t| t.known_exploited.len()),
            )
        }),
        notification: facts.notification.as_ref().map(|n| NotificationStatus {
            state: n.state,
            idempotency_key: n.idempotency_key.clone(),
            sent_at: n.sent_at.map(time_from_ms),
        }),
        high_risk: facts.risk.as_ref().map(|r| r.high_risk),
        observed_generation: generation,
        last_scan_time,
        next_scan_time: next_scan.map(whole_seconds),
        conditions: previous.map(|p| p.conditions.clone()).unwrap_or_default(),
    };

    let now = whole_seconds(now);
    let cond = |type_: &str, status: &str, reason: &str, message: String| Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: truncate(&message, MAX_MESSAGE_LEN),
        observed_generation: generation,
        last_transition_time: now.clone(),
    };
    let (ready, reconciling, stalled) = match ticket.status {
        Status::Finished => {
            let done = if facts.online == Some(false) {
                "scan complete: asset offline".to_owned()
            } else {
                "scan complete".to_owned()
            };
            (
                cond(
                    condition::READY,
                    condition::TRUE,
                    "ScanComplete",
                    done.clone(),
                ),
                cond(
                    condition::RECONCILING,
                    condition::FALSE,
                    "ScanComplete",
                    done.clone(),
                ),
                cond(condition::STALLED, condition::FALSE, "ScanComplete", done),
            )
        }
        Status::Failed => {
            let why = match &ticket.last_error {
                Some(e) => format!(
                    "{} failed after {} attempt(s): {}",
                    e.step, e.attempt, e.message
                ),
                None => "scan failed".to_owned(),
            };
            (
                cond(condition::READY, condition::FALSE, "Failed", why.clone()),
                cond(
                    condition::RECONCILING,
                    condition::FALSE,
                    "Failed",
                    why.clone(),
                ),
                cond(condition::STALLED, condition::TRUE, "Failed", why),
            )
        }
        phase => {
            let progress = format!("scan in progress at {phase}");
            (
                cond(
                    condition::READY,
                    condition::UNKNOWN,
                    "Scanning",
                    progress.clone(),
                ),
                cond(
                    condition::RECONCILING,
                    condition::TRUE,
                    "Scanning",
                    progress.clone(),
                ),
                cond(condition::STALLED, condition::FALSE, "Scanning", progress),
            )
        }
    };
    let high_risk = match &facts.risk {
        Some(risk) if risk.high_risk => cond(
            condition::HIGH_RISK,
            condition::TRUE,
            "HighRiskFound",
            risk.reasons.join("; "),
        ),
        Some(_) => cond(
            condition::HIGH_RISK,
            condition::FALSE,
            "NoHighRisk",
            "no finding reaches the policy's thresholds".to_owned(),
        ),
        None if facts.online == Some(false) => cond(
            condition::HIGH_RISK,
            condition::UNKNOWN,
            "AssetOffline",
            "asset offline: not assessed".to_owned(),
        ),
        None => cond(
            condition::HIGH_RISK,
            condition::UNKNOWN,
            "NotAssessed",
            "not assessed yet".to_owned(),
        ),
    };
    for c in [ready, reconciling, stalled, high_risk] {
        status.set_condition(c);
    }
    status
}

fn summarize(v: &VulnFacts, known_exploited: Option<usize>) -> VulnerabilitySummary {
    use crate::ticket::Severity;
    let count = |s: Severity| i64::from(v.by_severity.get(&s).copied().unwrap_or(0));
    let mut top_ids: Vec<String> = Vec::with_capacity(MAX_TOP_IDS);
    for finding in &v.findings {
        if top_ids.len() == MAX_TOP_IDS {
            break;
        }
        // One record can match several queried packages.
        if !top_ids.contains(&finding.id) {
            top_ids.push(finding.id.clone());
        }
    }
    VulnerabilitySummary {
        total: i64::from(v.total),
        critical: count(Severity::Critical),
        high: count(Severity::High),
        medium: count(Severity::Medium),
        low: count(Severity::Low),
        unknown: count(Severity::Unknown),
        known_exploited: known_exploited.map(|n| saturating_i64(n as u64)),
        max_cvss: v.max_cvss,
        top_ids,
    }
}

/// Malformed `rescanInterval` (the CRD's pattern makes this unreachable for
/// objects the API server accepted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {0:?}: expected whole numbers with units h, m or s, like 6h or 1h30m")]
pub struct InvalidDuration(pub String);

/// Parses a `rescanInterval` (`6h`, `30m`, `1h30m`, `90s`): the grammar of
/// [`DURATION_PATTERN`].
pub fn parse_duration(text: &str) -> Result<Duration, InvalidDuration> {
    let invalid = || InvalidDuration(text.to_owned());
    if text.is_empty() {
        return Err(invalid());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (number, tail) = rest.split_at(digits);
        let unit_secs = match tail.bytes().next() {
            Some(b'h') => 3600,
            Some(b'm') => 60,
            Some(b's') => 1,
            _ => return Err(invalid()),
        };
        let secs = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit_secs))
            .ok_or_else(invalid)?;
        total = total
            .checked_add(Duration::from_secs(secs))
            .ok_or_else(invalid)?;
        rest = &tail[1..];
    }
    Ok(total)
}

/// The YAML of every CRD the operator owns (today: `AssetScan`), as the `crd`
/// subcommand prints it and as `crds/` stores it.
pub fn crd_yaml() -> String {
    serde_yaml::to_string(&AssetScan::crd()).expect("a CRD is plain data and serializes to YAML")
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
    let names: Vec<serde_json::Value> = [NotificationState::Sending, NotificationState::Sent]
        .iter()
        .map(|s| serde_json::to_value(s).expect("a unit variant serializes to a string"))
        .collect();
    json_schema!({ "type": "string", "enum": names })
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn whole_seconds(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

fn time_from_ms(ms: u64) -> Time {
    let secs = saturating_i64(ms / 1000);
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::MAX))
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}
