//! What every chat message says, in the same words: the headline, the
//! ticket line that tells repeats apart, the findings as lines.

use crate::pipeline::Notification;
use assetscan_domain::Origin;
use assetscan_domain::ticket::{Finding, Severity};
use k8s_openapi::jiff::Timestamp;

/// Chat messages list at most this many findings; the webhook gets all the
/// facts hold.
const CHAT_FINDINGS: usize = 10;

/// `High risk on web-1: 3 findings, max CVSS 10.0`.
pub(super) fn headline(n: &Notification) -> String {
    let max = n
        .vulnerabilities
        .max_cvss
        .map(|m| format!(", max CVSS {m:.1}"))
        .unwrap_or_default();
    format!(
        "High risk on {}: {} findings{max}",
        n.asset, n.vulnerabilities.total
    )
}

/// `ticket web-1/r1, fencing token 7`: how humans tell repeats apart. A
/// send that may repeat an earlier one says so here ([`resend_note`]).
pub(super) fn ticket_line(n: &Notification) -> String {
    let line = format!("ticket {}, fencing token {}", n.ticket_id, n.fencing_token);
    match resend_note(n) {
        Some(note) => format!("{line}; {note}"),
        None => line,
    }
}

/// `re-sent: may repeat the message first attempted at
/// 2026-12-06T04:00:00Z`: a chat channel has no idempotency key, so a
/// re-send after a retry or a takeover may be a second message; this tells
/// a reader that it is the same alert, and since when.
pub(super) fn resend_note(n: &Notification) -> Option<String> {
    let resend = n.resend?;
    let first = resend
        .first_attempt_at
        .and_then(|ms| i64::try_from(ms).ok())
        .and_then(|ms| Timestamp::from_millisecond(ms).ok());
    Some(match first {
        Some(at) => format!("re-sent: may repeat the message first attempted at {at:.0}"),
        None => "re-sent: may repeat an earlier message".to_owned(),
    })
}

/// `requested by team-a/payments-db, uid 0b7…`: whose object raised the
/// alert. `None` for a run of no object (the CLI's).
pub(super) fn origin_line(n: &Notification) -> Option<String> {
    let o = n.origin.as_ref()?;
    Some(format!(
        "requested by {}/{}, uid {}",
        o.namespace, o.name, o.uid
    ))
}

/// The CVEs listed as known exploited, if threat intel ran.
pub(super) fn known_exploited(n: &Notification) -> &[String] {
    n.threat_intel
        .as_ref()
        .map_or(&[], |t| t.known_exploited.as_slice())
}

/// The most severe findings, at most [`CHAT_FINDINGS`].
pub(super) fn top_findings(n: &Notification) -> &[Finding] {
    let findings = &n.vulnerabilities.findings;
    &findings[..findings.len().min(CHAT_FINDINGS)]
}

/// `CRITICAL 10.0 UBUNTU-CVE-2024-3094 [CVE-2024-3094] xz-utils: summary`.
pub(super) fn finding_line(f: &Finding) -> String {
    let score = f.cvss.map(|c| format!(" {c:.1}")).unwrap_or_default();
    let cves = match f.cves.as_slice() {
        [] => String::new(),
        [one] if *one == f.id => String::new(),
        cves => format!(" [{}]", cves.join(", ")),
    };
    let package = if f.package.is_empty() {
        String::new()
    } else {
        format!(" {}", f.package)
    };
    let summary = if f.summary.is_empty() {
        String::new()
    } else {
        format!(": {}", f.summary)
    };
    format!(
        "{}{score} {}{cves}{package}{summary}",
        severity_label(f.severity),
        f.id
    )
}

/// How severe the alert is, for the receivers that rank alerts
/// (Alertmanager's `severity` label, PagerDuty's `severity`): the most
/// severe finding's, and `Critical` whatever the scores when a CVE is
/// known to be exploited (CISA's catalog lists what attackers use now).
pub(super) fn alert_severity(n: &Notification) -> Severity {
    if !known_exploited(n).is_empty() {
        return Severity::Critical;
    }
    (n.vulnerabilities.findings.iter())
        .map(|f| f.severity)
        .max_by_key(|s| s.rank())
        .unwrap_or(Severity::Unknown)
}

/// The asset's incident, as the receivers that merge alerts key it:
/// `assetscan/team-a/web-1`. One fence is one (namespace, asset id), so
/// every run of the asset raises the same incident and a re-send of a run
/// merges into it; the CLI's runs, of no namespace, are `assetscan/web-1`.
/// At most 10 + 63 + 1 + 128 characters, under PagerDuty's 255.
pub(super) fn incident_key(asset: &str, origin: Option<&Origin>) -> String {
    match origin {
        Some(o) => format!("assetscan/{}/{asset}", o.namespace),
        None => format!("assetscan/{asset}"),
    }
}

pub(super) fn severity_label(severity: Severity) -> &'static str {
    match severity {
        Severity::Critical => "CRITICAL",
        Severity::High => "HIGH",
        Severity::Medium => "MEDIUM",
        Severity::Low => "LOW",
        Severity::None => "NONE",
        Severity::Unknown => "UNSCORED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::ticket::Severity;

    #[test]
    fn finding_lines() {
        let f = Finding {
            id: "GHSA-jfh8-c2jp-5v3q".into(),
            cves: vec!["CVE-2021-44228".into()],
            package: "Maven/log4j-core@2.14.1".into(),
            cvss: Some(10.0),
            severity: Severity::Critical,
            summary: "Remote code injection in Log4j".into(),
        };
        assert_eq!(
            finding_line(&f),
            "CRITICAL 10.0 GHSA-jfh8-c2jp-5v3q [CVE-2021-44228] Maven/log4j-core@2.14.1: Remote code injection in Log4j"
        );
    }
}
