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
//!   of", immutability, and the fencing rule on status (see docs/design.md,
//!   "Fencing the mirror"): a status write that goes backwards in
//!   `(fencingToken, revision)` is refused by the API server itself, so a
//!   stale executor cannot overwrite newer state even if it slipped one write
//!   into Redis before the takeover.

use crate::ticket::{NotificationState, Severity, Status, Ticket, VulnFacts};
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
    /// The condition of type `type_` (see [`condition`]), if set.
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

    use condition::{FALSE, HIGH_RISK, READY, RECONCILING, STALLED, TRUE, UNKNOWN};
    // (Ready, Reconciling, Stalled) share one reason and message: the run's.
    let (ready, reconciling, stalled, reason, message) = match ticket.status {
        Status::Finished if facts.online == Some(false) => (
            TRUE,
            FALSE,
            FALSE,
            "ScanComplete",
            "scan complete: asset offline".to_owned(),
        ),
        Status::Finished => (
            TRUE,
            FALSE,
            FALSE,
            "ScanComplete",
            "scan complete".to_owned(),
        ),
        Status::Failed => {
            let why = match &ticket.last_error {
                Some(e) => format!(
                    "{} failed after {} attempt(s): {}",
                    e.step, e.attempt, e.message
                ),
                None => "scan failed".to_owned(),
            };
            (FALSE, FALSE, TRUE, "Failed", why)
        }
        phase => (
            UNKNOWN,
            TRUE,
            FALSE,
            "Scanning",
            format!("scan in progress at {phase}"),
        ),
    };
    let (high_risk, risk_reason, risk_message) = match &facts.risk {
        Some(risk) if risk.high_risk => (TRUE, "HighRiskFound", risk.reasons.join("; ")),
        Some(_) => (
            FALSE,
            "NoHighRisk",
            "no finding reaches the policy's thresholds".to_owned(),
        ),
        None if facts.online == Some(false) => (
            UNKNOWN,
            "AssetOffline",
            "asset offline: not assessed".to_owned(),
        ),
        None => (UNKNOWN, "NotAssessed", "not assessed yet".to_owned()),
    };
    let now = whole_seconds(now);
    for (type_, value, reason, message) in [
        (READY, ready, reason, &message),
        (RECONCILING, reconciling, reason, &message),
        (STALLED, stalled, reason, &message),
        (HIGH_RISK, high_risk, risk_reason, &risk_message),
    ] {
        status.set_condition(Condition {
            type_: type_.to_owned(),
            status: value.to_owned(),
            reason: reason.to_owned(),
            message: truncate(message, MAX_MESSAGE_LEN),
            observed_generation: generation,
            last_transition_time: now.clone(),
        });
    }
    status
}

fn summarize(v: &VulnFacts, known_exploited: Option<usize>) -> VulnerabilitySummary {
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
        known_exploited: known_exploited.map(saturating_i64),
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

fn saturating_i64(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ticket::{Finding, LastError, NotificationFacts, RiskFacts, Step, ThreatIntelFacts};
    use std::collections::BTreeMap;

    const T0_MS: u64 = 1_767_225_600_123; // 2026-01-01T00:00:00.123Z

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn ticket(status: Status) -> Ticket {
        let mut t = Ticket::new("web-01", "g3-1", T0_MS);
        t.status = status;
        t.fencing_token = 7;
        t.revision = 4;
        t.updated_at = T0_MS + 60_000;
        t
    }

    fn high_risk() -> RiskFacts {
        RiskFacts {
            high_risk: true,
            reasons: vec!["CVE-2024-3094 CVSS 10.0 >= 7.0".into()],
        }
    }

    fn vulns() -> VulnFacts {
        let finding = |id: &str, package: &str, cvss: f64| Finding {
            id: id.into(),
            cves: vec![],
            package: package.into(),
            cvss: Some(cvss),
            severity: Severity::from_score(cvss),
            summary: String::new(),
        };
        VulnFacts {
            total: 8,
            by_severity: BTreeMap::from([
                (Severity::Critical, 2),
                (Severity::High, 1),
                (Severity::Medium, 1),
                (Severity::Low, 1),
                (Severity::Unknown, 3),
            ]),
            max_cvss: Some(10.0),
            findings: vec![
                finding("CVE-2024-3094", "xz-utils", 10.0),
                finding("CVE-2024-3094", "liblzma5", 10.0),
                finding("GHSA-aaaa", "a", 9.1),
                finding("GHSA-bbbb", "b", 7.5),
                finding("GHSA-cccc", "c", 5.0),
                finding("GHSA-dddd", "d", 2.0),
                finding("GHSA-eeee", "e", 1.0),
            ],
            ..Default::default()
        }
    }

    fn status_of<'a>(status: &'a AssetScanStatus, type_: &str) -> (&'a str, &'a str) {
        let c = status
            .condition(type_)
            .unwrap_or_else(|| panic!("{type_} missing"));
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn every_phase_maps_to_operator_conditions() {
        use condition::{FALSE, READY, RECONCILING, STALLED, TRUE, UNKNOWN};
        for phase in Status::ALL {
            let s = status_from_ticket(&ticket(phase), None, Some(3), at(1_000), None);
            assert_eq!(s.phase, Some(phase));
            let expected = match phase {
                Status::Finished => [
                    (TRUE, "ScanComplete"),
                    (FALSE, "ScanComplete"),
                    (FALSE, "ScanComplete"),
                ],
                Status::Failed => [(FALSE, "Failed"), (FALSE, "Failed"), (TRUE, "Failed")],
                _ => [
                    (UNKNOWN, "Scanning"),
                    (TRUE, "Scanning"),
                    (FALSE, "Scanning"),
                ],
            };
            let actual = [
                status_of(&s, READY),
                status_of(&s, RECONCILING),
                status_of(&s, STALLED),
            ];
            assert_eq!(actual, expected, "{phase}");
            assert_eq!(
                s.conditions.len(),
                4,
                "{phase}: Ready, Reconciling, Stalled, HighRisk"
            );
            assert!(
                s.conditions
                    .iter()
                    .all(|c| c.observed_generation == Some(3))
            );
            assert_eq!(s.observed_generation, Some(3));
            assert_eq!((s.fencing_token, s.revision), (Some(7), Some(4)));
            assert_eq!(s.ticket_id.as_deref(), Some("web-01/g3-1"));
            assert_eq!(s.run.as_deref(), Some("g3-1"));
        }
    }

    #[test]
    fn high_risk_is_reported_apart_from_operator_health() {
        let mut t = ticket(Status::Finished);
        t.facts.online = Some(true);
        t.facts.vulnerabilities = Some(vulns());
        t.facts.risk = Some(high_risk());
        let s = status_from_ticket(&t, None, Some(1), at(1_000), None);
        assert_eq!(s.high_risk, Some(true));
        assert_eq!(
            status_of(&s, condition::READY),
            (condition::TRUE, "ScanComplete")
        );
        assert_eq!(
            status_of(&s, condition::HIGH_RISK),
            (condition::TRUE, "HighRiskFound")
        );
        assert!(
            s.condition(condition::HIGH_RISK)
                .unwrap()
                .message
                .contains("CVE-2024-3094")
        );

        t.facts.risk = Some(RiskFacts {
            high_risk: false,
            reasons: vec![],
        });
        let s = status_from_ticket(&t, None, Some(1), at(1_000), None);
        assert_eq!(s.high_risk, Some(false));
        assert_eq!(
            status_of(&s, condition::HIGH_RISK),
            (condition::FALSE, "NoHighRisk")
        );
    }

    #[test]
    fn unassessed_risk_is_unknown() {
        let s = status_from_ticket(&ticket(Status::AssetOnline), None, None, at(1_000), None);
        assert_eq!(s.high_risk, None);
        assert_eq!(
            status_of(&s, condition::HIGH_RISK),
            (condition::UNKNOWN, "NotAssessed")
        );

        let mut offline = ticket(Status::Finished);
        offline.facts.online = Some(false);
        let s = status_from_ticket(&offline, None, None, at(1_000), None);
        assert_eq!(
            status_of(&s, condition::READY),
            (condition::TRUE, "ScanComplete")
        );
        assert_eq!(
            status_of(&s, condition::HIGH_RISK),
            (condition::UNKNOWN, "AssetOffline")
        );
    }

    #[test]
    fn vulnerability_facts_are_summarized() {
        let mut t = ticket(Status::VulnCheckDone);
        t.facts.vulnerabilities = Some(vulns());
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        let v = s.vulnerabilities.unwrap();
        assert_eq!(
            (v.total, v.critical, v.high, v.medium, v.low, v.unknown),
            (8, 2, 1, 1, 1, 3)
        );
        assert_eq!(v.max_cvss, Some(10.0));
        assert_eq!(v.known_exploited, None, "threat intel not consulted yet");
        assert_eq!(
            v.top_ids,
            [
                "CVE-2024-3094",
                "GHSA-aaaa",
                "GHSA-bbbb",
                "GHSA-cccc",
                "GHSA-dddd"
            ],
            "most severe first, deduplicated, at most 5"
        );

        t.facts.threat_intel = Some(ThreatIntelFacts {
            known_exploited: vec!["CVE-2024-3094".into()],
            ..Default::default()
        });
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        assert_eq!(s.vulnerabilities.unwrap().known_exploited, Some(1));
    }

    #[test]
    fn notification_facts_are_mirrored() {
        let mut t = ticket(Status::Notifying);
        t.facts.risk = Some(high_risk());
        t.facts.notification = Some(NotificationFacts {
            idempotency_key: t.id.clone(),
            state: NotificationState::Sending,
            sent_at: None,
            receipt: BTreeMap::new(),
            channels: vec!["secops".into()],
        });
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        let n = s.notification.unwrap();
        assert_eq!(
            (n.state, n.idempotency_key.as_str(), n.sent_at),
            (NotificationState::Sending, "web-01/g3-1", None)
        );

        t.status = Status::Notified;
        let sent = t.facts.notification.as_mut().unwrap();
        sent.state = NotificationState::Sent;
        sent.sent_at = Some(T0_MS + 5_000);
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["notification"]["state"], "sent");
        assert_eq!(json["notification"]["sentAt"], "2026-01-01T00:00:05Z");
    }

    #[test]
    fn failure_carries_the_last_error() {
        let mut t = ticket(Status::Failed);
        t.completed_steps = vec![Step::OnlineCheck];
        t.last_error = Some(LastError {
            step: Step::VulnQuery,
            message: "osv: 503 Service Unavailable".into(),
            at: T0_MS,
            attempt: 5,
        });
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        assert_eq!(s.completed_steps, ["online_check"]);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json["lastError"],
            serde_json::json!({
                "step": "vuln_query",
                "message": "osv: 503 Service Unavailable",
                "at": "2026-01-01T00:00:00Z",
                "attempt": 5,
            })
        );
        assert_eq!(json["phase"], "FAILED");
        let ready = s.condition(condition::READY).unwrap();
        assert_eq!(ready.reason, "Failed");
        assert_eq!(
            ready.message,
            "vuln_query failed after 5 attempt(s): osv: 503 Service Unavailable"
        );
    }

    #[test]
    fn long_messages_are_bounded() {
        let mut t = ticket(Status::Failed);
        t.last_error = Some(LastError {
            step: Step::Notify,
            message: "é".repeat(MAX_MESSAGE_LEN),
            at: T0_MS,
            attempt: 1,
        });
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        assert!(s.last_error.unwrap().message.len() <= MAX_MESSAGE_LEN);
        assert!(
            s.conditions
                .iter()
                .all(|c| c.message.len() <= MAX_MESSAGE_LEN)
        );
    }

    #[test]
    fn mirroring_an_unchanged_ticket_again_changes_nothing() {
        let mut t = ticket(Status::HighRiskFound);
        t.facts.risk = Some(high_risk());
        t.last_error = Some(LastError {
            step: Step::ThreatIntel,
            message: "kev: timeout".into(),
            at: T0_MS,
            attempt: 1,
        });
        let ms = |n: i64| Timestamp::from_millisecond(n).unwrap();
        let first = status_from_ticket(&t, None, Some(2), ms(1_000_500), Some(ms(9_000_250)));
        // What the API server hands back: `metav1.Time` has whole seconds.
        let stored: AssetScanStatus =
            serde_json::from_value(serde_json::to_value(&first).unwrap()).unwrap();
        assert_eq!(stored, first);

        let again = status_from_ticket(
            &t,
            Some(&stored),
            Some(2),
            ms(5_000_999),
            Some(ms(9_000_250)),
        );
        assert_eq!(again, stored, "no timestamp churn, no status write");
    }

    #[test]
    fn only_changed_conditions_get_a_new_transition_time() {
        let mut t = ticket(Status::Notified);
        t.facts.risk = Some(high_risk());
        let before = status_from_ticket(&t, None, Some(2), at(1_000), None);

        t.status = Status::Finished;
        t.revision += 1;
        let after = status_from_ticket(&t, Some(&before), Some(2), at(2_000), None);
        let moved = |type_: &str| after.condition(type_).unwrap().last_transition_time.0;
        assert_eq!(moved(condition::READY), at(2_000), "Unknown -> True");
        assert_eq!(moved(condition::RECONCILING), at(2_000), "True -> False");
        assert_eq!(moved(condition::STALLED), at(1_000), "False -> False");
        assert_eq!(moved(condition::HIGH_RISK), at(1_000), "True -> True");
        assert_eq!(
            after.condition(condition::STALLED).unwrap().reason,
            "ScanComplete",
            "reason and message still follow the ticket"
        );
    }

    #[test]
    fn scan_times() {
        let running = status_from_ticket(&ticket(Status::AssetOnline), None, None, at(1_000), None);
        assert_eq!(running.last_scan_time, None);

        let done = status_from_ticket(
            &ticket(Status::Finished),
            None,
            None,
            at(1_000),
            Some(at(30_000)),
        );
        assert_eq!(done.last_scan_time, Some(time_from_ms(T0_MS + 60_000)));
        assert_eq!(done.next_scan_time, Some(Time(at(30_000))));

        // A rescan in progress still shows when the previous one ended.
        let rescan = status_from_ticket(&ticket(Status::Init), Some(&done), None, at(31_000), None);
        assert_eq!(rescan.last_scan_time, done.last_scan_time);
        assert_eq!(rescan.next_scan_time, None);
    }

    #[test]
    fn token_floor_is_the_recorded_token_or_zero() {
        let mut scan = AssetScan::new(
            "web-01",
            AssetScanSpec {
                asset_id: "web-01".into(),
                target: Target {
                    inventory_ref: Some("cmdb-1".into()),
                    ..Default::default()
                },
                software: vec![],
                policy: Policy::default(),
                notify: vec![],
                rescan_interval: None,
                suspend: false,
            },
        );
        assert_eq!(scan.token_floor(), 0);
        scan.status = Some(status_from_ticket(
            &ticket(Status::Init),
            None,
            None,
            at(0),
            None,
        ));
        assert_eq!(scan.token_floor(), 7);
    }

    #[test]
    fn durations_parse_like_the_schema_pattern_says() {
        assert_eq!(parse_duration("6h"), Ok(Duration::from_secs(6 * 3600)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(30 * 60)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));

        let pattern = regex::Regex::new(DURATION_PATTERN).unwrap();
        for text in [
            "6h", "1h30m", "0s", "", "6", "h", "6x", "1.5h", "-1h", " 6h", "6h ", "6H", "1d",
        ] {
            assert_eq!(
                parse_duration(text).is_ok(),
                pattern.is_match(text),
                "{text:?}: parser and schema pattern disagree"
            );
        }
        assert!(parse_duration("99999999999999999999h").is_err(), "overflow");
    }
}
