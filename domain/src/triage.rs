//! Triage that sticks: a security team's decisions about findings, stated
//! in VEX documents (CycloneDX VEX, OpenVEX) or in the namespace's
//! `FindingException`s, applied to every run. A finding a statement covers
//! is **suppressed**: it stays in the ticket and the report with the
//! statement that suppressed it, and raises no high risk and no alert. A
//! statement that has expired no longer applies: its findings are raised
//! again, and the run records that it expired.

use crate::advisory::{self, coordinates_of_purl};
use crate::coverage::Origins;
use crate::purl::PurlParts;
use crate::sbom::SbomRef;
use crate::ticket::{
    Finding, MAX_NAMED, MAX_SUPPRESSED, Suppressed, TriageFacts, TriageRecord, TriageState,
};
use std::collections::BTreeSet;

/// One statement, as its document or exception states it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// Which statement it is: `FindingException team-a/openssl`, or
    /// `VEX artifacts/images/web.vex.json #3`.
    pub by: String,
    /// The vulnerability ids it is about: an id and its aliases (OSV ids,
    /// GHSA, CVE…). A finding is covered by its id or any of its CVEs.
    pub vulnerabilities: Vec<String>,
    /// The packages it is about, as purls or `ECOSYSTEM/NAME[@VERSION]`;
    /// empty: every package of the asset.
    pub packages: Vec<String>,
    pub state: TriageState,
    pub justification: String,
    pub owner: Option<String>,
    /// Milliseconds since the Unix epoch from which it no longer applies.
    pub expires_ms: Option<u64>,
}

/// What a run's triage starts from: the VEX documents its AssetScan names
/// (read when the run queries vulnerabilities, like its SBOM), and the
/// statements of its namespace's exceptions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TriageRequest {
    pub vex: Vec<SbomRef>,
    pub statements: Vec<Statement>,
}

/// A package a statement names, as findings name packages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Covered {
    /// `ECOSYSTEM/NAME@VERSION`, exactly.
    Exact(String),
    /// `ECOSYSTEM/NAME@`: any version.
    AnyVersion(String),
}

impl Covered {
    fn covers(&self, package: &str) -> bool {
        match self {
            Covered::Exact(exact) => package == exact,
            Covered::AnyVersion(prefix) => package.starts_with(prefix.as_str()),
        }
    }
}

/// A statement with its package references resolved.
#[derive(Clone, Debug)]
struct Rule {
    statement: Statement,
    ids: BTreeSet<String>,
    /// `None`: every package.
    packages: Option<BTreeSet<Covered>>,
}

/// The statements a run applies, resolved against its packages.
#[derive(Clone, Debug, Default)]
pub struct Triage {
    rules: Vec<Rule>,
    expired: Vec<String>,
    unresolved: Vec<String>,
    unread: Vec<String>,
}

impl Triage {
    /// The statements in force at `now_ms`, their packages resolved
    /// against what the run asks (`origins`). An expired statement is not
    /// applied; one none of whose packages the run lists is kept (it
    /// covers nothing) and one whose references name no package at all is
    /// named in [`Triage::unresolved`].
    pub fn new(statements: Vec<Statement>, origins: &Origins, now_ms: u64) -> Triage {
        let mut triage = Triage::default();
        for statement in statements {
            if statement.expires_ms.is_some_and(|at| at <= now_ms) {
                triage.expired.push(statement.by.clone());
                continue;
            }
            let packages = match statement.packages.is_empty() {
                true => None,
                false => {
                    let covered: BTreeSet<Covered> = (statement.packages.iter())
                        .flat_map(|reference| resolve(reference, origins))
                        .collect();
                    if covered.is_empty() && !statement.packages.iter().any(|p| names_a_package(p))
                    {
                        triage.unresolved.push(statement.by.clone());
                        continue;
                    }
                    Some(covered)
                }
            };
            let ids = statement.vulnerabilities.iter().cloned().collect();
            triage.rules.push(Rule {
                statement,
                ids,
                packages,
            });
        }
        triage
    }

    /// The statement that covers `finding`, if one does: the first in the
    /// order given.
    pub fn judge(&self, finding: &Finding) -> Option<TriageRecord> {
        let rule = self.rules.iter().find(|rule| {
            let about = rule.ids.contains(&finding.id)
                || finding.cves.iter().any(|cve| rule.ids.contains(cve));
            let here = (rule.packages.as_ref())
                .is_none_or(|packages| packages.iter().any(|p| p.covers(&finding.package)));
            about && here
        })?;
        let s = &rule.statement;
        Some(TriageRecord {
            by: s.by.clone(),
            state: s.state,
            justification: s.justification.clone(),
            owner: s.owner.clone(),
            expires_ms: s.expires_ms,
        })
    }

    /// The statements that had expired: their findings are raised again.
    pub fn expired(&self) -> &[String] {
        &self.expired
    }

    /// The statements whose references name no package (a CycloneDX
    /// `bom-ref` of another document, say): not applied.
    pub fn unresolved(&self) -> &[String] {
        &self.unresolved
    }

    /// Records the documents that could not be read, and why: their
    /// statements are not applied, so their findings stand (and alert).
    pub fn with_unread(mut self, unread: Vec<String>) -> Triage {
        self.unread = unread;
        self
    }

    /// Whether there is anything to apply or to record.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
            && self.expired.is_empty()
            && self.unresolved.is_empty()
            && self.unread.is_empty()
    }

    /// Splits `findings` into those that stand and those a statement
    /// covers, and what the run records of the latter (`None` when no
    /// statement was given: a run without triage records nothing new).
    pub fn apply(&self, findings: Vec<Finding>) -> (Vec<Finding>, Option<TriageFacts>) {
        if self.is_empty() {
            return (findings, None);
        }
        let mut standing = Vec::new();
        let mut suppressed = Vec::new();
        for finding in findings {
            match self.judge(&finding) {
                Some(triage) => suppressed.push(Suppressed { finding, triage }),
                None => standing.push(finding),
            }
        }
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let facts = TriageFacts {
            statements: count(self.rules.len()),
            suppressed_total: count(suppressed.len()),
            suppressed: suppressed.into_iter().take(MAX_SUPPRESSED).collect(),
            expired: self.expired.iter().take(MAX_NAMED).cloned().collect(),
            unresolved: self.unresolved.iter().take(MAX_NAMED).cloned().collect(),
            unread: self.unread.iter().take(MAX_NAMED).cloned().collect(),
        };
        (standing, Some(facts))
    }
}

/// A package reference: a purl (of a package, or a product such as an
/// image, which names none) or `ECOSYSTEM/NAME[@VERSION]`.
fn names_a_package(reference: &str) -> bool {
    match PurlParts::parse(reference) {
        Ok(_) => advisory::names_a_package(reference),
        Err(_) => coordinates_reference(reference).is_some(),
    }
}

/// What findings a package reference covers: the coordinates a purl is
/// asked under, and those of every listed package of that identity (a
/// binary asked as its source); coordinates as written.
fn resolve(reference: &str, origins: &Origins) -> Vec<Covered> {
    let Ok(purl) = PurlParts::parse(reference) else {
        return coordinates_reference(reference).into_iter().collect();
    };
    let mut covered = Vec::new();
    if let Ok(c) = coordinates_of_purl(reference, None) {
        covered.push(Covered::Exact(c.to_string()));
    }
    for (version, asked) in origins.asked_as(&purl) {
        if purl.version.is_none() || purl.version.as_deref() == version {
            covered.push(Covered::Exact(asked.to_owned()));
        }
    }
    covered
}

/// `Debian:12/openssl@3.0.11-1` (that version) or `Debian:12/openssl`
/// (any version).
fn coordinates_reference(reference: &str) -> Option<Covered> {
    // A URN or URL (a CycloneDX BOM-Link, say) is not coordinates.
    if reference.starts_with("urn:") || reference.contains("://") || reference.contains('#') {
        return None;
    }
    let (ecosystem, rest) = reference.split_once('/')?;
    if ecosystem.is_empty() || rest.is_empty() {
        return None;
    }
    Some(match rest.rsplit_once('@') {
        Some((name, version)) if !name.is_empty() && !version.is_empty() => {
            Covered::Exact(format!("{ecosystem}/{name}@{version}"))
        }
        _ => Covered::AnyVersion(format!("{ecosystem}/{}@", rest.trim_end_matches('@'))),
    })
}

#[cfg(test)]
mod tests;
