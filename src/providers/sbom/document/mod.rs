//! The packages of an SBOM document, in the formats users' tools write:
//! CycloneDX 1.2 to 1.7 in JSON or XML, SPDX 2.2 and 2.3 in JSON or
//! tag-value, and SPDX 3.0 JSON-LD. Only what names a package is read (a
//! component's or package's purl, its name, the source package a tool
//! states beside the purl); the rest is skipped by the reader without
//! being kept, so memory follows the number of packages, not the
//! document's size.
//!
//! Every entry is listed: the ones that can be asked about under their
//! advisory coordinates ([`assetscan_domain::advisory`]), and the others
//! counted by why not. What a document says it is about (CycloneDX's
//! `metadata.component`, the packages an SPDX document describes) is listed
//! when it names a package of an ecosystem, and otherwise not: an image or a
//! directory is the subject of the scan, not a package of it.
//!
//! The format crates (`cyclonedx-bom`, `spdx-rs`) model and check whole
//! documents, refuse the versions and forms real tools still write (XML
//! before 1.3, SPDX 2.2's `PACKAGE_MANAGER`), and bring dependency trees
//! of 55 and 39 crates; what is needed here is a few fields of each format,
//! read with serde, `quick-xml`'s streaming reader (which expands no
//! external entity), and a line reader for tag-value.

mod json;
mod tag_value;
mod xml;

use assetscan_domain::{Coverage, Inventory, Origins, Package, SourceHint};

/// Deepest nesting read (CycloneDX components in components, XML elements).
pub(super) const MAX_DEPTH: usize = 64;

/// One entry of a document: a component, or an SPDX package.
#[derive(Debug, Default)]
pub(crate) struct Entry {
    pub purl: Option<String>,
    pub name: String,
    /// The source package, when the document states it beside the purl.
    pub source: Option<SourceHint>,
    /// What the document is about, not a package of it.
    pub subject: bool,
}

/// What a document names: its distinct packages to ask about, and the
/// coverage of its entries.
#[derive(Debug)]
pub(crate) struct Contents {
    pub packages: Vec<Package>,
    pub coverage: Coverage,
    /// Which listed purls each package asked stands for.
    pub origins: Origins,
    /// e.g. `CycloneDX 1.4 XML`.
    pub format: String,
}

/// Why a document was refused. Bounded: never quotes the document.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DocumentError {
    #[error("not JSON of the expected shape, or cut short: {0}")]
    NotJson(String),
    #[error("not well-formed XML, or cut short: {0}")]
    NotXml(String),
    #[error("neither a CycloneDX nor an SPDX document (JSON, XML or tag-value)")]
    UnknownFormat,
    #[error("CycloneDX {0:?} is not one of 1.2 to 1.7")]
    CycloneDxVersion(String),
    #[error("{0:?} is not SPDX-2.2, SPDX-2.3 or SPDX 3.0")]
    SpdxVersion(String),
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

impl DocumentError {
    /// What went wrong, without any of the document's text: what a tenant
    /// reads in the status (the whole error goes to the operator's log).
    pub fn summary(&self) -> &'static str {
        match self {
            DocumentError::NotJson(_) => "not JSON of the expected shape, or cut short",
            DocumentError::NotXml(_) => "not well-formed XML, or cut short",
            DocumentError::UnknownFormat => {
                "neither a CycloneDX nor an SPDX document (JSON, XML or tag-value)"
            }
            DocumentError::CycloneDxVersion(_) => "a CycloneDX version other than 1.2 to 1.7",
            DocumentError::SpdxVersion(_) => "an SPDX version other than 2.2, 2.3 or 3.0",
            DocumentError::TooDeep => "nested too deep",
        }
    }
}

/// The CycloneDX versions read: those whose components carry `purl`.
const CYCLONEDX_VERSIONS: &[&str] = &["1.2", "1.3", "1.4", "1.5", "1.6", "1.7"];
const SPDX2_VERSIONS: &[&str] = &["SPDX-2.2", "SPDX-2.3"];

fn cyclonedx_version(version: &str) -> Result<(), DocumentError> {
    if CYCLONEDX_VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(DocumentError::CycloneDxVersion(bounded(version)))
    }
}

fn spdx2_version(version: &str) -> Result<(), DocumentError> {
    if SPDX2_VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(DocumentError::SpdxVersion(bounded(version)))
    }
}

fn bounded(text: &str) -> String {
    assetscan_domain::text::truncate_chars(text, 32)
}

/// The packages `body` names, whichever format it is in.
pub(crate) fn read(body: &[u8]) -> Result<Contents, DocumentError> {
    let body = body.strip_prefix(b"\xef\xbb\xbf").unwrap_or(body);
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let (format, entries) = match first {
        Some(b'{') => json::read(body)?,
        Some(b'<') => xml::read(body)?,
        Some(_) => tag_value::read(body)?,
        None => return Err(DocumentError::UnknownFormat),
    };
    let mut inventory = Inventory::new();
    for entry in &entries {
        let (purl, source) = (entry.purl.as_deref(), entry.source.as_ref());
        match entry.subject {
            true => inventory.add_subject(purl, source),
            false => inventory.add_entry(purl, &entry.name, source),
        }
    }
    let asked = inventory.finish();
    Ok(Contents {
        packages: asked
            .packages
            .into_iter()
            .map(Package::Coordinates)
            .collect(),
        coverage: asked.coverage,
        origins: asked.origins,
        format,
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod corpus;
