//! The vulnerability query of a run: of the packages the AssetScan lists,
//! or of those of the SBOM it names, read now, when the run queries (so a
//! rescan, or a new reference or digest, reads it again), and recorded in
//! the same write as the vulnerabilities found in it.
//!
//! Either way every package is asked about under its advisory coordinates
//! (one mapping, [`assetscan_domain::advisory`]), and what could not be
//! asked about is recorded with the findings as the run's coverage. The
//! findings are judged with the run's triage: the VEX documents it names,
//! read now too, and its namespace's exceptions.

use super::facts::{Facts, to_json};
use super::{Effects, StepError};
use assetscan_domain::ticket::{Fact, now_ms};
use assetscan_domain::{
    Coverage, Inventory, Origins, Package, ScanRequest, Statement, Triage, TriageRequest,
};

/// The facts of the query: `vulnerabilities` (with the coverage and the
/// triage), and `sbom` when the packages came from one. An SBOM that
/// cannot be used fails the step with its `sbom` fact (which says why),
/// recorded with the error. A VEX document that cannot be read does not:
/// its statements are not applied, so the findings stand, and the run
/// records why.
pub(super) async fn query_vulnerabilities<E: Effects>(
    effects: &E,
    req: &ScanRequest,
) -> Result<Facts, (StepError, Facts)> {
    let failed = |e: StepError| (e, Facts::new());
    let (packages, coverage, origins, mut facts) = match &req.sbom {
        None => {
            let asked = Inventory::of_packages(&req.software).finish();
            let packages = asked
                .packages
                .into_iter()
                .map(Package::Coordinates)
                .collect();
            (packages, asked.coverage, asked.origins, Facts::new())
        }
        Some(sbom) => {
            let read = match effects.read_sbom(sbom).await {
                Ok(read) => read,
                Err((error, facts)) => {
                    let recorded = to_json(&facts).map(|v| Facts::from([(Fact::Sbom, v)]));
                    return Err((error, recorded.unwrap_or_default()));
                }
            };
            // Read: recorded whatever the query does, so that a problem an
            // earlier attempt recorded does not outlive it.
            let facts = Facts::from([(Fact::Sbom, to_json(&read.facts).map_err(failed)?)]);
            (read.packages, read.coverage, read.origins, facts)
        }
    };
    let coverage = Coverage {
        minimum: req.policy.min_coverage,
        ..coverage
    };
    let triage = triage(effects, &req.triage, &origins).await;
    let asked = ScanRequest {
        software: packages,
        sbom: None,
        ..req.clone()
    };
    let mut vulns = match effects.query_vulnerabilities(&asked, &triage).await {
        Ok(vulns) => vulns,
        Err(error) => return Err((error, facts)),
    };
    // A run that lists no package and names no SBOM asks about the asset
    // as a whole (the generic endpoint's contract): it has no coverage.
    let listed_nothing = req.sbom.is_none() && req.software.is_empty();
    vulns.coverage = Some(coverage).filter(|_| !listed_nothing);
    let recorded = to_json(&vulns.bounded()).map_err(failed)?;
    facts.insert(Fact::Vulnerabilities, recorded);
    Ok(facts)
}

/// The run's statements in force now: its exceptions', and those of each
/// VEX document it names that could be read.
async fn triage<E: Effects>(effects: &E, request: &TriageRequest, origins: &Origins) -> Triage {
    let mut statements: Vec<Statement> = request.statements.clone();
    let mut unread = Vec::new();
    for vex in &request.vex {
        match effects.read_vex(vex).await {
            Ok(read) => statements.extend(read),
            Err(why) => unread.push(format!("VEX {}/{}: {why}", vex.source(), vex.path())),
        }
    }
    Triage::new(statements, origins, now_ms()).with_unread(unread)
}
