//! One mapping from a package to the coordinates its advisories use
//! (OSV's ecosystem, name and version), for every way a package reaches a
//! run: an AssetScan's `spec.software`, the CLI's `--purl`, an SBOM's
//! components. One package therefore always gets one answer.
//!
//! The rules are the ecosystems' own, as OSV's data and the OSV tools
//! (osv-scanner, osv-scalibr) apply them; docs/sbom.md lists them. A
//! package that cannot be asked about is never dropped: [`NotAsked`] says
//! why, and the run's [`crate::Coverage`] counts it.

mod distro;
mod language;

use crate::package::Coordinates;
use crate::purl::PurlParts;
use serde::{Deserialize, Serialize};

/// Why a listed package was not asked about. Wire names are the status's
/// and the metric's `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NotAsked {
    /// An SBOM entry without a package URL.
    NoPurl,
    /// A package URL that does not parse.
    NotAPurl,
    /// A package URL without a version: no advisory can be matched.
    NoVersion,
    /// A type no advisory database covers (`generic`, `oci`, `file`, …).
    NoAdvisorySource,
    /// A distribution without an advisory database here
    /// (`pkg:rpm/amzn/…`, `pkg:deb/kali/…`).
    UnknownDistribution,
    /// A distribution package without its release, or with one the
    /// advisories do not name (`pkg:deb/debian/…` without `distro`).
    UnknownRelease,
}

impl NotAsked {
    pub const ALL: [NotAsked; 6] = [
        NotAsked::NoPurl,
        NotAsked::NotAPurl,
        NotAsked::NoVersion,
        NotAsked::NoAdvisorySource,
        NotAsked::UnknownDistribution,
        NotAsked::UnknownRelease,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            NotAsked::NoPurl => "noPurl",
            NotAsked::NotAPurl => "notAPurl",
            NotAsked::NoVersion => "noVersion",
            NotAsked::NoAdvisorySource => "noAdvisorySource",
            NotAsked::UnknownDistribution => "unknownDistribution",
            NotAsked::UnknownRelease => "unknownRelease",
        }
    }
}

/// A distribution package's source as a document states it beside the purl
/// when the purl does not (Trivy writes `SrcName`/`SrcVersion` properties
/// instead of the `upstream` qualifier).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceHint {
    pub name: String,
    pub version: Option<String>,
}

/// The coordinates the package URL `text` is asked under, or why it
/// cannot be asked about.
pub fn coordinates_of_purl(text: &str, hint: Option<&SourceHint>) -> Result<Coordinates, NotAsked> {
    let purl = PurlParts::parse(text).map_err(|_| NotAsked::NotAPurl)?;
    coordinates_of_parts(&purl, hint)
}

/// [`coordinates_of_purl`] of a purl already taken apart.
pub fn coordinates_of_parts(
    purl: &PurlParts,
    hint: Option<&SourceHint>,
) -> Result<Coordinates, NotAsked> {
    let version = purl.version.as_deref().ok_or(NotAsked::NoVersion)?;
    let (ecosystem, name, version) = match distro::coordinates(purl, version, hint) {
        Some(found) => found?,
        None => language::coordinates(purl, version).ok_or(NotAsked::NoAdvisorySource)?,
    };
    Coordinates::new(&ecosystem, &name, &version).map_err(|_| NotAsked::NoVersion)
}

/// The kind of package a purl names, for counting what was not asked by
/// kind: the type, and for distribution packages the namespace
/// (`rpm/amzn`). Bounded and plain: anything else is `other`.
pub fn kind_of_purl(text: &str) -> String {
    PurlParts::parse(text).map_or_else(|_| "other".to_owned(), |purl| kind_of(&purl))
}

/// [`kind_of_purl`] of a purl already taken apart.
pub fn kind_of(purl: &PurlParts) -> String {
    const MAX_KIND: usize = 32;
    let kind = match purl.ty.as_str() {
        "deb" | "rpm" | "apk" if !purl.namespace.is_empty() => {
            format!("{}/{}", purl.ty, purl.namespace.to_ascii_lowercase())
        }
        ty => ty.to_owned(),
    };
    let plain = kind
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '.' | '+' | '_'));
    if plain && kind.len() <= MAX_KIND {
        kind
    } else {
        "other".to_owned()
    }
}

/// Whether the package URL `text` names a package, rather than an artifact
/// that holds packages (an image, a file, a generic blob): what a VEX
/// statement's product names, or a FindingException's package.
pub fn names_a_package(text: &str) -> bool {
    PurlParts::parse(text).is_ok_and(|purl| {
        !matches!(
            kind_of(&purl).as_str(),
            "oci" | "docker" | "generic" | "file" | "other"
        )
    })
}

#[cfg(test)]
mod tests;
