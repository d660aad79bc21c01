//! A package to look up, in one of the two forms vulnerability databases
//! understand. The form is a type, not four optional fields: code holding a
//! [`Package`] never asks "purl or coordinates, or both?", and a value that
//! exists has passed the checks.

use crate::text::truncate_chars;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Longest piece of input quoted in an error.
const QUOTED_CHARS: usize = 64;

/// A package URL, or OSV coordinates.
///
/// On the wire (the `scan --software` file, the generic vulnerability
/// endpoint's request) it is `{purl}` or `{name, ecosystem, version}`, as in
/// an AssetScan's `spec.software`; anything else is refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Wire", into = "Wire")]
pub enum Package {
    /// e.g. `pkg:npm/lodash@4.17.20`.
    Purl(Purl),
    /// e.g. `Debian:12` / `openssl` / `3.0.11-1`.
    Coordinates(Coordinates),
}

/// A package URL: `pkg:<type>/<rest>`, the type a letter followed by
/// letters, digits, `.`, `+` or `-`, the rest without whitespace (the same
/// shape the resource's schema demands).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purl(String);

/// A package in OSV terms: ecosystem, name and installed version, none blank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinates {
    ecosystem: String,
    name: String,
    version: String,
}

/// Why a package was refused. Quotes at most 64 characters of the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageError {
    #[error("{0:?} is not a package URL (pkg:<type>/<name>…)")]
    NotAPurl(String),
    #[error("`{0}` is blank")]
    Blank(&'static str),
    /// Neither or both forms, or a form with a key missing.
    #[error("give either `purl`, or `name`, `ecosystem` and `version`")]
    Form,
}

impl Purl {
    pub fn parse(text: &str) -> Result<Purl, PackageError> {
        let refused = || PackageError::NotAPurl(truncate_chars(text, QUOTED_CHARS));
        let (kind, rest) = text
            .strip_prefix("pkg:")
            .and_then(|body| body.split_once('/'))
            .ok_or_else(refused)?;
        let mut kind_chars = kind.chars();
        let kind_ok = kind_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && kind_chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'));
        let rest_ok = !rest.is_empty() && !rest.chars().any(char::is_whitespace);
        if kind_ok && rest_ok {
            Ok(Purl(text.to_owned()))
        } else {
            Err(refused())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Coordinates {
    pub fn new(ecosystem: &str, name: &str, version: &str) -> Result<Coordinates, PackageError> {
        let filled = |value: &str, field| {
            if value.trim().is_empty() {
                Err(PackageError::Blank(field))
            } else {
                Ok(value.to_owned())
            }
        };
        Ok(Coordinates {
            ecosystem: filled(ecosystem, "ecosystem")?,
            name: filled(name, "name")?,
            version: filled(version, "version")?,
        })
    }

    pub fn ecosystem(&self) -> &str {
        &self.ecosystem
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn version(&self) -> &str {
        &self.version
    }
}

impl Package {
    pub fn purl(text: &str) -> Result<Package, PackageError> {
        Purl::parse(text).map(Package::Purl)
    }

    pub fn coordinates(
        ecosystem: &str,
        name: &str,
        version: &str,
    ) -> Result<Package, PackageError> {
        Coordinates::new(ecosystem, name, version).map(Package::Coordinates)
    }
}

/// How findings name the package: `PyPI/jinja2@3.1.4`, or the purl.
impl fmt::Display for Package {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Package::Purl(purl) => f.write_str(purl.as_str()),
            Package::Coordinates(c) => c.fmt(f),
        }
    }
}

/// `Debian:9/openssl@1.1.0l-1~deb9u1`.
impl fmt::Display for Coordinates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.ecosystem, self.name, self.version)
    }
}

/// The wire shape. Untagged with unknown keys refused, so a mix of the two
/// forms, or a form with a key missing, matches neither.
#[derive(Serialize, Deserialize)]
#[serde(
    untagged,
    deny_unknown_fields,
    expecting = "a package: {purl}, or {name, ecosystem, version}"
)]
enum Wire {
    Purl {
        purl: String,
    },
    Coordinates {
        name: String,
        ecosystem: String,
        version: String,
    },
}

impl TryFrom<Wire> for Package {
    type Error = PackageError;

    fn try_from(wire: Wire) -> Result<Package, PackageError> {
        match wire {
            Wire::Purl { purl } => Package::purl(&purl),
            Wire::Coordinates {
                name,
                ecosystem,
                version,
            } => Package::coordinates(&ecosystem, &name, &version),
        }
    }
}

impl From<Package> for Wire {
    fn from(package: Package) -> Wire {
        match package {
            Package::Purl(Purl(purl)) => Wire::Purl { purl },
            Package::Coordinates(Coordinates {
                ecosystem,
                name,
                version,
            }) => Wire::Coordinates {
                name,
                ecosystem,
                version,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn purls_have_the_schema_shape() {
        for good in [
            "pkg:pypi/jinja2@3.1.4",
            "pkg:npm/%40babel/core@7.0.0",
            "pkg:deb/debian/openssl@3.0.11-1?arch=amd64",
            "pkg:c++/x",
        ] {
            assert!(Purl::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "jinja2",
            "pkg:",
            "pkg:pypi",
            "pkg:pypi/",
            "pkg:1x/y",
            "pkg:pypi/a b",
        ] {
            assert!(
                matches!(Purl::parse(bad), Err(PackageError::NotAPurl(_))),
                "{bad}"
            );
        }
        let long = format!("x{}", "y".repeat(10_000));
        assert!(Purl::parse(&long).unwrap_err().to_string().len() < 200);
    }

    #[test]
    fn coordinates_are_never_blank() {
        assert!(Package::coordinates("PyPI", "jinja2", "3.1.4").is_ok());
        assert_eq!(
            Package::coordinates("PyPI", " ", "3.1.4"),
            Err(PackageError::Blank("name"))
        );
        assert_eq!(
            Package::coordinates("PyPI", "jinja2", ""),
            Err(PackageError::Blank("version"))
        );
    }

    #[test]
    fn the_wire_takes_exactly_one_form() {
        let purl: Package =
            serde_json::from_value(json!({"purl": "pkg:pypi/jinja2@3.1.4"})).unwrap();
        assert_eq!(purl.to_string(), "pkg:pypi/jinja2@3.1.4");
        let named: Package = serde_json::from_value(
            json!({"name": "jinja2", "ecosystem": "PyPI", "version": "3.1.4"}),
        )
        .unwrap();
        assert_eq!(named.to_string(), "PyPI/jinja2@3.1.4");
        for bad in [
            json!({"purl": "pkg:pypi/jinja2", "version": "3.1.4"}),
            json!({"purl": "pkg:pypi/jinja2@3.1.4", "name": "jinja2"}),
            json!({"name": "jinja2", "ecosystem": "PyPI"}),
            json!({"name": "jinja2", "ecosystem": "PyPI", "version": "1", "extra": 1}),
            json!({}),
            json!({"purl": "jinja2"}),
            json!({"name": "", "ecosystem": "PyPI", "version": "1"}),
        ] {
            assert!(
                serde_json::from_value::<Package>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_wire_writes_what_it_reads() {
        for wire in [
            json!({"purl": "pkg:pypi/jinja2@3.1.4"}),
            json!({"name": "jinja2", "ecosystem": "PyPI", "version": "3.1.4"}),
        ] {
            let package: Package = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(serde_json::to_value(&package).unwrap(), wire);
        }
    }
}
