//! CycloneDX JSON (1.2 to 1.7), SPDX 2.2/2.3 JSON and SPDX 3.0 JSON-LD.

use super::{DocumentError, Entry, MAX_DEPTH, cyclonedx_version, spdx2_version};
use assetscan_domain::SourceHint;
use serde::Deserialize;
use std::collections::BTreeSet;

/// The three formats' fields of interest; everything else is ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    bom_format: Option<String>,
    spec_version: Option<String>,
    spdx_version: Option<String>,
    metadata: Option<Metadata>,
    #[serde(default)]
    components: Vec<Component>,
    #[serde(default)]
    packages: Vec<SpdxPackage>,
    #[serde(default)]
    document_describes: Vec<String>,
    #[serde(default)]
    relationships: Vec<Relationship>,
    #[serde(rename = "@context")]
    context: Option<serde_json::Value>,
    #[serde(rename = "@graph", default)]
    graph: Vec<Element>,
}

#[derive(Deserialize)]
struct Metadata {
    component: Option<Component>,
}

#[derive(Deserialize)]
struct Component {
    #[serde(default)]
    name: String,
    purl: Option<String>,
    #[serde(default)]
    properties: Vec<Property>,
    #[serde(default)]
    components: Vec<Component>,
}

#[derive(Deserialize)]
struct Property {
    name: Option<String>,
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpdxPackage {
    #[serde(rename = "SPDXID", default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    external_refs: Vec<ExternalRef>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExternalRef {
    #[serde(default)]
    reference_type: String,
    #[serde(default)]
    reference_locator: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Relationship {
    #[serde(default)]
    spdx_element_id: String,
    #[serde(default)]
    relationship_type: String,
    #[serde(default)]
    related_spdx_element: String,
}

/// An SPDX 3 element: packages, and the documents and SBOMs whose root
/// elements are the subjects.
#[derive(Deserialize)]
struct Element {
    #[serde(rename = "type", alias = "@type", default)]
    kind: String,
    #[serde(rename = "spdxId", alias = "@id", default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(rename = "software_packageUrl")]
    package_url: Option<String>,
    #[serde(rename = "rootElement", default)]
    root_element: Vec<String>,
}

pub(super) fn read(body: &[u8]) -> Result<(String, Vec<Entry>), DocumentError> {
    let document: Document = serde_json::from_slice(body).map_err(|e| {
        DocumentError::NotJson(assetscan_domain::text::truncate_chars(&e.to_string(), 160))
    })?;
    match (
        &document.bom_format,
        &document.spdx_version,
        &document.context,
    ) {
        (Some(format), None, None) if format == "CycloneDX" => cyclonedx(document),
        (None, Some(version), None) => {
            spdx2_version(version)?;
            let format = format!("{version} JSON");
            Ok((format, spdx2(document)))
        }
        (None, None, Some(context)) if is_spdx3(context) => Ok(spdx3(document)),
        (None, None, Some(context)) => Err(DocumentError::SpdxVersion(super::bounded(
            &context.to_string(),
        ))),
        _ => Err(DocumentError::UnknownFormat),
    }
}

fn cyclonedx(document: Document) -> Result<(String, Vec<Entry>), DocumentError> {
    let version = document.spec_version.unwrap_or_default();
    cyclonedx_version(&version)?;
    let mut entries = Vec::new();
    if let Some(subject) = document.metadata.and_then(|m| m.component) {
        entries.push(Entry {
            subject: true,
            ..entry(&subject)
        });
    }
    flatten(document.components, &mut entries, 0)?;
    Ok((format!("CycloneDX {version} JSON"), entries))
}

/// Every component, depth first (CycloneDX nests components).
fn flatten(
    components: Vec<Component>,
    entries: &mut Vec<Entry>,
    depth: usize,
) -> Result<(), DocumentError> {
    if depth > MAX_DEPTH {
        return Err(DocumentError::TooDeep);
    }
    for component in components {
        entries.push(entry(&component));
        flatten(component.components, entries, depth + 1)?;
    }
    Ok(())
}

fn entry(component: &Component) -> Entry {
    let property = |name: &str| {
        (component.properties.iter())
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| p.value.clone())
            .filter(|v| !v.is_empty())
    };
    Entry {
        purl: component.purl.clone().filter(|p| !p.is_empty()),
        name: component.name.clone(),
        source: trivy_source(property),
        subject: false,
    }
}

/// The source package Trivy states in properties instead of `upstream`:
/// `aquasecurity:trivy:SrcName`, and its version as `SrcEpoch`,
/// `SrcVersion` and `SrcRelease` (an RPM's), which make the version as
/// the distribution writes it.
pub(super) fn trivy_source(property: impl Fn(&str) -> Option<String>) -> Option<SourceHint> {
    let name = property("aquasecurity:trivy:SrcName")?;
    let version = property("aquasecurity:trivy:SrcVersion").map(|version| {
        let epoch = property("aquasecurity:trivy:SrcEpoch").filter(|e| e != "0");
        let release = property("aquasecurity:trivy:SrcRelease");
        let mut full = epoch.map(|e| format!("{e}:")).unwrap_or_default();
        full.push_str(&version);
        if let Some(release) = release {
            full.push('-');
            full.push_str(&release);
        }
        full
    });
    Some(SourceHint { name, version })
}

/// SPDX 2: each package's `purl` external reference (`PACKAGE-MANAGER` in
/// 2.3, `PACKAGE_MANAGER` in 2.2: the type alone decides); the packages the
/// document describes are its subjects.
fn spdx2(document: Document) -> Vec<Entry> {
    let mut described: BTreeSet<String> = document.document_describes.into_iter().collect();
    described.extend(
        (document.relationships.into_iter())
            .filter(|r| r.spdx_element_id == "SPDXRef-DOCUMENT")
            .filter(|r| r.relationship_type == "DESCRIBES")
            .map(|r| r.related_spdx_element),
    );
    document
        .packages
        .into_iter()
        .map(|package| Entry {
            purl: (package.external_refs.into_iter())
                .find(|r| r.reference_type == "purl" && !r.reference_locator.is_empty())
                .map(|r| r.reference_locator),
            subject: described.contains(&package.id),
            name: package.name,
            source: None,
        })
        .collect()
}

fn is_spdx3(context: &serde_json::Value) -> bool {
    let names_spdx3 = |v: &serde_json::Value| {
        v.as_str()
            .is_some_and(|s| s.starts_with("https://spdx.org/rdf/3."))
    };
    match context {
        serde_json::Value::Array(items) => items.iter().any(names_spdx3),
        other => names_spdx3(other),
    }
}

/// SPDX 3: the `software_Package` elements of the graph, by
/// `software_packageUrl`; the root elements of its SBOMs are the subjects.
fn spdx3(document: Document) -> (String, Vec<Entry>) {
    let roots: BTreeSet<String> = (document.graph.iter())
        .filter(|e| matches!(e.kind.as_str(), "SpdxDocument" | "software_Sbom"))
        .flat_map(|e| e.root_element.iter().cloned())
        .collect();
    let entries = document
        .graph
        .into_iter()
        .filter(|e| e.kind == "software_Package")
        .map(|e| Entry {
            purl: e.package_url.filter(|p| !p.is_empty()),
            subject: roots.contains(&e.id),
            name: e.name,
            source: None,
        })
        .collect();
    ("SPDX 3.0 JSON-LD".to_owned(), entries)
}
