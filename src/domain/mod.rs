//! What a scan is about, in the operator's own terms: the packages to look
//! up, where the asset is reached, and the policy that judges the findings.
//!
//! Nothing here knows Kubernetes. The controller converts its resource into
//! these types in one place (`controller/request.rs`), the standalone `scan`
//! builds them from its flags, and the pipeline and the providers see
//! nothing else, so they run the same with or without a cluster.

mod package;
mod policy;
mod risk;
mod target;

pub use package::{Coordinates, Package, PackageError, Purl};
pub use policy::{
    DEFAULT_CVSS_THRESHOLD, DEFAULT_EPSS_THRESHOLD, Policy, ThreatIntelPolicy,
    UnknownThreatIntelPolicy,
};
pub use risk::{assess, needs_threat_intel};
pub use target::Target;
