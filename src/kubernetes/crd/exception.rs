//! The FindingException: a security team's decision about findings, kept in
//! the namespace of the AssetScans it applies to (and of no other), beside
//! them in Git: the vulnerabilities, optionally the packages and assets,
//! the state (`NotAffected`, `FalsePositive`, `Accepted`), why, who owns
//! the decision, and until when. Each run of an AssetScan of the namespace
//! applies the exceptions in force; an expired one no longer does, and the
//! run records that it expired.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const ACCEPTED_EXPIRES_RULE: &str = "self.state != 'Accepted' || has(self.expires)";
const ACCEPTED_EXPIRES_MESSAGE: &str =
    "an accepted risk needs an expiry (expires): it is raised again from then on";

/// Findings a security team has decided about, for the AssetScans of this
/// namespace.
#[allow(
    clippy::duplicated_attributes,
    reason = "two printer columns of one type read as a repeated `type_` to the lint"
)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "assetscan.io",
    version = "v1alpha1",
    kind = "FindingException",
    plural = "findingexceptions",
    namespaced,
    derive = "PartialEq",
    shortname = "fex",
    category = "security",
    doc = "A decision about findings (not affected, false positive, or an accepted risk until an expiry) for the AssetScans of this namespace: the findings stay in the reports with the decision, and raise no high risk and no alert.",
    printcolumn(name = "State", type_ = "string", json_path = ".spec.state"),
    printcolumn(name = "Owner", type_ = "string", json_path = ".spec.owner"),
    printcolumn(name = "Expires", type_ = "date", json_path = ".spec.expires"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(ACCEPTED_EXPIRES_RULE).message(ACCEPTED_EXPIRES_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct FindingExceptionSpec {
    /// The vulnerabilities, by id (`GHSA-…`, `DLA-…`) or CVE: a finding is
    /// covered by its id or any CVE it is about.
    #[schemars(
        length(min = 1, max = 100),
        inner(
            length(min = 1, max = 128),
            regex(pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]*$")
        )
    )]
    pub vulnerabilities: Vec<String>,

    /// The packages, as purls (`pkg:deb/debian/libssl3@3.0.11-1?distro=debian-12`,
    /// with or without a version) or as `ECOSYSTEM/NAME[@VERSION]`
    /// (`Debian:12/openssl`). Absent: every package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), inner(length(min = 1, max = 512)))]
    pub packages: Vec<String>,

    /// The AssetScans, by `assetId`. Absent: every AssetScan of the
    /// namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 100),
        inner(length(min = 1, max = 128), regex(pattern = super::ASSET_ID_PATTERN))
    )]
    pub asset_ids: Vec<String>,

    pub state: ExceptionState,

    /// Why: what was analysed, by whom, what makes the finding harmless or
    /// the risk acceptable.
    #[schemars(length(min = 1, max = 1024))]
    pub justification: String,

    /// Who answers for the decision (a team, an address).
    #[schemars(length(min = 1, max = 256))]
    pub owner: String,

    /// From when the exception no longer applies: the findings are raised
    /// again by the next run. Required for `Accepted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Time>,
}

/// The decision.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExceptionState {
    /// The package is not affected (the vulnerable code is absent or not
    /// reachable).
    NotAffected,
    /// The finding is wrong.
    FalsePositive,
    /// The risk is accepted by its owner until `expires`.
    Accepted,
}
