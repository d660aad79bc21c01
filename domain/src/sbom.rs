//! Software by reference: an asset's packages named by the place of its
//! SBOM (a source the platform team configured, a reference within it,
//! optionally pinned by digest) instead of listed in the AssetScan, and what
//! a run records of the SBOM it read.

use crate::reference::{self, RefError};
use crate::text::truncate_chars;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The one digest algorithm accepted: `sha256:` and 64 lowercase hex digits.
pub const DIGEST_PATTERN: &str = "^sha256:[a-f0-9]{64}$";

/// Longest piece of input quoted in an error.
const QUOTED_CHARS: usize = 80;

/// Where an asset's SBOM is: a configured source, a reference in it, and
/// the digest it must have, if pinned. A value that exists has passed the
/// checks ([`reference::segments`], [`Digest::parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbomRef {
    source: String,
    path: String,
    digest: Option<Digest>,
}

/// A `sha256:<hex>` digest, lowercase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

/// Why an SBOM reference was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SbomRefError {
    #[error("sbom.source is empty")]
    Source,
    #[error("sbom.ref: {0}")]
    Ref(#[from] RefError),
    #[error("sbom.digest {0:?} is not sha256: and 64 lowercase hex digits")]
    Digest(String),
}

impl Digest {
    pub fn parse(text: &str) -> Result<Digest, SbomRefError> {
        let refused = || SbomRefError::Digest(truncate_chars(text, QUOTED_CHARS));
        let hex = text.strip_prefix("sha256:").ok_or_else(refused)?;
        let hex_ok = hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if hex_ok {
            Ok(Digest(text.to_owned()))
        } else {
            Err(refused())
        }
    }

    /// The digest whose SHA-256 hash is `hash` (computed by the caller:
    /// the domain hashes nothing).
    pub fn from_sha256(hash: [u8; 32]) -> Digest {
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        Digest(format!("sha256:{hex}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Digest {
    type Error = SbomRefError;

    fn try_from(text: String) -> Result<Digest, SbomRefError> {
        Digest::parse(&text)
    }
}

impl From<Digest> for String {
    fn from(digest: Digest) -> String {
        digest.0
    }
}

impl SbomRef {
    pub fn new(source: &str, path: &str, digest: Option<&str>) -> Result<SbomRef, SbomRefError> {
        if source.trim().is_empty() {
            return Err(SbomRefError::Source);
        }
        reference::segments(path)?;
        Ok(SbomRef {
            source: source.to_owned(),
            path: path.to_owned(),
            digest: digest.map(Digest::parse).transpose()?,
        })
    }

    /// The configured source's name.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The reference within the source, `/`-separated.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Its checked segments, to append to the source's base URL one by one.
    pub fn segments(&self) -> Vec<&str> {
        self.path.split('/').collect()
    }

    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }
}

/// Why an SBOM could not be used. Each is a condition reason on the
/// AssetScan (`Sbom` + the variant's name), so a user sees which it was
/// without reading the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SbomProblem {
    /// The AssetScan names a source the operator does not have.
    SourceUnknown,
    /// The source does not have the reference (404, 410).
    NotFound,
    /// Larger than the source's `maxBodyBytes`.
    TooLarge,
    /// Not a CycloneDX 1.2-1.7 (JSON or XML), SPDX 2.2/2.3 (JSON or
    /// tag-value) or SPDX 3.0 document (truncated, another format or
    /// version).
    Malformed,
    /// Its SHA-256 is not the pinned digest.
    DigestMismatch,
    /// The source refused, failed or did not answer in time.
    Unavailable,
}

impl SbomProblem {
    /// The condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            SbomProblem::SourceUnknown => "SbomSourceUnknown",
            SbomProblem::NotFound => "SbomNotFound",
            SbomProblem::TooLarge => "SbomTooLarge",
            SbomProblem::Malformed => "SbomMalformed",
            SbomProblem::DigestMismatch => "SbomDigestMismatch",
            SbomProblem::Unavailable => "SbomUnavailable",
        }
    }
}

/// Which SBOM a run scanned, recorded in its ticket (the `sbom` fact) with
/// the vulnerabilities found in it; or, with `problem`, the SBOM a run could
/// not use. Fields may be added, none removed: an operator of the previous
/// version ignores the whole fact (it does not know its name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbomFacts {
    pub source: String,
    #[serde(rename = "ref")]
    pub reference: String,
    /// The SHA-256 of the document read (the pinned one when it could not
    /// be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// Distinct packages taken from the document's purls.
    #[serde(default)]
    pub packages: u32,
    /// Components or packages without a purl, skipped.
    #[serde(default)]
    pub skipped: u32,
    /// Purls that cannot be asked about (the run's coverage says why),
    /// skipped.
    #[serde(default)]
    pub unsupported: u32,
    /// The document's format, e.g. `CycloneDX 1.4 XML`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Why the SBOM could not be used; absent when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<SbomProblem>,
}

/// An SBOM read: its distinct packages under their advisory coordinates,
/// what the run records of it, and the coverage of its entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbomRead {
    pub packages: Vec<crate::package::Package>,
    pub facts: SbomFacts,
    pub coverage: crate::coverage::Coverage,
    /// Which listed purls each package asked stands for.
    pub origins: crate::coverage::Origins,
}

impl SbomFacts {
    /// The facts of `sbom` before (or without) reading it.
    pub fn of(sbom: &SbomRef) -> SbomFacts {
        SbomFacts {
            source: sbom.source.clone(),
            reference: sbom.path.clone(),
            digest: sbom.digest.clone(),
            packages: 0,
            skipped: 0,
            unsupported: 0,
            format: None,
            problem: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_and_digests_are_checked() {
        let pinned = format!("sha256:{HEX}");
        let hash: Vec<u8> = (0..32u8).map(|i| (i % 16) * 17).collect();
        let computed = Digest::from_sha256(hash.try_into().unwrap());
        assert_eq!(Digest::parse(computed.as_str()), Ok(computed.clone()));
        let sbom = SbomRef::new("artifacts", "images/web/1.cdx.json", Some(&pinned)).unwrap();
        assert_eq!(sbom.segments(), ["images", "web", "1.cdx.json"]);
        assert_eq!(sbom.digest().map(Digest::as_str), Some(pinned.as_str()));
        assert_eq!(SbomRef::new(" ", "a", None), Err(SbomRefError::Source));
        assert!(matches!(
            SbomRef::new("s", "a/../b", None),
            Err(SbomRefError::Ref(RefError::DotSegment(_)))
        ));
        for bad in [
            HEX.to_owned(),
            format!("sha256:{}", HEX.to_uppercase()),
            format!("sha256:{}", &HEX[1..]),
            format!("sha512:{HEX}"),
            format!("sha256:{HEX}0"),
        ] {
            assert!(
                matches!(
                    SbomRef::new("s", "a", Some(&bad)),
                    Err(SbomRefError::Digest(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn facts_write_only_what_they_have() {
        let sbom = SbomRef::new("artifacts", "web.cdx.json", None).unwrap();
        let facts = SbomFacts::of(&sbom);
        let json = serde_json::to_value(&facts).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"source": "artifacts", "ref": "web.cdx.json",
                "packages": 0, "skipped": 0, "unsupported": 0})
        );
        let failed = SbomFacts {
            problem: Some(SbomProblem::DigestMismatch),
            ..facts
        };
        let back: SbomFacts =
            serde_json::from_value(serde_json::to_value(&failed).unwrap()).unwrap();
        assert_eq!(back, failed);
        assert_eq!(
            back.problem.map(SbomProblem::reason),
            Some("SbomDigestMismatch")
        );
    }
}
