//! The packages of an SBOM document: CycloneDX 1.4 to 1.6 or SPDX 2.3,
//! JSON. Only what names a package is read (CycloneDX components' `purl`,
//! nested components included; SPDX packages' `purl` external references);
//! the rest of the document is skipped by the parser without being kept,
//! so memory follows the number of packages, not the document's size.
//!
//! The format crates (`cyclonedx-bom`, `spdx-rs`) model and check whole
//! documents, with dependency trees of 55 and 39 crates; what is needed here
//! is two fields of each format, read with serde, and the purls, read with
//! `packageurl` (which adds no crate the workspace did not have).

use assetscan_domain::{Package, package_of_purl};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The CycloneDX versions read: those whose `components[].purl` is the
/// same field with the same meaning.
const CYCLONEDX_VERSIONS: &[&str] = &["1.4", "1.5", "1.6"];
const SPDX_VERSION: &str = "SPDX-2.3";

/// What a document names: its distinct packages, and how many entries were
/// skipped.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Contents {
    pub packages: Vec<Package>,
    /// Entries without a purl.
    pub skipped: u32,
    /// Purls without an ecosystem (or a version).
    pub unsupported: u32,
}

/// Why a document was refused. Bounded: never quotes the document.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DocumentError {
    #[error("not JSON of the expected shape, or cut short: {0}")]
    NotJson(String),
    #[error("neither a CycloneDX (bomFormat) nor an SPDX (spdxVersion) document")]
    UnknownFormat,
    #[error("CycloneDX {0:?} is not one of 1.4, 1.5, 1.6")]
    CycloneDxVersion(String),
    #[error("{0:?} is not SPDX-2.3")]
    SpdxVersion(String),
}

impl DocumentError {
    /// What went wrong, without any of the document's text: what a tenant
    /// reads in the status (the whole error goes to the operator's log).
    pub fn summary(&self) -> &'static str {
        match self {
            DocumentError::NotJson(_) => "not JSON of the expected shape, or cut short",
            DocumentError::UnknownFormat => {
                "neither a CycloneDX (bomFormat) nor an SPDX (spdxVersion) document"
            }
            DocumentError::CycloneDxVersion(_) => "a CycloneDX version other than 1.4, 1.5, 1.6",
            DocumentError::SpdxVersion(_) => "an SPDX version other than SPDX-2.3",
        }
    }
}

/// Both formats' fields of interest; everything else is ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    bom_format: Option<String>,
    spec_version: Option<String>,
    spdx_version: Option<String>,
    #[serde(default)]
    components: Vec<Component>,
    #[serde(default)]
    packages: Vec<SpdxPackage>,
}

#[derive(Deserialize)]
struct Component {
    purl: Option<String>,
    #[serde(default)]
    components: Vec<Component>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpdxPackage {
    #[serde(default)]
    external_refs: Vec<ExternalRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExternalRef {
    reference_type: String,
    reference_locator: String,
}

/// The packages `body` names.
pub(crate) fn read(body: &[u8]) -> Result<Contents, DocumentError> {
    let document: Document = serde_json::from_slice(body).map_err(|e| {
        DocumentError::NotJson(assetscan_domain::text::truncate_chars(&e.to_string(), 160))
    })?;
    let purls: Vec<Option<String>> = match (&document.bom_format, &document.spdx_version) {
        (Some(format), None) if format == "CycloneDX" => {
            let version = document.spec_version.clone().unwrap_or_default();
            if !CYCLONEDX_VERSIONS.contains(&version.as_str()) {
                return Err(DocumentError::CycloneDxVersion(version));
            }
            let mut purls = Vec::new();
            flatten(document.components, &mut purls);
            purls
        }
        (None, Some(version)) if version == SPDX_VERSION => document
            .packages
            .into_iter()
            .map(|p| {
                p.external_refs
                    .into_iter()
                    .find(|r| r.reference_type == "purl")
                    .map(|r| r.reference_locator)
            })
            .collect(),
        (None, Some(version)) => return Err(DocumentError::SpdxVersion(version.clone())),
        _ => return Err(DocumentError::UnknownFormat),
    };
    Ok(contents(purls))
}

/// Every component's purl, depth first (CycloneDX nests components).
fn flatten(components: Vec<Component>, purls: &mut Vec<Option<String>>) {
    for component in components {
        purls.push(component.purl);
        flatten(component.components, purls);
    }
}

/// Distinct packages by their name in findings; entries counted by why
/// they were skipped.
fn contents(purls: Vec<Option<String>>) -> Contents {
    let mut contents = Contents::default();
    let mut distinct = BTreeMap::new();
    for purl in purls {
        match purl.as_deref().map(package_of_purl) {
            None => contents.skipped += 1,
            Some(None) => contents.unsupported += 1,
            Some(Some(package)) => {
                distinct.entry(package.to_string()).or_insert(package);
            }
        }
    }
    contents.packages = distinct.into_values().collect();
    contents
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_json(value: serde_json::Value) -> Result<Contents, DocumentError> {
        read(&serde_json::to_vec(&value).unwrap())
    }

    #[test]
    fn cyclonedx_components_nest_and_repeat() {
        let contents = read_json(json!({
            "bomFormat": "CycloneDX", "specVersion": "1.5",
            "metadata": {"component": {"purl": "pkg:oci/web@sha256%3Aab"}},
            "components": [
                {"name": "a", "purl": "pkg:npm/a@1.0.0", "components": [
                    {"name": "b", "purl": "pkg:npm/b@2.0.0"},
                    {"name": "no-purl"}
                ]},
                {"name": "a-again", "purl": "pkg:npm/a@1.0.0"},
                {"name": "rpm", "purl": "pkg:rpm/fedora/curl@7.50.3"}
            ]
        }))
        .unwrap();
        let names: Vec<String> = contents.packages.iter().map(|p| p.to_string()).collect();
        assert_eq!(names, ["npm/a@1.0.0", "npm/b@2.0.0"]);
        assert_eq!((contents.skipped, contents.unsupported), (1, 1));
    }

    #[test]
    fn spdx_packages_take_their_purl_reference() {
        let contents = read_json(json!({
            "spdxVersion": "SPDX-2.3",
            "packages": [
                {"name": "x", "externalRefs": [
                    {"referenceCategory": "SECURITY", "referenceType": "cpe23Type", "referenceLocator": "cpe:2.3:a:x"},
                    {"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": "pkg:cargo/tokio@1.19.2"}
                ]},
                {"name": "y"}
            ]
        }))
        .unwrap();
        assert_eq!(contents.packages.len(), 1);
        assert_eq!((contents.skipped, contents.unsupported), (1, 0));
    }

    #[test]
    fn other_documents_are_refused() {
        for (doc, expected) in [
            (
                json!({"bomFormat": "CycloneDX", "specVersion": "1.3"}),
                "1.3",
            ),
            (json!({"bomFormat": "CycloneDX"}), "\"\""),
            (json!({"spdxVersion": "SPDX-2.2"}), "SPDX-2.2"),
            (
                json!({"spdxVersion": "SPDX-2.3", "bomFormat": "CycloneDX"}),
                "neither",
            ),
            (json!({"components": []}), "neither"),
            (json!([1, 2]), "cut short"),
        ] {
            let err = read_json(doc).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
        let cut = br#"{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [{"purl": "pkg:npm/a@1"#;
        assert!(matches!(read(cut), Err(DocumentError::NotJson(_))));
    }
}
