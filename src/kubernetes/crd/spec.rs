//! What a user asks to have scanned: the AssetScan's spec, validated by its
//! schema and CEL rules before the operator ever sees it.

use super::{
    ASSET_ID_PATTERN, AssetScanStatus, DURATION_PATTERN, INVENTORY_REF_PATTERN, SBOM_REF_PATTERN,
};
use assetscan_domain::{DEFAULT_CVSS_THRESHOLD, DEFAULT_EPSS_THRESHOLD, ThreatIntelPolicy};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const KEEP_STATUS_RULE: &str = "!has(oldSelf.status) || has(self.status)";
const KEEP_STATUS_MESSAGE: &str = "status may not be removed once written: it carries the fencing token that stops stale executors";

const ASSET_ID_IMMUTABLE_MESSAGE: &str = "assetId is immutable: the status fencing token belongs to this asset's fencing counter; create a new AssetScan for another asset";

const TARGET_RULE: &str = "has(self.inventoryRef) ? !has(self.host) && !has(self.ports) : has(self.host) && has(self.ports)";
const TARGET_MESSAGE: &str = "set exactly one of: host (with ports), or inventoryRef";

const PACKAGE_RULE: &str = "has(self.purl) ? !has(self.name) && !has(self.ecosystem) && !has(self.version) : has(self.name) && has(self.ecosystem) && has(self.version)";
const PACKAGE_MESSAGE: &str = "set exactly one of: purl, or name with ecosystem and version";

const SOFTWARE_RULE: &str = "!has(self.sbom) || !has(self.software) || size(self.software) == 0";
const SOFTWARE_MESSAGE: &str = "set at most one of: software (listed), or sbom (by reference)";

const RESCAN_RULE: &str = "duration(self) >= duration('1m')";
const RESCAN_MESSAGE: &str = "rescanInterval must be at least 1m";

/// What to scan, and how to judge and report what is found.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "assetscan.io",
    version = "v1alpha1",
    kind = "AssetScan",
    plural = "assetscans",
    namespaced,
    status = "AssetScanStatus",
    derive = "PartialEq",
    shortname = "ascan",
    category = "security",
    doc = "Scan one asset: check it is online, query its vulnerabilities, enrich with threat intelligence when needed, and notify at once on a confirmed high risk.",
    printcolumn(name = "Asset", type_ = "string", json_path = ".spec.assetId"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "High-Risk", type_ = "boolean", json_path = ".status.highRisk"),
    printcolumn(name = "Coverage", type_ = "string", json_path = ".status.coverage.summary"),
    printcolumn(name = "Notified", type_ = "string", json_path = ".status.notification.state"),
    printcolumn(name = "Token", type_ = "integer", json_path = ".status.fencingToken"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new(KEEP_STATUS_RULE).message(KEEP_STATUS_MESSAGE)
)]
#[x_kube(validation = Rule::new(SOFTWARE_RULE).message(SOFTWARE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct AssetScanSpec {
    /// The asset's id: the scope of the lock, the fencing counter and the
    /// tickets. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message(ASSET_ID_IMMUTABLE_MESSAGE))]
    #[schemars(length(min = 1, max = 128), regex(pattern = ASSET_ID_PATTERN))]
    pub asset_id: String,

    /// Where the online check looks.
    pub target: Target,

    /// Packages the vulnerability query asks about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 500))]
    pub software: Vec<Package>,

    /// The asset's packages by reference: an SBOM (CycloneDX 1.2-1.7 in
    /// JSON or XML, SPDX 2.2/2.3 in JSON or tag-value, SPDX 3.0 JSON-LD) in
    /// a source the operator's configuration names, read when a run
    /// queries vulnerabilities. Instead of `software`, for assets of more
    /// than a few packages: the list stays out of etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sbom: Option<SbomReference>,

    /// VEX documents (OpenVEX, CycloneDX VEX) about this asset, in sources
    /// the operator's configuration names (beside the SBOM, say), read when
    /// a run queries vulnerabilities: a finding one states `not_affected`,
    /// `false_positive` or fixed stays in the report with the statement,
    /// and raises no high risk and no alert. A document that cannot be read
    /// is named in the run's record, and its findings stand.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub vex: Vec<SbomReference>,

    /// How findings are judged.
    #[serde(default)]
    pub policy: Policy,

    /// Notification channels (names from the operator configuration) to alert
    /// on a confirmed high risk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        inner(length(min = 1, max = 63), regex(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub notify: Vec<String>,

    /// Scan again this long after a run ends (`6h`, `30m`, `1h30m`; at least
    /// `1m`). Absent: scan once per spec generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(RESCAN_RULE).message(RESCAN_MESSAGE))]
    #[schemars(length(max = 32), regex(pattern = DURATION_PATTERN))]
    pub rescan_interval: Option<String>,

    /// Start no new runs while true. A run in flight finishes.
    #[serde(default)]
    pub suspend: bool,

    /// How many AssetScanReports (one per finished run) are kept; older
    /// ones are deleted. Default 1: earlier runs stay in their tickets for
    /// the operator's `tickets.retention`; each report kept adds up to
    /// about 2.7 KB per asset in etcd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub report_history_limit: Option<u32>,
}

/// Where the asset is reached: `host` with `ports`, or `inventoryRef`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new(TARGET_RULE).message(TARGET_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// Host name or IP address to probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = "^[A-Za-z0-9._:-]+$"))]
    pub host: Option<String>,

    /// TCP ports to probe on `host`; the asset is online if one answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::ports_schema")]
    pub ports: Vec<u16>,

    /// Id of the asset in the operator's inventory, which knows how to reach
    /// it: one path segment of the inventory's URL (letters, digits and
    /// `._~@=,:+-`, not only dots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = INVENTORY_REF_PATTERN))]
    pub inventory_ref: Option<String>,
}

/// Where the asset's SBOM is: a source the platform team configured, the
/// document's reference in it, and optionally the digest it must have.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SbomReference {
    /// The SBOM source's name in the operator's configuration
    /// (`providers.sbomSources`).
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$")
    )]
    pub source: String,

    /// The document's path below the source's base URL, `/`-separated:
    /// letters, digits and `._~@=,:+-`; no empty, `.` or `..` segment, no
    /// `%` (the operator encodes).
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 512), regex(pattern = SBOM_REF_PATTERN))]
    pub reference: String,

    /// `sha256:<64 hex>`: the run fails unless the document has this digest.
    /// Absent: whatever the source serves is scanned, and its digest is
    /// recorded in the run's ticket and report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = assetscan_domain::DIGEST_PATTERN))]
    pub digest: Option<String>,
}

/// A package to look up: `name` + `ecosystem` + `version` (OSV terms, e.g.
/// `openssl`, `Debian:12`, `3.0.11-1`), or a `purl`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[x_kube(validation = Rule::new(PACKAGE_RULE).message(PACKAGE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// Package name as the ecosystem spells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub name: Option<String>,

    /// OSV ecosystem, e.g. `PyPI`, `npm`, `Debian:12`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub ecosystem: Option<String>,

    /// Installed version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub version: Option<String>,

    /// Package URL, e.g. `pkg:npm/lodash@4.17.20`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 1024),
        regex(pattern = "^pkg:[A-Za-z][A-Za-z0-9.+-]*/\\S+$")
    )]
    pub purl: Option<String>,
}

/// How findings are judged. High risk = CVSS ≥ `cvssThreshold`, or listed as
/// known exploited, or EPSS ≥ `epssThreshold`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// CVSS base score from which a finding is high risk.
    #[serde(default = "default_cvss_threshold")]
    #[schemars(range(min = 0.0, max = 10.0))]
    pub cvss_threshold: f64,

    #[serde(default)]
    pub threat_intel: ThreatIntelPolicy,

    /// EPSS probability from which a finding is high risk.
    #[serde(default = "default_epss_threshold")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub epss_threshold: f64,

    /// The share of the listed packages, in percent, that a run must have
    /// asked about: below it the run ends `Ready=False` with reason
    /// `CoverageLow` (as does a run that asked about none, whatever this
    /// says). Findings of the packages asked about are judged and notified
    /// all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub min_coverage: Option<u8>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            cvss_threshold: default_cvss_threshold(),
            threat_intel: ThreatIntelPolicy::default(),
            epss_threshold: default_epss_threshold(),
            min_coverage: None,
        }
    }
}

fn default_cvss_threshold() -> f64 {
    DEFAULT_CVSS_THRESHOLD
}

fn default_epss_threshold() -> f64 {
    DEFAULT_EPSS_THRESHOLD
}
