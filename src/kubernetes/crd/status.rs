//! The durable, user-facing mirror of a run's ticket, fenced like the
//! ticket itself: the CRD states the fence's rules ([`fence::STATUS_RULES`])
//! on the status, and [`is_fence_refusal`] recognises the API server's
//! refusal by them.

use assetscan_domain::fence::{self, Cause, StatusRule};
use assetscan_domain::ticket::{NotificationState, Status};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::KubeSchema;
use kube::core::cel::{Reason, Rule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A fence rule as the CRD states it.
fn rule(rule: StatusRule) -> Rule {
    let mut stated = Rule::new(rule.rule).message(rule.message);
    if let Some(path) = rule.field_path {
        stated = stated.field_path(path);
    }
    if rule.forbidden {
        stated = stated.reason(Reason::FieldValueForbidden);
    }
    stated
}

/// Whether the API server refused a status write because a newer
/// executor's status is stored (one of [`fence::STATUS_RULES`] that fence),
/// as opposed to any other invalid status: by the answer's structured
/// causes ([`fence::is_fence_cause`]), never by its aggregated message.
pub fn is_fence_refusal(answer: &kube::core::Status) -> bool {
    answer.code == 422
        && answer.details.as_ref().is_some_and(|details| {
            details.causes.iter().any(|cause| {
                fence::is_fence_cause(Cause {
                    reason: &cause.reason,
                    field: &cause.field,
                    message: &cause.message,
                })
            })
        })
}

/// The mirror of the current run's ticket, fenced like the ticket itself.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(
    validation = rule(fence::FENCE_PAIR_RULE),
    validation = rule(fence::TOKEN_RULE),
    validation = rule(fence::GENERATION_RULE)
)]
#[serde(rename_all = "camelCase")]
pub struct AssetScanStatus {
    /// The ticket's status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::phase_schema")]
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

    /// What the vulnerability query asked about of the packages listed;
    /// absent until it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<CoverageStatus>,

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

/// Of the packages listed (`spec.software`, or the SBOM's components), how
/// many were asked about under their advisory coordinates, and why the
/// others were not (docs/sbom.md lists the reasons).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CoverageStatus {
    /// `73% (97/132)`: the percent asked, rounded down, and asked/listed.
    pub summary: String,
    pub listed: u32,
    pub asked: u32,
    /// The `policy.minCoverage` the run was judged by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<u8>,
    /// Below the minimum, or nothing asked: the run is not `Ready`
    /// (`CoverageLow`), and the asset is not called clean. Absent: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub low: bool,
    /// Not asked, by reason (`noPurl`, `notAPurl`, `noVersion`,
    /// `noAdvisorySource`, `unknownDistribution`, `unknownRelease`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_asked: std::collections::BTreeMap<String, u32>,
    /// Not asked, by kind of package (`oci`, `rpm/amzn`, `none`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub not_asked_by_kind: std::collections::BTreeMap<String, u32>,
}

impl CoverageStatus {
    pub fn of(coverage: &assetscan_domain::Coverage) -> CoverageStatus {
        CoverageStatus {
            summary: coverage.summary(),
            listed: coverage.listed,
            asked: coverage.asked,
            minimum: coverage.minimum,
            low: coverage.is_low(),
            not_asked: not_asked_by_reason(coverage),
            not_asked_by_kind: coverage.not_asked_by_kind.clone(),
        }
    }
}

/// Not asked, by the reasons' wire names: the status's and the report's.
pub fn not_asked_by_reason(
    coverage: &assetscan_domain::Coverage,
) -> std::collections::BTreeMap<String, u32> {
    (coverage.not_asked.iter())
        .map(|(reason, n)| (reason.as_str().to_owned(), *n))
        .collect()
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
    /// Findings a VEX statement or a FindingException suppressed (counted
    /// in none of the above; the report lists them with the statement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<i64>,
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
    #[schemars(schema_with = "super::notification_state_schema")]
    pub state: NotificationState,
    /// Equal to the ticket id: receivers deduplicate on it.
    pub idempotency_key: String,
    /// When delivery succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<Time>,
}
