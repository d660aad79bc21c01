//! An SBOM's purls as packages in OSV terms: the purl's type decides the
//! ecosystem, its namespace and name the package's name as that ecosystem
//! spells it, and, for distribution packages, its `distro` qualifier the
//! release (`pkg:deb/debian/openssl@3.0.11-1?distro=debian-12` is
//! `Debian:12` / `openssl` / `3.0.11-1`). A purl of another type, or
//! without a version, names nothing a vulnerability database can be asked
//! about: it is skipped, and counted by the caller.

use crate::package::Package;
use packageurl::PackageUrl;
use std::str::FromStr;

/// The purl types read, and their OSV ecosystem.
const ECOSYSTEMS: &[(&str, &str)] = &[
    ("npm", "npm"),
    ("pypi", "PyPI"),
    ("maven", "Maven"),
    ("golang", "Go"),
    ("cargo", "crates.io"),
    ("gem", "RubyGems"),
    ("nuget", "NuGet"),
    ("composer", "Packagist"),
    ("hex", "Hex"),
    ("pub", "Pub"),
    ("hackage", "Hackage"),
    ("cran", "CRAN"),
    ("deb", "Debian"),
    ("apk", "Alpine"),
];

/// The package `text` names, or `None` when it is not a purl, has no
/// version, or is of a type (or distribution) without an ecosystem here.
pub fn package_of_purl(text: &str) -> Option<Package> {
    let purl = PackageUrl::from_str(text).ok()?;
    let version = purl.version().filter(|v| !v.is_empty())?;
    let ecosystem = ecosystem(&purl)?;
    let name = match (purl.ty(), purl.namespace()) {
        ("maven", Some(group)) => format!("{group}:{}", purl.name()),
        ("npm" | "golang" | "composer", Some(namespace)) => {
            format!("{namespace}/{}", purl.name())
        }
        _ => purl.name().to_owned(),
    };
    Package::coordinates(&ecosystem, &name, version).ok()
}

/// The OSV ecosystem of `purl`: by type, with the release of a Debian or
/// Alpine package from its `distro` qualifier (`debian-12`, `alpine-3.19.1`)
/// when given.
fn ecosystem(purl: &PackageUrl<'_>) -> Option<String> {
    let (_, base) = ECOSYSTEMS.iter().find(|(ty, _)| *ty == purl.ty())?;
    let distro = purl.qualifiers().get("distro").map(|d| d.as_ref());
    match (purl.ty(), purl.namespace()) {
        ("deb", Some("debian")) => Some(match distro.and_then(|d| d.strip_prefix("debian-")) {
            Some(release) => format!("Debian:{}", major(release)),
            None => (*base).to_owned(),
        }),
        ("apk", Some("alpine")) => Some(match distro.and_then(|d| d.strip_prefix("alpine-")) {
            Some(release) => format!("Alpine:v{}", minor(release)),
            None => (*base).to_owned(),
        }),
        ("deb" | "apk", _) => None,
        _ => Some((*base).to_owned()),
    }
}

/// `12` of `12.4`.
fn major(release: &str) -> &str {
    release.split('.').next().unwrap_or(release)
}

/// `3.19` of `3.19.1`.
fn minor(release: &str) -> String {
    release.split('.').take(2).collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> Option<String> {
        package_of_purl(text).map(|p| p.to_string())
    }

    #[test]
    fn purl_types_map_to_ecosystems() {
        for (purl, expected) in [
            ("pkg:npm/lodash@4.17.20", "npm/lodash@4.17.20"),
            ("pkg:npm/%40babel/core@7.0.0", "npm/@babel/core@7.0.0"),
            ("pkg:pypi/jinja2@3.1.4", "PyPI/jinja2@3.1.4"),
            (
                "pkg:maven/io.netty/netty-codec@4.1.73.Final?type=jar",
                "Maven/io.netty:netty-codec@4.1.73.Final",
            ),
            (
                "pkg:golang/github.com/wagoodman/go-partybus@v0.0.0-2023",
                "Go/github.com/wagoodman/go-partybus@v0.0.0-2023",
            ),
            ("pkg:cargo/tokio@1.19.2", "crates.io/tokio@1.19.2"),
            (
                "pkg:composer/laravel/framework@7.12.0",
                "Packagist/laravel/framework@7.12.0",
            ),
            (
                "pkg:deb/debian/libc6@2.36-9+deb12u4?arch=amd64&distro=debian-12",
                "Debian:12/libc6@2.36-9+deb12u4",
            ),
            (
                "pkg:deb/debian/libselinux1-dev@3.1-3?arch=s390x",
                "Debian/libselinux1-dev@3.1-3",
            ),
            (
                "pkg:apk/alpine/musl@1.2.4-r2?arch=x86_64&distro=alpine-3.19.1",
                "Alpine:v3.19/musl@1.2.4-r2",
            ),
        ] {
            assert_eq!(named(purl).as_deref(), Some(expected), "{purl}");
        }
    }

    #[test]
    fn what_no_database_knows_is_skipped() {
        for purl in [
            "pkg:npm/lodash",
            "pkg:oci/web@sha256%3Aabc",
            "pkg:rpm/fedora/curl@7.50.3-1.fc25",
            "pkg:deb/ubuntu/libc6@2.35",
            "pkg:generic/openssl@3.0",
            "not a purl",
            "pkg:",
        ] {
            assert_eq!(named(purl), None, "{purl}");
        }
    }
}
