//! The vulnerability query of a run: of the packages the AssetScan lists,
//! or of those of the SBOM it names, read now, when the run queries (so a
//! rescan, or a new reference or digest, reads it again), and recorded in
//! the same write as the vulnerabilities found in it.
//!
//! Either way every package is asked about under its advisory coordinates
//! (one mapping, [`assetscan_domain::advisory`]), and what could not be
//! asked about is recorded with the findings as the run's coverage.

use super::facts::{Facts, to_json};
use super::{Effects, StepError};
use assetscan_domain::ticket::Fact;
use assetscan_domain::{Coverage, Inventory, Package, ScanRequest};

/// The facts of the query: `vulnerabilities` (with the coverage), and
/// `sbom` when the packages came from one. An SBOM that cannot be used
/// fails the step with its `sbom` fact (which says why), recorded with the
/// error.
pub(super) async fn query_vulnerabilities<E: Effects>(
    effects: &E,
    req: &ScanRequest,
) -> Result<Facts, (StepError, Facts)> {
    let failed = |e: StepError| (e, Facts::new());
    let (packages, coverage, mut facts) = match &req.sbom {
        None => {
            let (coordinates, coverage) = Inventory::of_packages(&req.software).finish(None);
            let packages = coordinates.into_iter().map(Package::Coordinates).collect();
            (packages, coverage, Facts::new())
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
            (read.packages, read.coverage, facts)
        }
    };
    let coverage = Coverage {
        minimum: req.policy.min_coverage,
        ..coverage
    };
    let asked = ScanRequest {
        software: packages,
        sbom: None,
        ..req.clone()
    };
    let mut vulns = match effects.query_vulnerabilities(&asked).await {
        Ok(vulns) => vulns,
        Err(error) => return Err((error, facts)),
    };
    vulns.coverage = Some(coverage);
    let recorded = to_json(&vulns.bounded()).map_err(failed)?;
    facts.insert(Fact::Vulnerabilities, recorded);
    Ok(facts)
}
