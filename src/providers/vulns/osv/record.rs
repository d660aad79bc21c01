//! An OSV record and what it contributes to a finding.
//!
//! Scoring: the highest base score over the record's CVSS vectors
//! (`CVSS_V2`, `CVSS_V3`, `CVSS_V4`, at record level and per affected
//! package), computed with the `cvss` crate. Only a record with no usable
//! vector falls back to a qualitative label: the `Ubuntu` severity type or
//! GHSA's `database_specific.severity` (`MODERATE` is Medium). Such a
//! finding gets that bucket but no CVSS score, so the risk verdict treats it
//! as unscored. A record with neither is [`Severity::Unknown`], and still
//! counted.

use crate::providers::cve::embedded_cve;
use crate::providers::vulns::findings::{null_as_empty, round_score};
use assetscan_domain::text::truncate_chars;
use assetscan_domain::ticket::Severity;
use serde::Deserialize;

/// The parts of an OSV record that scoring reads. Everything else, and any
/// shape of `database_specific`, is tolerated.
#[derive(Deserialize)]
pub(super) struct OsvRecord {
    pub(super) id: String,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    details: Option<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    aliases: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    related: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    upstream: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    severity: Vec<SeverityEntry>,
    #[serde(default, deserialize_with = "null_as_empty")]
    affected: Vec<Affected>,
    #[serde(default)]
    database_specific: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct SeverityEntry {
    #[serde(rename = "type")]
    kind: String,
    score: String,
}

#[derive(Deserialize)]
struct Affected {
    #[serde(default, deserialize_with = "null_as_empty")]
    severity: Vec<SeverityEntry>,
}

/// What a record contributes to a finding, whatever package matched it.
#[derive(Debug)]
pub(super) struct Scored {
    pub(super) cves: Vec<String>,
    pub(super) cvss: Option<f64>,
    pub(super) severity: Severity,
    pub(super) summary: String,
}

pub(super) fn score(record: &OsvRecord) -> Scored {
    let entries = record
        .severity
        .iter()
        .chain(record.affected.iter().flat_map(|a| &a.severity));
    let cvss = entries.filter_map(cvss_base_score).reduce(f64::max);
    let severity = match cvss {
        Some(score) => Severity::from_score(score),
        None => qualitative(record).unwrap_or(Severity::Unknown),
    };
    Scored {
        cves: cves(record),
        cvss,
        severity,
        summary: summary(record),
    }
}

/// The base score of a `CVSS_V2`/`CVSS_V3`/`CVSS_V4` entry; `None` for other
/// types and for vectors the crate cannot parse.
fn cvss_base_score(entry: &SeverityEntry) -> Option<f64> {
    if !matches!(entry.kind.as_str(), "CVSS_V2" | "CVSS_V3" | "CVSS_V4") {
        return None;
    }
    match entry.score.parse::<cvss::Cvss>() {
        Ok(vector) => Some(round_score(vector.score())),
        Err(e) => {
            tracing::debug!(vector = %entry.score, error = %e, "unparsable CVSS vector ignored");
            None
        }
    }
}

/// The most severe qualitative label: `Ubuntu`-type severities and GHSA's
/// `database_specific.severity`. Used only when no vector scored.
fn qualitative(record: &OsvRecord) -> Option<Severity> {
    let ubuntu = record
        .severity
        .iter()
        .filter(|e| e.kind == "Ubuntu")
        .map(|e| e.score.as_str());
    let database = record
        .database_specific
        .as_ref()
        .and_then(|v| v.get("severity"))
        .and_then(|v| v.as_str());
    ubuntu
        .chain(database)
        .filter_map(bucket)
        .max_by_key(|s| s.rank())
}

fn bucket(label: &str) -> Option<Severity> {
    match label.trim().to_ascii_uppercase().as_str() {
        "CRITICAL" => Some(Severity::Critical),
        "HIGH" => Some(Severity::High),
        "MODERATE" | "MEDIUM" => Some(Severity::Medium),
        "LOW" | "NEGLIGIBLE" => Some(Severity::Low),
        _ => None,
    }
}

/// CVE ids from the id itself, `aliases`, `related` and `upstream`, in that
/// order, deduplicated. Ubuntu records name their CVE in `related` or
/// `upstream` (and USNs point to `UBUNTU-CVE-…` ids there), never in
/// `aliases`.
fn cves(record: &OsvRecord) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let candidates = std::iter::once(&record.id)
        .chain(&record.aliases)
        .chain(&record.related)
        .chain(&record.upstream);
    for cve in candidates.filter_map(|c| embedded_cve(c)) {
        if !out.iter().any(|seen| seen == cve) {
            out.push(cve.to_owned());
        }
    }
    out
}

/// `summary`, or else the first line of `details`, at most 200 characters.
fn summary(record: &OsvRecord) -> String {
    let text = record
        .summary
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| {
            record
                .details
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
        })
        .unwrap_or_default();
    truncate_chars(text.trim(), 200)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: &str) -> OsvRecord {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn highest_vector_wins_and_labels_only_fill_gaps() {
        let both = record(
            r#"{"id":"X-1","severity":[
                {"type":"CVSS_V3","score":"CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H"},
                {"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:P/I:P/A:P"}],
               "database_specific":{"severity":"LOW"}}"#,
        );
        let s = score(&both);
        assert_eq!((s.cvss, s.severity), (Some(8.8), Severity::High));

        let v2_only = record(
            r#"{"id":"X-2","severity":[{"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:P/I:P/A:P"}]}"#,
        );
        assert_eq!(score(&v2_only).cvss, Some(7.5));

        let label = record(r#"{"id":"X-3","database_specific":{"severity":"MODERATE"}}"#);
        assert_eq!(
            (score(&label).cvss, score(&label).severity),
            (None, Severity::Medium)
        );

        let garbage = record(
            r#"{"id":"X-4","severity":[{"type":"CVSS_V3","score":"CVSS:3.1/AV:Q"}],"database_specific":"<Any value>"}"#,
        );
        assert_eq!(
            (score(&garbage).cvss, score(&garbage).severity),
            (None, Severity::Unknown)
        );

        let per_package = record(
            r#"{"id":"X-5","affected":[{"severity":[{"type":"CVSS_V3","score":"CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}]}]}"#,
        );
        assert_eq!(score(&per_package).cvss, Some(9.8));
    }

    #[test]
    fn nulls_and_missing_arrays_are_empty() {
        let r = record(
            r#"{"id":"X-6","aliases":null,"severity":null,"details":"\n first line \nsecond"}"#,
        );
        let s = score(&r);
        assert_eq!(s.severity, Severity::Unknown);
        assert_eq!(s.summary, "first line");
    }

    #[test]
    fn cves_from_aliases_related_and_upstream() {
        // Derived: a USN-like record whose CVEs are only in its links (the
        // real UBUNTU-CVE-* records also embed theirs in the id).
        let r = record(
            r#"{"id":"USN-1","aliases":["CVE-2024-3333","GHSA-x"],"related":["CVE-2024-1111","USN-2","CVE-2024-3333"],"upstream":["UBUNTU-CVE-2024-2222"]}"#,
        );
        assert_eq!(
            cves(&r),
            ["CVE-2024-3333", "CVE-2024-1111", "CVE-2024-2222"]
        );
    }
}
