//! The ticket: the source of truth for one scan run. Its statuses, steps
//! and facts are those the state machine declares ([`crate::machine`]).

use crate::coverage::Coverage;
pub use crate::fact_json::FactJson;
use crate::fence::Fence;
pub use crate::machine::{Fact, Status, Step};
use crate::sbom::SbomFacts;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// At most this many CVE ids are kept in [`VulnFacts::cves`]: a host with
/// thousands of CVEs would otherwise make its ticket, and everything that
/// reads it, grow without bound. Those of the listed (most severe) findings
/// are kept first; [`VulnFacts::cves_omitted`] counts the rest.
pub const MAX_CVES: usize = 2_000;

/// At most this many EPSS scores are kept in [`ThreatIntelFacts::epss`]: the
/// highest, so that the verdict (is any score at or over the threshold?) is
/// the same with the cut as without it. [`ThreatIntelFacts::epss_omitted`]
/// counts the rest.
pub const MAX_EPSS: usize = 1_000;

/// The last failure of a step, kept until the run moves on or ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LastError {
    pub step: Step,
    pub message: String,
    /// Unix ms.
    pub at: u64,
    pub attempt: u32,
}

/// Severity bucket of a vulnerability, from its best CVSS base score.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Severity {
    None,
    Low,
    Medium,
    High,
    Critical,
    /// No score could be computed from the record.
    Unknown,
}

impl Severity {
    /// CVSS v3/v4 qualitative rating of a base score.
    pub fn from_score(score: f64) -> Severity {
        match score {
            s if s >= 9.0 => Severity::Critical,
            s if s >= 7.0 => Severity::High,
            s if s >= 4.0 => Severity::Medium,
            s if s > 0.0 => Severity::Low,
            _ => Severity::None,
        }
    }

    /// Where a severity sorts, most severe highest. An unscored finding
    /// ranks below `Low` (it may be anything, but nothing says it is bad)
    /// and above `None` (which says it is not). The derived `Ord` is the
    /// declaration's order, not this one.
    pub fn rank(self) -> u8 {
        match self {
            Severity::Critical => 5,
            Severity::High => 4,
            Severity::Medium => 3,
            Severity::Low => 2,
            Severity::Unknown => 1,
            Severity::None => 0,
        }
    }
}

/// One vulnerability as the pipeline judges it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The record's id (e.g. `GHSA-…`, `UBUNTU-CVE-…`).
    pub id: String,
    /// CVE ids this record is about (aliases, related, or the id itself).
    #[serde(default, deserialize_with = "lenient_vec")]
    pub cves: Vec<String>,
    /// The package queried that matched.
    pub package: String,
    /// Best CVSS base score found in the record, if any vector parsed.
    pub cvss: Option<f64>,
    pub severity: Severity,
    #[serde(default)]
    pub summary: String,
}

/// The vulnerability query's confirmed result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VulnFacts {
    pub total: u32,
    /// Counts by severity bucket (wire names of [`Severity`]).
    pub by_severity: BTreeMap<Severity, u32>,
    /// The highest CVSS score among the findings.
    pub max_cvss: Option<f64>,
    /// The findings, most severe first (bounded by the provider).
    #[serde(default, deserialize_with = "lenient_vec")]
    pub findings: Vec<Finding>,
    /// Every CVE id over all findings, also those cut from `findings` by the
    /// bound (sorted, deduplicated): threat intel looks all of them up, so a
    /// known-exploited CVE is not missed because its CVSS ranked it low.
    /// At most [`MAX_CVES`] once recorded (see [`VulnFacts::bounded`]).
    #[serde(default, deserialize_with = "lenient_vec")]
    pub cves: Vec<String>,
    /// CVE ids cut from `cves` by [`MAX_CVES`]: neither kept nor looked up.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cves_omitted: u32,
    /// What the query asked about of the packages listed, and why it did
    /// not ask about the others. Absent in what an operator before 0.2.0
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// The findings the run's VEX documents and exceptions suppressed
    /// (counted in none of the fields above), and the statements that no
    /// longer apply. Absent when the run had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triage: Option<TriageFacts>,
}

impl VulnFacts {
    /// The facts as recorded: at most [`MAX_CVES`] CVE ids, those of the
    /// listed findings (the most severe) first, the others in order; the
    /// number cut is added to `cves_omitted`.
    pub fn bounded(mut self) -> VulnFacts {
        if self.cves.len() <= MAX_CVES {
            return self;
        }
        let all = std::mem::take(&mut self.cves);
        let listed: BTreeSet<&str> = self
            .findings
            .iter()
            .flat_map(|f| f.cves.iter().map(String::as_str))
            .collect();
        let (severe, others): (Vec<String>, Vec<String>) =
            all.into_iter().partition(|c| listed.contains(c.as_str()));
        let total = severe.len() + others.len();
        let kept: BTreeSet<String> = severe.into_iter().chain(others).take(MAX_CVES).collect();
        self.cves_omitted = self
            .cves_omitted
            .saturating_add(u32::try_from(total - kept.len()).unwrap_or(u32::MAX));
        self.cves = kept.into_iter().collect();
        self
    }
}

/// Threat-intel enrichment: known exploitation and exploit prediction.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreatIntelFacts {
    /// CVEs of the findings that are listed as known exploited.
    #[serde(default, deserialize_with = "lenient_vec")]
    pub known_exploited: Vec<String>,
    /// EPSS score per CVE (0..1). At most [`MAX_EPSS`] once recorded (see
    /// [`ThreatIntelFacts::bounded`]).
    pub epss: BTreeMap<String, f64>,
    /// Version of the known-exploited catalog consulted.
    #[serde(default)]
    pub catalog_version: Option<String>,
    /// EPSS scores cut by [`MAX_EPSS`] (all lower than every one kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epss_omitted: u32,
}

impl ThreatIntelFacts {
    /// The facts as recorded: the [`MAX_EPSS`] highest EPSS scores; the
    /// number cut is added to `epss_omitted`.
    pub fn bounded(mut self) -> ThreatIntelFacts {
        if self.epss.len() <= MAX_EPSS {
            return self;
        }
        let mut scores: Vec<(String, f64)> = std::mem::take(&mut self.epss).into_iter().collect();
        scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let cut = scores.len() - MAX_EPSS;
        scores.truncate(MAX_EPSS);
        self.epss = scores.into_iter().collect();
        self.epss_omitted = self
            .epss_omitted
            .saturating_add(u32::try_from(cut).unwrap_or(u32::MAX));
        self
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where a notification stands. `Sending` is written before the call, so a takeover knows
/// a delivery may already have happened and re-sends with the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationState {
    Sending,
    Sent,
    /// High risk, but the scan names no channel: nobody was told.
    Skipped,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotificationFacts {
    /// Equal to the ticket id: the receiver deduplicates on it.
    pub idempotency_key: String,
    pub state: NotificationState,
    /// Unix ms of the successful delivery.
    pub sent_at: Option<u64>,
    /// Unix ms of the intent's write (the first attempt), quoted by re-sends.
    pub attempted_at: Option<u64>,
    /// Receipt per channel (what each receiver answered).
    #[serde(default)]
    pub receipt: BTreeMap<String, String>,
    /// Channels the notification goes to.
    #[serde(default, deserialize_with = "lenient_vec")]
    pub channels: Vec<String>,
}

/// The high-risk verdict and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RiskFacts {
    pub high_risk: bool,
    /// Human-readable reasons, e.g. `CVE-2024-3094 CVSS 10.0 >= 7.0`.
    #[serde(default, deserialize_with = "lenient_vec")]
    pub reasons: Vec<String>,
    /// Unix ms of the write that confirmed the high risk (recorded with the
    /// verdict in the `HIGH_RISK_FOUND` write, by the executor that made
    /// it). The start of the time to notification: kept in the ticket, so
    /// an executor that takes the run over measures from the same instant.
    /// Absent for no high risk, and in tickets written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_at: Option<u64>,
}

/// Confirmed facts. Each field is written once by the step that learns it.
/// In Redis each is one field of the ticket's facts hash, named as its
/// [`Fact`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    #[serde(default)]
    pub online: Option<bool>,
    /// Shared, not copied: the executor's copy of a run's facts is carried
    /// into every ticket its writes return, and the findings are what grows
    /// with the asset (see `TicketStore::advance_from`).
    #[serde(default)]
    pub vulnerabilities: Option<Arc<VulnFacts>>,
    #[serde(default)]
    pub threat_intel: Option<ThreatIntelFacts>,
    #[serde(default)]
    pub risk: Option<RiskFacts>,
    #[serde(default)]
    pub notification: Option<NotificationFacts>,
    /// The SBOM the run read its packages from (recorded with the
    /// vulnerabilities), or could not use. Absent for listed software, and
    /// in tickets of operators before it existed; an operator of the
    /// previous version ignores it (an unknown fact name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbom: Option<SbomFacts>,
}

impl Facts {
    pub fn is_empty(&self) -> bool {
        self == &Facts::default()
    }

    /// The coverage of the vulnerability query, once it was recorded.
    pub fn coverage(&self) -> Option<&Coverage> {
        self.vulnerabilities.as_ref()?.coverage.as_ref()
    }

    /// Sets `fact` from its JSON.
    pub fn set(&mut self, fact: Fact, json: impl FactJson) -> Result<(), serde_json::Error> {
        match fact {
            Fact::Online => self.online = json.parse()?,
            Fact::Vulnerabilities => self.vulnerabilities = json.parse()?,
            Fact::ThreatIntel => self.threat_intel = json.parse()?,
            Fact::Risk => self.risk = json.parse()?,
            Fact::Notification => self.notification = json.parse()?,
            Fact::Sbom => self.sbom = json.parse()?,
        }
        Ok(())
    }

    /// Sets the fact named `name` (a field of a facts hash) from its JSON. A
    /// name this version does not know (a newer writer's fact) is ignored,
    /// as an unknown ticket field is.
    pub fn set_named(&mut self, name: &str, json: impl FactJson) -> Result<(), serde_json::Error> {
        match Fact::parse(name) {
            Some(fact) => self.set(fact, json),
            None => Ok(()),
        }
    }

    /// Takes every fact that `newer` has.
    pub fn overlay(&mut self, newer: Facts) {
        let Facts {
            online,
            vulnerabilities,
            threat_intel,
            risk,
            notification,
            sbom,
        } = newer;
        self.online = online.or(self.online);
        self.vulnerabilities = vulnerabilities.or(self.vulnerabilities.take());
        self.threat_intel = threat_intel.or(self.threat_intel.take());
        self.risk = risk.or(self.risk.take());
        self.notification = notification.or(self.notification.take());
        self.sbom = sbom.or(self.sbom.take());
    }
}

/// The ticket. In Redis its key holds the header, this struct's JSON
/// without `facts` (fields may be added, none removed), and the facts live
/// in the facts hash beside it; a ticket of the older layout holds its facts
/// in its JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    pub id: String,
    pub asset: String,
    pub run: String,
    pub status: Status,
    pub fencing_token: u64,
    pub revision: u64,
    #[serde(default)]
    pub holder: Option<String>,
    #[serde(default, deserialize_with = "lenient_vec")]
    pub completed_steps: Vec<Step>,
    #[serde(default)]
    pub attempts: BTreeMap<Step, u32>,
    #[serde(default)]
    pub last_error: Option<LastError>,
    #[serde(default, skip_serializing_if = "Facts::is_empty")]
    pub facts: Facts,
    pub created_at: u64,
    pub updated_at: u64,
}

impl Ticket {
    /// A fresh ticket as `acquire.lua` stores it when none exists yet. The
    /// script sets token, revision and holder itself.
    pub fn new(asset: &str, run: &str, now_ms: u64) -> Ticket {
        Ticket {
            id: ticket_id(asset, run),
            asset: asset.to_owned(),
            run: run.to_owned(),
            status: Status::Init,
            fencing_token: 0,
            revision: 0,
            holder: None,
            completed_steps: Vec::new(),
            attempts: BTreeMap::new(),
            last_error: None,
            facts: Facts::default(),
            created_at: now_ms,
            updated_at: now_ms,
        }
    }

    /// `(fencing_token, revision)`: who owns the run, and how far it got.
    pub fn fence(&self) -> Fence {
        Fence::new(self.fencing_token, self.revision)
    }

    pub fn has_completed(&self, step: Step) -> bool {
        self.completed_steps.contains(&step)
    }

    /// Milliseconds from the write that confirmed the high risk to this
    /// ticket's `NOTIFIED` write, both as the ticket records them; `None`
    /// unless the ticket is `NOTIFIED` and its risk carries its time.
    pub fn detection_to_notification_ms(&self) -> Option<u64> {
        if self.status != Status::Notified {
            return None;
        }
        let confirmed = self.facts.risk.as_ref()?.confirmed_at?;
        Some(self.updated_at.saturating_sub(confirmed))
    }

    pub fn attempts_of(&self, step: Step) -> u32 {
        self.attempts.get(&step).copied().unwrap_or(0)
    }
}

/// The ticket id is `<asset>/<run>`: stable across takeovers, so it doubles as
/// the notification's idempotency key.
pub fn ticket_id(asset: &str, run: &str) -> String {
    format!("{asset}/{run}")
}

/// Accepts a list, or `{}` for an empty one: Redis' Lua `cjson` cannot tell
/// an empty array from an empty object and writes `{}`.
fn lenient_vec<'de, D, T>(de: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrEmpty<T> {
        List(Vec<T>),
        Empty(BTreeMap<String, serde::de::IgnoredAny>),
    }
    match ListOrEmpty::deserialize(de)? {
        ListOrEmpty::List(items) => Ok(items),
        ListOrEmpty::Empty(map) if map.is_empty() => Ok(Vec::new()),
        ListOrEmpty::Empty(_) => Err(serde::de::Error::custom("expected a list")),
    }
}

/// Current unix time in ms.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What a statement says of a vulnerability in a package. Each suppresses
/// the findings it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TriageState {
    /// The package is not affected (VEX `not_affected`).
    NotAffected,
    /// The finding is wrong (CycloneDX `false_positive`).
    FalsePositive,
    /// The package carries the fix whatever its version says (VEX `fixed`,
    /// CycloneDX `resolved`): a backport.
    Fixed,
    /// The risk is accepted by its owner, until the statement expires.
    Accepted,
}

/// Suppressed findings recorded, at most (the rest are counted).
pub const MAX_SUPPRESSED: usize = 50;
/// Statements named in [`TriageFacts::expired`] and `unresolved`, at most.
pub const MAX_NAMED: usize = 20;

/// What a run recorded of its triage, in its `vulnerabilities` fact: the
/// findings suppressed, with the statement of each, and the statements
/// that no longer apply. Fields may be added, none removed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriageFacts {
    /// Statements in force.
    pub statements: u32,
    /// Findings suppressed, in all.
    pub suppressed_total: u32,
    /// The suppressed findings, most severe first.
    #[serde(default)]
    pub suppressed: Vec<Suppressed>,
    /// Statements that had expired: their findings were raised again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expired: Vec<String>,
    /// Statements whose packages could not be told: not applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<String>,
    /// VEX documents that could not be read, and why: their findings stand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread: Vec<String>,
}

/// What the run records of the statement that suppressed a finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriageRecord {
    pub by: String,
    pub state: TriageState,
    pub justification: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
}

/// A suppressed finding, with its statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Suppressed {
    pub finding: Finding,
    pub triage: TriageRecord,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_statuses_accept_nothing() {
        for to in Status::ALL {
            assert!(!Status::Finished.allows(to));
            assert!(!Status::Failed.allows(to));
        }
    }

    #[test]
    fn detection_to_notification_is_read_from_the_notified_ticket() {
        let mut ticket = Ticket::new("a", "r", 1_000);
        ticket.facts.risk = Some(RiskFacts {
            high_risk: true,
            reasons: Vec::new(),
            confirmed_at: Some(5_000),
        });
        ticket.updated_at = 7_250;
        for status in Status::ALL {
            ticket.status = status;
            let expected = (status == Status::Notified).then_some(2_250);
            assert_eq!(ticket.detection_to_notification_ms(), expected, "{status}");
        }
        // A ticket written before the time was recorded has none.
        ticket.status = Status::Notified;
        ticket.facts.risk.as_mut().unwrap().confirmed_at = None;
        assert_eq!(ticket.detection_to_notification_ms(), None);
        let json = serde_json::to_value(ticket.facts.risk.as_ref().unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({"high_risk": true, "reasons": []}));
    }

    #[test]
    fn empty_lists_written_by_lua_parse() {
        let mut raw = serde_json::to_value(Ticket::new("a", "r", 1)).unwrap();
        raw["completed_steps"] = serde_json::json!({});
        let ticket: Ticket = serde_json::from_value(raw.clone()).unwrap();
        assert!(ticket.completed_steps.is_empty());
        raw["completed_steps"] = serde_json::json!({"x": 1});
        assert!(serde_json::from_value::<Ticket>(raw.clone()).is_err());
        // An asset without findings: every list in its facts comes back `{}`.
        raw["completed_steps"] = serde_json::json!({});
        raw["facts"]["vulnerabilities"] = serde_json::json!({
            "total": 0, "by_severity": {}, "max_cvss": null, "findings": {}, "cves": {}
        });
        let ticket: Ticket = serde_json::from_value(raw).unwrap();
        assert_eq!(
            ticket.facts.vulnerabilities,
            Some(VulnFacts::default().into())
        );
    }

    #[test]
    fn facts_set_by_name_and_overlaid() {
        let mut facts = Facts::default();
        facts.set(Fact::Online, "true").unwrap();
        facts
            .set(
                Fact::Risk,
                &serde_json::json!({"high_risk": true, "reasons": {}}),
            )
            .unwrap();
        facts.set_named("from_a_newer_writer", "[1]").unwrap();
        facts.set_named("online", "false").unwrap();
        assert_eq!(facts.online, Some(false));
        facts.set_named("online", "true").unwrap();
        assert!(facts.set(Fact::Online, "\"yes\"").is_err());
        assert_eq!(facts.online, Some(true));
        assert!(facts.risk.as_ref().unwrap().high_risk);
        facts.overlay(Facts {
            online: Some(false),
            ..Facts::default()
        });
        assert_eq!(facts.online, Some(false));
        assert!(facts.risk.is_some(), "what the newer copy lacks is kept");
        assert!(!facts.is_empty());
        assert!(Facts::default().is_empty());
    }

    #[test]
    fn every_fact_is_named_in_the_ticket_as_declared() {
        let mut facts = Facts::default();
        let json = [
            (Fact::Online, "true"),
            (
                Fact::Vulnerabilities,
                r#"{"total": 0, "by_severity": {}, "max_cvss": null}"#,
            ),
            (Fact::ThreatIntel, r#"{"epss": {}}"#),
            (Fact::Risk, r#"{"high_risk": false}"#),
            (
                Fact::Notification,
                r#"{"idempotency_key": "k", "state": "sent", "sent_at": null, "attempted_at": null}"#,
            ),
            (Fact::Sbom, r#"{"source": "s", "ref": "r"}"#),
        ];
        for (fact, value) in json {
            facts
                .set(fact, value)
                .unwrap_or_else(|e| panic!("{fact}: {e}"));
        }
        let inline = serde_json::to_value(&facts).unwrap();
        let names: BTreeSet<&str> = inline
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let declared: BTreeSet<&str> = Fact::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(names, declared);
    }

    #[test]
    fn cve_list_and_epss_map_are_bounded_and_counted() {
        let finding = |id: &str, cve: &str| Finding {
            id: id.into(),
            cves: vec![cve.into()],
            package: "p".into(),
            cvss: Some(9.8),
            severity: Severity::Critical,
            summary: String::new(),
        };
        let all: Vec<String> = (0..MAX_CVES + 10)
            .map(|i| format!("CVE-2024-{i:05}"))
            .collect();
        let worst = all.last().unwrap().clone();
        let vulns = VulnFacts {
            findings: vec![finding("worst", &worst)],
            cves: all,
            ..VulnFacts::default()
        }
        .bounded();
        assert_eq!(vulns.cves.len(), MAX_CVES);
        assert_eq!(vulns.cves_omitted, 10);
        assert!(
            vulns.cves.contains(&worst),
            "a listed finding's CVE is kept"
        );
        assert!(vulns.cves.is_sorted());

        let epss: BTreeMap<String, f64> = (0..MAX_EPSS + 5)
            .map(|i| (format!("CVE-{i:05}"), i as f64 / 10_000.0))
            .collect();
        let intel = ThreatIntelFacts {
            epss,
            ..ThreatIntelFacts::default()
        }
        .bounded();
        assert_eq!((intel.epss.len(), intel.epss_omitted), (MAX_EPSS, 5));
        let top = format!("CVE-{:05}", MAX_EPSS + 4);
        assert!(intel.epss.contains_key(&top), "the highest score is kept");
        assert!(!intel.epss.contains_key("CVE-00000"), "the lowest is cut");
        // Within the bounds nothing changes, and no count is written.
        let small = ThreatIntelFacts::default().bounded();
        assert!(!serde_json::to_string(&small).unwrap().contains("omitted"));
    }

    #[test]
    fn no_regression_to_init() {
        for from in Status::ALL {
            if from != Status::Init {
                assert!(!from.allows(Status::Init), "{from} -> INIT");
            }
        }
    }
}
