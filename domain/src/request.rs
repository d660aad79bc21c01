//! One scan run to perform, in the domain's terms: what the controller
//! makes of an AssetScan and the standalone `scan` makes of its flags.

use crate::asset::AssetId;
use crate::package::Package;
use crate::policy::Policy;
use crate::sbom::SbomRef;
use crate::target::Target;
use crate::triage::TriageRequest;
use serde::Serialize;

/// Who asked for a run: the object it was made of, as `namespace`, `name`
/// and `uid`. Every notification names it, so that a receiver shared by
/// several teams can tell whose object raised an alert (and a team cannot
/// pass its alert off as another's). The CLI's runs have none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Origin {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// One scan run to perform.
#[derive(Clone, Debug)]
pub struct ScanRequest {
    pub asset: AssetId,
    pub run: String,
    pub target: Target,
    pub software: Vec<Package>,
    /// Where the packages are when they are not listed in `software` (then
    /// empty): read by the run when it queries vulnerabilities.
    pub sbom: Option<SbomRef>,
    pub policy: Policy,
    /// Notification channel names.
    pub channels: Vec<String>,
    /// Lowest acceptable fencing token minus one: the token the status
    /// recorded ([`crate::fence::floor`]).
    pub token_floor: u64,
    /// This executor's holder id.
    pub holder: String,
    /// What the run belongs to (the AssetScan, by uid): once the owner is
    /// retired, the run is refused instead of created. `None` for runs of
    /// no owner (the CLI's).
    pub owner: Option<String>,
    /// A run of an earlier spec generation of the same owner that this run
    /// replaces: ended when this one is claimed, or, while it is alerting,
    /// this run is not claimed (the pipeline's `EarlierRunAlerting`; the
    /// store's `Claim::supersedes` says how).
    pub supersedes: Option<String>,
    /// The caller has seen this run not ended (the operator: the object's
    /// status as stored shows no end), so the ticket is not read before the
    /// claim: a claim answers for a run that did end all the same (it
    /// returns the ticket as found and takes nothing), and an open run
    /// starts one round trip sooner. `false` reads first, so that a run
    /// that ended costs one read, not a claim (the CLI's).
    pub expect_open: bool,
    /// Who asked for the run; `None` for the CLI's.
    pub origin: Option<Origin>,
    /// The asset's last run ended with a high risk (its object's status
    /// says so): when this run ends clean, having asked about every package,
    /// it tells the channels that resolve (Alertmanager, PagerDuty) that the
    /// asset's alert is over. `false` for the CLI's runs.
    pub resolves_alert: bool,
    /// The VEX documents and exceptions the run's findings are judged with.
    pub triage: TriageRequest,
}
