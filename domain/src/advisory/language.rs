//! Language ecosystems: the purl type names the ecosystem, and the name is
//! spelled as that ecosystem's advisories spell it. Case is kept wherever
//! the ecosystem keeps it (Go module paths, Maven, NuGet, RubyGems); a name
//! is changed only by the ecosystem's own rule (PyPI's normalisation).

use crate::purl::PurlParts;

/// The purl types of language ecosystems, and their OSV ecosystem.
const LANGUAGES: &[(&str, &str)] = &[
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
    ("swift", "SwiftURL"),
    ("cocoapods", "CocoaPods"),
    ("conan", "ConanCenter"),
    ("github", "GitHub Actions"),
    ("bitnami", "Bitnami"),
    ("julia", "Julia"),
    ("opam", "opam"),
];

/// The ecosystem, name and version `purl` is asked under, when its type is
/// a language ecosystem's.
pub(super) fn coordinates(purl: &PurlParts, version: &str) -> Option<(String, String, String)> {
    let (_, ecosystem) = LANGUAGES.iter().find(|(ty, _)| *ty == purl.ty)?;
    let joined = || match purl.namespace.as_str() {
        "" => purl.name.clone(),
        namespace => format!("{namespace}/{}", purl.name),
    };
    let (name, version) = match purl.ty.as_str() {
        "maven" if !purl.namespace.is_empty() => (
            format!("{}:{}", purl.namespace, purl.name),
            version.to_owned(),
        ),
        "pypi" => (pep503(&purl.name), version.to_owned()),
        "golang" => go(purl, version),
        // A Hex namespace is the package's organisation, not part of its name.
        "hex" | "pub" | "cargo" | "gem" | "nuget" | "hackage" | "cran" | "cocoapods" | "conan"
        | "bitnami" | "julia" | "opam" => (purl.name.clone(), version.to_owned()),
        _ => (joined(), version.to_owned()),
    };
    Some(((*ecosystem).to_owned(), name, version))
}

/// PEP 503: runs of `-`, `_` and `.` are one `-`, and the name is
/// lowercase; PyPI's advisories name packages so.
fn pep503(name: &str) -> String {
    let mut normal = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                normal.push('-');
            }
            in_run = true;
        } else {
            normal.extend(c.to_lowercase());
            in_run = false;
        }
    }
    normal
}

/// A Go module by its path, case kept; the standard library as `stdlib`.
/// Go's advisories give versions without the `v` of a module version or the
/// `go` of a toolchain's (`v1.2.3` and `go1.21.0` are `1.2.3` and `1.21.0`).
fn go(purl: &PurlParts, version: &str) -> (String, String) {
    let bare = version
        .strip_prefix("go")
        .filter(|_| purl.namespace.is_empty() && purl.name == "stdlib")
        .unwrap_or(version);
    let bare = bare.strip_prefix('v').unwrap_or(bare);
    let name = match purl.namespace.as_str() {
        "" => purl.name.clone(),
        namespace => format!("{namespace}/{}", purl.name),
    };
    (name, bare.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pypi_names_are_normalised_as_pep_503_says() {
        // PEP 503's own examples of one project's names.
        for name in [
            "friendly-bard",
            "Friendly-Bard",
            "FRIENDLY-BARD",
            "friendly.bard",
            "friendly_bard",
            "friendly--bard",
            "FrIeNdLy-._.-bArD",
        ] {
            assert_eq!(pep503(name), "friendly-bard", "{name}");
        }
    }
}
