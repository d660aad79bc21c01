//! What a run asked about, as a result: of the packages listed (an
//! AssetScan's `spec.software`, or its SBOM's components), how many were
//! asked about under their advisory coordinates, and why the others were
//! not. A run that asked about nothing, or less than the policy's
//! `minCoverage`, is never reported as clean.

use crate::advisory::{NotAsked, SourceHint, coordinates_of_parts, kind_of};
use crate::package::{Coordinates, Package};
use crate::purl::PurlParts;
use crate::text::truncate_chars;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Entries not asked that a run records by name, for the report.
pub const MAX_NOT_ASKED_LISTED: usize = 20;
/// Kinds of package counted apart; the rest are `other`.
const MAX_KINDS: usize = 16;
/// Longest purl quoted in [`Coverage::not_asked_listed`].
const QUOTED_CHARS: usize = 120;

/// A run's coverage, recorded in its `vulnerabilities` fact. Fields may be
/// added, none removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Coverage {
    /// Entries listed.
    pub listed: u32,
    /// Entries asked about (an entry listed twice is counted twice, and
    /// asked once).
    pub asked: u32,
    /// Asked, by ecosystem without its release (`Debian`, `npm`).
    #[serde(default)]
    pub asked_by_ecosystem: BTreeMap<String, u32>,
    /// Not asked, by reason.
    #[serde(default)]
    pub not_asked: BTreeMap<NotAsked, u32>,
    /// Not asked, by kind of package: the purl type, and for distribution
    /// packages the distribution (`rpm/amzn`); `none` without a purl.
    #[serde(default)]
    pub not_asked_by_kind: BTreeMap<String, u32>,
    /// The first entries not asked, with why.
    #[serde(default)]
    pub not_asked_listed: Vec<NotAskedEntry>,
    /// The policy's `minCoverage` the run was judged by, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<u8>,
}

/// One entry not asked about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotAskedEntry {
    /// The purl (bounded), or the entry's name when it has none.
    pub package: String,
    pub reason: NotAsked,
}

impl Coverage {
    /// Whole percent asked of listed, rounded down (a run that asked 99.9 %
    /// has not asked about everything); 0 when nothing was listed.
    pub fn percent(&self) -> u8 {
        match self.listed {
            0 => 0,
            listed => {
                let percent = u64::from(self.asked.min(listed)) * 100 / u64::from(listed);
                u8::try_from(percent).unwrap_or(100)
            }
        }
    }

    /// Too little to call the asset clean: nothing asked about, or less than
    /// the minimum the run was judged by.
    pub fn is_low(&self) -> bool {
        self.asked == 0 || self.minimum.is_some_and(|minimum| self.percent() < minimum)
    }

    /// Not asked, in all.
    pub fn not_asked_total(&self) -> u32 {
        self.listed.saturating_sub(self.asked)
    }

    /// `"73% (97/132)"`: what `kubectl get` shows.
    pub fn summary(&self) -> String {
        format!("{}% ({}/{})", self.percent(), self.asked, self.listed)
    }
}

/// The packages of a run, as they are listed: each entry is mapped to its
/// coordinates or counted as not asked. The distinct coordinates are what
/// the run asks about.
#[derive(Debug, Default)]
pub struct Inventory {
    distinct: BTreeMap<(String, String, String), Coordinates>,
    coverage: Coverage,
    origins: Origins,
}

/// What a run asks about: the distinct coordinates, the coverage of the
/// entries listed, and which listed purls each coordinates stand for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    pub packages: Vec<Coordinates>,
    pub coverage: Coverage,
    pub origins: Origins,
}

impl Inventory {
    pub fn new() -> Inventory {
        Inventory::default()
    }

    /// The inventory of a list of packages (`spec.software`, `--purl`).
    pub fn of_packages(packages: &[Package]) -> Inventory {
        let mut inventory = Inventory::new();
        for package in packages {
            match package {
                Package::Purl(purl) => inventory.add_purl(purl.as_str(), None),
                Package::Coordinates(c) => {
                    inventory.add(Ok(c.clone()), &package.to_string(), String::new)
                }
            }
        }
        inventory
    }

    /// An SBOM entry: its purl, if it has one (`name` says which entry it
    /// is when it has not), and its source as the document states it.
    pub fn add_entry(&mut self, purl: Option<&str>, name: &str, hint: Option<&SourceHint>) {
        match purl {
            Some(purl) => self.add_purl(purl, hint),
            None => self.add(Err(NotAsked::NoPurl), name, || "none".to_owned()),
        }
    }

    /// What an SBOM says it is about (CycloneDX's `metadata.component`, the
    /// packages an SPDX document describes): listed when its purl names a
    /// package of an ecosystem, and otherwise not, as an image or a
    /// directory is the subject of the scan, not a package of it.
    pub fn add_subject(&mut self, purl: Option<&str>, hint: Option<&SourceHint>) {
        let Some(parts) = purl.and_then(|p| PurlParts::parse(p).ok()) else {
            return;
        };
        let mapped = coordinates_of_parts(&parts, hint);
        if !matches!(mapped, Err(NotAsked::NoAdvisorySource)) {
            self.add_parsed(purl.unwrap_or_default(), &parts, mapped);
        }
    }

    /// A purl, taken apart once for its coordinates, its origin and its kind.
    fn add_purl(&mut self, purl: &str, hint: Option<&SourceHint>) {
        match PurlParts::parse(purl) {
            Ok(parts) => {
                let mapped = coordinates_of_parts(&parts, hint);
                self.add_parsed(purl, &parts, mapped);
            }
            Err(_) => self.add(Err(NotAsked::NotAPurl), purl, || "other".to_owned()),
        }
    }

    fn add_parsed(&mut self, purl: &str, parts: &PurlParts, mapped: Result<Coordinates, NotAsked>) {
        if let Ok(coordinates) = &mapped {
            self.origins.add(parts, coordinates);
        }
        self.add(mapped, purl, || kind_of(parts));
    }

    fn add(
        &mut self,
        mapped: Result<Coordinates, NotAsked>,
        shown: &str,
        kind: impl FnOnce() -> String,
    ) {
        let coverage = &mut self.coverage;
        coverage.listed = coverage.listed.saturating_add(1);
        match mapped {
            Ok(coordinates) => {
                coverage.asked = coverage.asked.saturating_add(1);
                let base = base_ecosystem(coordinates.ecosystem()).to_owned();
                *coverage.asked_by_ecosystem.entry(base).or_default() += 1;
                let key = (
                    coordinates.ecosystem().to_owned(),
                    coordinates.name().to_owned(),
                    coordinates.version().to_owned(),
                );
                self.distinct.entry(key).or_insert(coordinates);
            }
            Err(reason) => {
                *coverage.not_asked.entry(reason).or_default() += 1;
                let kind = kind();
                let kind = if coverage.not_asked_by_kind.len() < MAX_KINDS
                    || coverage.not_asked_by_kind.contains_key(&kind)
                {
                    kind
                } else {
                    "other".to_owned()
                };
                *coverage.not_asked_by_kind.entry(kind).or_default() += 1;
                if coverage.not_asked_listed.len() < MAX_NOT_ASKED_LISTED {
                    coverage.not_asked_listed.push(NotAskedEntry {
                        package: truncate_chars(shown, QUOTED_CHARS),
                        reason,
                    });
                }
            }
        }
    }

    /// What to ask about. The coverage's minimum is the run's policy's, set
    /// by the run.
    pub fn finish(self) -> Asked {
        Asked {
            packages: self.distinct.into_values().collect(),
            coverage: self.coverage,
            origins: self.origins,
        }
    }
}

/// The binary packages listed, by identity, and the coordinates each was
/// asked under: a statement naming `libssl3` covers the findings of
/// `openssl`, the source it was asked as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origins {
    by_identity: BTreeMap<Identity, BTreeSet<(Option<String>, String)>>,
}

/// A purl's type, namespace (lowercase) and name: a package whatever its
/// version and qualifiers.
type Identity = (String, String, String);

impl Origins {
    /// Records that the purl `listed` was asked as `coordinates`.
    fn add(&mut self, listed: &PurlParts, coordinates: &Coordinates) {
        self.by_identity
            .entry(identity(listed))
            .or_default()
            .insert((listed.version.clone(), coordinates.to_string()));
    }

    /// The coordinates (as findings name them) that the listed packages of
    /// `purl`'s identity were asked as, each with that package's version.
    pub fn asked_as(&self, purl: &PurlParts) -> impl Iterator<Item = (Option<&str>, &str)> {
        (self.by_identity.get(&identity(purl)).into_iter())
            .flatten()
            .map(|(version, asked)| (version.as_deref(), asked.as_str()))
    }
}

fn identity(purl: &PurlParts) -> Identity {
    (
        purl.ty.clone(),
        purl.namespace.to_ascii_lowercase(),
        purl.name.clone(),
    )
}

/// `Debian` of `Debian:12`, `Ubuntu` of `Ubuntu:22.04:LTS`.
pub fn base_ecosystem(ecosystem: &str) -> &str {
    ecosystem.split(':').next().unwrap_or(ecosystem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_asked_or_counted_with_its_reason() {
        let mut inventory = Inventory::new();
        inventory.add_entry(Some("pkg:npm/a@1.0.0"), "a", None);
        inventory.add_entry(Some("pkg:npm/a@1.0.0"), "a again", None);
        inventory.add_entry(Some("pkg:oci/web@sha256%3Aab"), "web", None);
        inventory.add_entry(Some("pkg:rpm/amzn/curl@8.0?distro=amzn-2023"), "curl", None);
        inventory.add_entry(None, "no-purl", None);
        let Asked {
            packages: asked,
            mut coverage,
            ..
        } = inventory.finish();
        coverage.minimum = Some(50);
        assert_eq!(asked.len(), 1);
        assert_eq!(
            (coverage.listed, coverage.asked, coverage.not_asked_total()),
            (5, 2, 3)
        );
        assert_eq!(coverage.percent(), 40);
        assert!(coverage.is_low());
        assert_eq!(coverage.summary(), "40% (2/5)");
        let reasons: Vec<_> = coverage.not_asked.keys().copied().collect();
        assert_eq!(
            reasons,
            [
                NotAsked::NoPurl,
                NotAsked::NoAdvisorySource,
                NotAsked::UnknownDistribution
            ]
        );
        let kinds: Vec<_> = coverage
            .not_asked_by_kind
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(kinds, ["none", "oci", "rpm/amzn"]);
        assert_eq!(coverage.not_asked_listed[2].package, "no-purl");
    }

    #[test]
    fn nothing_asked_is_low_whatever_the_minimum() {
        let none = Inventory::new().finish().coverage;
        assert!(none.is_low());
        let mut all = Inventory::new();
        all.add_entry(Some("pkg:cargo/tokio@1.0.0"), "tokio", None);
        let mut all = all.finish().coverage;
        all.minimum = Some(100);
        assert!(!all.is_low());
        assert_eq!(all.percent(), 100);
    }

    #[test]
    fn the_percent_rounds_down() {
        let coverage = Coverage {
            listed: 1000,
            asked: 999,
            minimum: Some(100),
            ..Coverage::default()
        };
        assert_eq!(coverage.percent(), 99);
        assert!(coverage.is_low());
    }
}
