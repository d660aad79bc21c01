//! The ticket → status mapping: the AssetScan's status as the durable,
//! user-facing mirror of the run's ticket.

use super::conditions::{ConditionBuilder, ConditionStatus, ConditionType, bounded, whole_seconds};
use crate::kubernetes::crd::{
    AssetScanStatus, CoverageStatus, LastErrorStatus, NotificationStatus, VulnerabilitySummary,
};
use crate::providers::online::EgressRule;
use assetscan_domain::SbomProblem;
use assetscan_domain::ticket::{Facts, LastError, Severity, Status, Step, Ticket, VulnFacts};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Vulnerability ids shown in `status.vulnerabilities.topIds` (the schema's
/// `maxItems`).
const MAX_TOP_IDS: usize = 5;

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
    let mut status = mirrored_fields(ticket, previous, generation, next_scan);
    let conditions = ConditionBuilder::new(generation, now);
    let run = RunConditions::of(ticket);
    conditions.set_all(
        &mut status.conditions,
        &run.states,
        run.reason,
        &run.message,
    );
    let risk = RiskCondition::of(&ticket.facts);
    // A high risk turns the condition True at its confirmation, as the
    // ticket records it: how long it waits for its notification is read
    // from here (the `high_risk_unnotified_oldest_age_seconds` gauge).
    let confirmed = (ticket.facts.risk.as_ref())
        .and_then(|r| r.confirmed_at)
        .and_then(|ms| Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok());
    let risk_conditions = confirmed.map(|at| ConditionBuilder::new(generation, at));
    risk_conditions.as_ref().unwrap_or(&conditions).set(
        &mut status.conditions,
        ConditionType::HighRisk,
        risk.status,
        risk.reason,
        &risk.message,
    );
    status
}

/// The status's fields from the ticket, and what `previous` holds that the
/// ticket does not: the reports, the rescan request handled, and the
/// conditions (the caller updates them).
fn mirrored_fields(
    ticket: &Ticket,
    previous: Option<&AssetScanStatus>,
    generation: Option<i64>,
    next_scan: Option<Timestamp>,
) -> AssetScanStatus {
    let facts = &ticket.facts;
    let last_scan_time = if ticket.status.is_terminal() {
        Some(time_from_ms(ticket.updated_at))
    } else {
        previous.and_then(|p| p.last_scan_time.clone())
    };
    AssetScanStatus {
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
        last_error: ticket.last_error.as_ref().map(last_error_status),
        vulnerabilities: facts.vulnerabilities.as_ref().map(|v| {
            summarize(
                v,
                facts.threat_intel.as_ref().map(|t| t.known_exploited.len()),
            )
        }),
        coverage: facts.coverage().map(CoverageStatus::of),
        notification: facts.notification.as_ref().map(|n| NotificationStatus {
            state: n.state,
            idempotency_key: n.idempotency_key.clone(),
            sent_at: n.sent_at.map(time_from_ms),
        }),
        high_risk: facts.risk.as_ref().map(|r| r.high_risk),
        observed_generation: generation,
        last_scan_time,
        next_scan_time: next_scan.map(whole_seconds),
        last_handled_rescan: previous.and_then(|p| p.last_handled_rescan.clone()),
        latest_report: previous.and_then(|p| p.latest_report.clone()),
        reports: previous.map(|p| p.reports.clone()).unwrap_or_default(),
        conditions: previous.map(|p| p.conditions.clone()).unwrap_or_default(),
    }
}

/// `Ready`, `Reconciling` and `Stalled` as the run's phase sets them: one
/// reason and one message, the run's.
struct RunConditions {
    states: [(ConditionType, ConditionStatus); 3],
    reason: &'static str,
    message: String,
}

impl RunConditions {
    fn of(ticket: &Ticket) -> RunConditions {
        use ConditionStatus::{False, True, Unknown};
        let states = |ready, reconciling, stalled| {
            [
                (ConditionType::Ready, ready),
                (ConditionType::Reconciling, reconciling),
                (ConditionType::Stalled, stalled),
            ]
        };
        let (states, reason, message) = match ticket.status {
            Status::Finished if ticket.facts.online == Some(false) => (
                states(True, False, False),
                "ScanComplete",
                "scan complete: asset offline".to_owned(),
            ),
            Status::Finished if ticket.facts.coverage().is_some_and(|c| c.is_low()) => {
                let coverage = ticket.facts.coverage().map(coverage_message);
                (
                    states(False, False, False),
                    "CoverageLow",
                    coverage.unwrap_or_default(),
                )
            }
            Status::Finished => (
                states(True, False, False),
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
                (states(False, False, True), failed_reason(ticket), why)
            }
            phase => (
                states(Unknown, True, False),
                "Scanning",
                format!("scan in progress at {phase}"),
            ),
        };
        RunConditions {
            states,
            reason,
            message,
        }
    }
}

/// Why a finished run is not `Ready`: what it asked about, against what,
/// and the largest reasons it did not ask.
fn coverage_message(coverage: &assetscan_domain::Coverage) -> String {
    let against = match coverage.minimum {
        Some(minimum) => format!(", below the minimum of {minimum}%"),
        None => String::new(),
    };
    let mut reasons: Vec<_> = coverage.not_asked.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1));
    let why: Vec<String> = (reasons.iter().take(3))
        .map(|(reason, n)| format!("{n} {}", reason.as_str()))
        .collect();
    let why = match why.is_empty() {
        true => String::new(),
        false => format!("; not asked: {} (see the report)", why.join(", ")),
    };
    format!(
        "scan complete, but it asked about {} of {} packages listed ({}%){against}{why}",
        coverage.asked,
        coverage.listed,
        coverage.percent()
    )
}

/// `Failed`, or what the tenant can mend named instead: the way an SBOM
/// could not be used (`SbomNotFound`, …), or the egress rule that refused
/// the online check's target (`EgressRefusedLoopback`, …).
fn failed_reason(ticket: &Ticket) -> &'static str {
    let sbom = (ticket.facts.sbom.as_ref())
        .and_then(|sbom| sbom.problem)
        .map(SbomProblem::reason);
    let egress = || {
        (ticket.last_error.as_ref())
            .filter(|e| e.step == Step::OnlineCheck)
            .and_then(|e| EgressRule::named_in(&e.message))
            .map(EgressRule::reason)
    };
    sbom.or_else(egress).unwrap_or("Failed")
}

/// `HighRisk`: about the asset, not the operator.
struct RiskCondition {
    status: ConditionStatus,
    reason: &'static str,
    message: String,
}

/// Reasons named in the `HighRisk` condition's message; the report lists
/// more, the ticket all.
const MESSAGE_REASONS: usize = 3;

/// The first reasons, and how many more there are: the condition is read in
/// `kubectl get`/`describe`, and stored in every status write.
fn high_risk_message(reasons: &[String]) -> String {
    let mut message = reasons
        .iter()
        .take(MESSAGE_REASONS)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ");
    if reasons.len() > MESSAGE_REASONS {
        message.push_str(&format!(
            "; and {} more (see the report)",
            reasons.len() - MESSAGE_REASONS
        ));
    }
    message
}

impl RiskCondition {
    fn of(facts: &Facts) -> RiskCondition {
        use ConditionStatus::{False, True, Unknown};
        let (status, reason, message) = match &facts.risk {
            Some(risk) if risk.high_risk => {
                (True, "HighRiskFound", high_risk_message(&risk.reasons))
            }
            Some(_) => (
                False,
                "NoHighRisk",
                "no finding reaches the policy's thresholds".to_owned(),
            ),
            None if facts.online == Some(false) => (
                Unknown,
                "AssetOffline",
                "asset offline: not assessed".to_owned(),
            ),
            None => (Unknown, "NotAssessed", "not assessed yet".to_owned()),
        };
        RiskCondition {
            status,
            reason,
            message,
        }
    }
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
        suppressed: (v.triage.as_ref()).map(|t| i64::from(t.suppressed_total)),
    }
}

/// A step's failure as the status and the report show it.
pub(super) fn last_error_status(e: &LastError) -> LastErrorStatus {
    LastErrorStatus {
        step: e.step.as_str().to_owned(),
        message: bounded(&e.message),
        at: time_from_ms(e.at),
        attempt: i64::from(e.attempt),
    }
}

pub(super) fn saturating_i64(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

pub(super) fn time_from_ms(ms: u64) -> Time {
    let secs = saturating_i64(ms / 1000);
    Time(Timestamp::from_second(secs).unwrap_or(Timestamp::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::controller::status::conditions::MAX_MESSAGE_BYTES;
    use assetscan_domain::ticket::{
        Finding, LastError, NotificationFacts, NotificationState, RiskFacts, Step, ThreatIntelFacts,
    };
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
            confirmed_at: None,
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

    /// Asserts the `(status, reason)` of each condition type listed.
    fn assert_conditions(status: &AssetScanStatus, expected: &[(ConditionType, &str, &str)]) {
        for &(type_, value, reason) in expected {
            let c = type_
                .find(&status.conditions)
                .unwrap_or_else(|| panic!("{type_:?} missing"));
            let actual = (c.status.as_str(), c.reason.as_str());
            assert_eq!(actual, (value, reason), "{type_:?} of {:?}", status.phase);
        }
    }

    #[test]
    fn every_phase_maps_to_operator_conditions() {
        use ConditionType::{Ready, Reconciling, Stalled};
        for phase in Status::ALL {
            let s = status_from_ticket(&ticket(phase), None, Some(3), at(1_000), None);
            assert_eq!(s.phase, Some(phase));
            let expected = match phase {
                Status::Finished => [
                    (Ready, "True", "ScanComplete"),
                    (Reconciling, "False", "ScanComplete"),
                    (Stalled, "False", "ScanComplete"),
                ],
                Status::Failed => [
                    (Ready, "False", "Failed"),
                    (Reconciling, "False", "Failed"),
                    (Stalled, "True", "Failed"),
                ],
                _ => [
                    (Ready, "Unknown", "Scanning"),
                    (Reconciling, "True", "Scanning"),
                    (Stalled, "False", "Scanning"),
                ],
            };
            assert_conditions(&s, &expected);
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
        use ConditionType::{HighRisk, Ready};
        let mut t = ticket(Status::Finished);
        t.facts.online = Some(true);
        t.facts.vulnerabilities = Some(vulns().into());
        t.facts.risk = Some(high_risk());
        let s = status_from_ticket(&t, None, Some(1), at(1_000), None);
        assert_eq!(s.high_risk, Some(true));
        assert_conditions(
            &s,
            &[
                (Ready, "True", "ScanComplete"),
                (HighRisk, "True", "HighRiskFound"),
            ],
        );
        assert!(
            HighRisk
                .find(&s.conditions)
                .unwrap()
                .message
                .contains("CVE-2024-3094")
        );

        // Many reasons: the first few, and a count of the rest.
        t.facts.risk = Some(RiskFacts {
            high_risk: true,
            reasons: (0..40)
                .map(|i| format!("CVE-2024-{i:04} CVSS 9.8 >= 7.0"))
                .collect(),
            confirmed_at: None,
        });
        let s = status_from_ticket(&t, None, Some(1), at(1_000), None);
        let message = &HighRisk.find(&s.conditions).unwrap().message;
        assert!(
            message.starts_with("CVE-2024-0000 CVSS 9.8 >= 7.0; CVE-2024-0001"),
            "{message}"
        );
        assert!(
            message.ends_with("; and 37 more (see the report)"),
            "{message}"
        );
        assert!(!message.contains("CVE-2024-0003"), "{message}");

        t.facts.risk = Some(RiskFacts {
            high_risk: false,
            reasons: vec![],
            confirmed_at: None,
        });
        let s = status_from_ticket(&t, None, Some(1), at(1_000), None);
        assert_eq!(s.high_risk, Some(false));
        assert_conditions(&s, &[(HighRisk, "False", "NoHighRisk")]);
    }

    #[test]
    fn a_high_risk_turns_true_at_its_confirmation_as_the_ticket_records_it() {
        use ConditionType::{HighRisk, Ready};
        let mut t = ticket(Status::HighRiskFound);
        t.facts.risk = Some(RiskFacts {
            confirmed_at: Some(700_900),
            ..high_risk()
        });
        let before =
            status_from_ticket(&ticket(Status::VulnCheckDone), None, Some(1), at(600), None);
        let s = status_from_ticket(&t, Some(&before), Some(1), at(1_000), None);
        let risk = HighRisk.find(&s.conditions).unwrap();
        assert_eq!(
            (risk.status.as_str(), risk.last_transition_time.0),
            ("True", at(700))
        );
        // The run's own conditions change now.
        let ready = Ready.find(&s.conditions).unwrap();
        assert_eq!(ready.last_transition_time.0, at(600));
        // Mirrored again later: unchanged.
        let again = status_from_ticket(&t, Some(&s), Some(1), at(2_000), None);
        assert_eq!(HighRisk.find(&again.conditions), Some(risk));
    }

    #[test]
    fn unassessed_risk_is_unknown() {
        use ConditionType::{HighRisk, Ready};
        let s = status_from_ticket(&ticket(Status::AssetOnline), None, None, at(1_000), None);
        assert_eq!(s.high_risk, None);
        assert_conditions(&s, &[(HighRisk, "Unknown", "NotAssessed")]);

        let mut offline = ticket(Status::Finished);
        offline.facts.online = Some(false);
        let s = status_from_ticket(&offline, None, None, at(1_000), None);
        assert_conditions(
            &s,
            &[
                (Ready, "True", "ScanComplete"),
                (HighRisk, "Unknown", "AssetOffline"),
            ],
        );
    }

    #[test]
    fn vulnerability_facts_are_summarized() {
        let mut t = ticket(Status::VulnCheckDone);
        t.facts.vulnerabilities = Some(vulns().into());
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
            attempted_at: None,
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
        let ready = ConditionType::Ready.find(&s.conditions).unwrap();
        assert_eq!(ready.reason, "Failed");
        assert_eq!(
            ready.message,
            "vuln_query failed after 5 attempt(s): osv: 503 Service Unavailable"
        );
    }

    #[test]
    fn an_sbom_that_could_not_be_used_names_its_problem() {
        let mut t = ticket(Status::Failed);
        let sbom = assetscan_domain::SbomRef::new("artifacts", "web.cdx.json", None).unwrap();
        t.facts.sbom = Some(assetscan_domain::SbomFacts {
            problem: Some(SbomProblem::DigestMismatch),
            ..assetscan_domain::SbomFacts::of(&sbom)
        });
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        for type_ in [ConditionType::Ready, ConditionType::Stalled] {
            let condition = type_.find(&s.conditions).unwrap();
            assert_eq!(condition.reason, "SbomDigestMismatch", "{type_:?}");
        }
        // Read, and the run failed later: the run's own reason.
        t.facts.sbom.as_mut().unwrap().problem = None;
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        assert_eq!(
            ConditionType::Ready.find(&s.conditions).unwrap().reason,
            "Failed"
        );
    }

    #[test]
    fn long_messages_are_bounded() {
        let mut t = ticket(Status::Failed);
        t.last_error = Some(LastError {
            step: Step::Notify,
            message: "é".repeat(MAX_MESSAGE_BYTES),
            at: T0_MS,
            attempt: 1,
        });
        let s = status_from_ticket(&t, None, None, at(1_000), None);
        assert!(s.last_error.unwrap().message.len() <= MAX_MESSAGE_BYTES);
        assert!(
            s.conditions
                .iter()
                .all(|c| c.message.len() <= MAX_MESSAGE_BYTES)
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
        let moved = |type_: ConditionType| {
            type_
                .find(&after.conditions)
                .unwrap()
                .last_transition_time
                .0
        };
        assert_eq!(moved(ConditionType::Ready), at(2_000), "Unknown -> True");
        assert_eq!(
            moved(ConditionType::Reconciling),
            at(2_000),
            "True -> False"
        );
        assert_eq!(moved(ConditionType::Stalled), at(1_000), "False -> False");
        assert_eq!(moved(ConditionType::HighRisk), at(1_000), "True -> True");
        assert_eq!(
            ConditionType::Stalled
                .find(&after.conditions)
                .unwrap()
                .reason,
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
    fn bounds_fit_the_schema() {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(crate::kubernetes::crd::AssetScan::crd()).unwrap();
        let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"];
        let top_ids = &status["vulnerabilities"]["properties"]["topIds"]["maxItems"];
        assert_eq!(top_ids.as_u64(), Some(MAX_TOP_IDS as u64));
        // maxLength counts characters; a byte bound is never more.
        let message = &status["lastError"]["properties"]["message"]["maxLength"];
        assert!(
            message
                .as_u64()
                .is_some_and(|max| max >= MAX_MESSAGE_BYTES as u64)
        );
    }
}
