//! The custom resources, the Kubernetes adapter's half of the domain. The
//! `AssetScan` custom resource: what a user asks to have scanned (spec),
//! and the durable, user-facing mirror of the scan ticket (status). Schema
//! and CEL rules only: the controller converts the spec into the pipeline's
//! request and maps tickets onto the status (`controller/reconcile/request.rs`,
//! `controller/status/from_ticket.rs`).
//!
//! The CRD in `crds/` is generated from these types ([`crd_yaml`]) and kept in
//! sync by a test. Validation lives in the schema, so the API server rejects a
//! bad object before the operator ever sees it:
//!
//! - plain OpenAPI constraints (lengths, ranges, patterns, enums) from
//!   `#[schemars(...)]`;
//! - CEL rules (`x-kubernetes-validations`) from kube's `#[x_kube(...)]` /
//!   `#[kube(validation = ...)]`, for what OpenAPI cannot say: "exactly one
//!   of", immutability, and the fencing rule on status (see docs/design/reconcile.md,
//!   "Fencing the mirror"): a status write that goes backwards in
//!   `(fencingToken, revision)` is refused by the API server itself, so a
//!   stale executor cannot overwrite newer state even if it slipped one write
//!   into Redis before the takeover.
//!
//! One module per resource part: the spec ([`spec`]), the status with its
//! fence rules ([`status`]), the report ([`report`]); the namespace's
//! decisions about findings ([`exception`]); the channels defined as
//! objects, a team's and the platform's ([`channel`]).

mod channel;
mod exception;
mod report;
mod spec;
mod status;

pub use channel::{
    ChannelSettings, ChannelType, CloudEventsMode, ClusterNotificationChannel,
    ClusterNotificationChannelSpec, NamespacedSecretReference, NotificationChannel,
    NotificationChannelSpec, NotificationChannelStatus, SecretReference,
};
pub use exception::{ExceptionState, FindingException, FindingExceptionSpec};
pub use report::{
    AssetScanReport, AssetScanReportSpec, DEFAULT_REPORT_HISTORY_LIMIT, ReportCoverage,
    ReportFinding, ReportFindings, ReportNotAsked, ReportNotification, ReportSbom,
    ReportSuppressed, ReportThreatIntel, ReportTriage,
};
pub use spec::{AssetScan, AssetScanSpec, Package, Policy, SbomReference, Target};
pub use status::{
    AssetScanStatus, CoverageStatus, LastErrorStatus, NotificationStatus, VulnerabilitySummary,
    is_fence_refusal, not_asked_by_reason,
};

use assetscan_domain::ticket::{NotificationState, Status};

/// The label that records an AssetScan's bucket ([`assetscan_domain::shard`]):
/// set once by the operator when it first sees the object (or by the user,
/// whose valid value is honoured), so that each replica asks the API server
/// for its own buckets' objects only.
pub const SHARD_LABEL: &str = "assetscan.io/shard-bucket";
use kube::CustomResourceExt;
use schemars::{Schema, SchemaGenerator, json_schema};

/// Same character set as the Redis key validation of asset ids (no `{`, `}`,
/// whitespace or control characters; at most 128 bytes), but stricter: ASCII
/// only, so 128 characters are 128 bytes, and no leading punctuation.
pub const ASSET_ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:/-]*$";

/// `target.inventoryRef`: one segment ([`assetscan_domain::reference`]).
pub const INVENTORY_REF_PATTERN: &str = concat!(
    "^",
    "[A-Za-z0-9._~@=,:+-]*[A-Za-z0-9_~@=,:+-][A-Za-z0-9._~@=,:+-]*",
    "$"
);

/// `sbom.ref`: segments separated by `/` ([`assetscan_domain::reference`]).
pub const SBOM_REF_PATTERN: &str = concat!(
    "^",
    "[A-Za-z0-9._~@=,:+-]*[A-Za-z0-9_~@=,:+-][A-Za-z0-9._~@=,:+-]*",
    "(/",
    "[A-Za-z0-9._~@=,:+-]*[A-Za-z0-9_~@=,:+-][A-Za-z0-9._~@=,:+-]*",
    ")*$"
);

/// A Go-style duration restricted to whole `h`, `m` and `s` units (`6h`,
/// `30m`, `1h30m`): the operator's duration grammar (`crate::duration`) with
/// those units, and a subset of CEL's `duration()`, so the schema can also
/// enforce a minimum.
pub const DURATION_PATTERN: &str = "^([0-9]+[hms])+$";

/// Every CRD the operator owns, by name, as YAML: what the `crd` subcommand
/// prints and `crds/` stores.
pub fn crds_yaml() -> Vec<(&'static str, String)> {
    [
        (AssetScan::crd_name(), AssetScan::crd()),
        (AssetScanReport::crd_name(), AssetScanReport::crd()),
        (FindingException::crd_name(), FindingException::crd()),
        (NotificationChannel::crd_name(), NotificationChannel::crd()),
        (
            ClusterNotificationChannel::crd_name(),
            ClusterNotificationChannel::crd(),
        ),
    ]
    .into_iter()
    .map(|(name, crd)| {
        let yaml =
            crate::yaml::to_string(&crd).expect("a CRD is plain data and serializes to YAML");
        (name, yaml)
    })
    .collect()
}

/// Ports as `int32` in 1..=65535. Written out because schemars would describe
/// `u16` with format `uint16`, which the API server does not recognize.
pub(crate) fn ports_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "minItems": 1,
        "maxItems": 16,
        "items": { "type": "integer", "format": "int32", "minimum": 1, "maximum": 65535 },
        "x-kubernetes-list-type": "set",
    })
}

/// The ticket's wire names, so `phase` reads exactly like the ticket and the
/// audit stream.
pub(crate) fn phase_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    json_schema!({ "type": "string", "enum": names })
}

pub(crate) fn notification_state_schema(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<serde_json::Value> = [
        NotificationState::Sending,
        NotificationState::Sent,
        NotificationState::Skipped,
    ]
    .iter()
    .map(|s| serde_json::to_value(s).expect("a unit variant serializes to a string"))
    .collect();
    json_schema!({ "type": "string", "enum": names })
}
