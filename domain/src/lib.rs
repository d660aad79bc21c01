//! The domain of assetscan-operator: what a scan is about and what it
//! found, in the operator's own terms. Nothing here knows Kubernetes, Redis
//! or HTTP; the layers above convert to and from these types:
//!
//! - the store (Redis and its Lua scripts) keeps [`ticket::Ticket`]s and
//!   enforces their state machine, declared once in [`machine`] (the
//!   scripts' tables are generated from it), and the [`fence`];
//! - the pipeline drives a [`ScanRequest`] through the [`plan`] with the
//!   providers, and judges the facts with [`assess`];
//! - the Kubernetes adapter (CRD, controller) makes a [`RunView`] and a
//!   [`ScanRequest`] of an AssetScan, and mirrors tickets into its status;
//! - the CLI builds the same requests from its flags.
//!
//! The model check of the fencing protocol uses this crate alone.

pub mod advisory;
pub mod asset;
mod coverage;
mod fact_json;
pub mod fence;
pub mod machine;
mod package;
pub mod plan;
mod policy;
pub mod purl;
pub mod reference;
mod request;
mod risk;
pub mod run;
mod sbom;
pub mod shard;
pub mod share;
mod target;
pub mod text;
pub mod ticket;
mod triage;

pub use advisory::{NotAsked, SourceHint};
pub use asset::{AssetId, IdKind, InvalidId, MAX_ASSET_ID_LEN};
pub use coverage::{Asked, Coverage, Inventory, NotAskedEntry, Origins};
pub use fence::Fence;
pub use machine::{Alert, End, Fact, VERDICT};
pub use package::{Coordinates, Package, PackageError, Purl};
pub use plan::{Next, plan};
pub use policy::{
    DEFAULT_CVSS_THRESHOLD, DEFAULT_EPSS_THRESHOLD, Policy, ThreatIntelPolicy,
    UnknownThreatIntelPolicy,
};
pub use request::{Origin, ScanRequest};
pub use risk::{assess, needs_threat_intel};
pub use run::{RESCAN_ANNOTATION, Recorded, RunDecision, RunView, owner_id, run_order};
pub use sbom::{DIGEST_PATTERN, Digest, SbomFacts, SbomProblem, SbomRead, SbomRef, SbomRefError};
pub use target::Target;
pub use ticket::{Suppressed, TriageFacts, TriageRecord, TriageState};
pub use triage::{Statement, Triage, TriageRequest};
