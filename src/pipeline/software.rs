//! The vulnerability query of a run: of the packages the AssetScan lists,
//! or of those of the SBOM it names, read now, when the run queries (so a
//! rescan, or a new reference or digest, reads it again), and recorded in
//! the same write as the vulnerabilities found in it.

use super::facts::{Facts, to_json};
use super::{Effects, StepError};
use assetscan_domain::ScanRequest;
use assetscan_domain::ticket::Fact;

/// The facts of the query: `vulnerabilities`, and `sbom` when the packages
/// came from one. An SBOM that cannot be used fails the step with its
/// `sbom` fact (which says why), recorded with the error.
pub(super) async fn query_vulnerabilities<E: Effects>(
    effects: &E,
    req: &ScanRequest,
) -> Result<Facts, (StepError, Facts)> {
    let failed = |e: StepError| (e, Facts::new());
    let Some(sbom) = &req.sbom else {
        let vulns = effects.query_vulnerabilities(req).await.map_err(failed)?;
        let recorded = to_json(&vulns.bounded()).map_err(failed)?;
        return Ok(Facts::from([(Fact::Vulnerabilities, recorded)]));
    };
    let read = match effects.read_sbom(sbom).await {
        Ok(read) => read,
        Err((error, facts)) => {
            let recorded = to_json(&facts).map(|v| Facts::from([(Fact::Sbom, v)]));
            return Err((error, recorded.unwrap_or_default()));
        }
    };
    // Read: recorded whatever the query does, so that a problem an earlier
    // attempt recorded does not outlive it.
    let mut facts = Facts::from([(Fact::Sbom, to_json(&read.facts).map_err(failed)?)]);
    let listed = ScanRequest {
        software: read.packages,
        sbom: None,
        ..req.clone()
    };
    let vulns = match effects.query_vulnerabilities(&listed).await {
        Ok(vulns) => vulns,
        Err(error) => return Err((error, facts)),
    };
    let recorded = to_json(&vulns.bounded()).map_err(failed)?;
    facts.insert(Fact::Vulnerabilities, recorded);
    Ok(facts)
}
