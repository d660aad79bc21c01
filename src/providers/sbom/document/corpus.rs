//! The corpus of public SBOMs (`testkit/fixtures/sbom`, with where each
//! came from): every entry of each document listed, and asked about under
//! its advisory coordinates or counted with why not. The expected counts
//! come from the documents' own purls (by type and `distro` qualifier, as
//! testkit/fixtures/README.md tallies them) and the ecosystems' rules
//! (docs/sbom.md), not from this reader's output.

use super::read;
use assetscan_domain::NotAsked::{self, *};
use std::path::PathBuf;

fn corpus(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testkit/fixtures/sbom")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (document, format, listed, asked, not asked by reason)
type Expected = (
    &'static str,
    &'static str,
    u32,
    u32,
    &'static [(NotAsked, u32)],
);

const CORPUS: &[Expected] = &[
    // Syft 0.73, Debian 9: 132 deb (distro=debian-9), 3 golang, 1 generic, 1 without a purl.
    (
        "osv-scanner-postgres-stretch.cdx-1.4.xml",
        "CycloneDX 1.4 XML",
        137,
        135,
        &[(NoPurl, 1), (NoAdvisorySource, 1)],
    ),
    // Syft 0.73, Alpine 3.17: 14 apk, 2 without a purl.
    (
        "osv-scanner-alpine-3.17.cdx-1.4.xml",
        "CycloneDX 1.4 XML",
        16,
        14,
        &[(NoPurl, 2)],
    ),
    // CycloneDX Maven plugin: 167 maven, and the subject, a Maven artifact.
    (
        "bom-examples-dropwizard-1.3.15.cdx-1.2.xml",
        "CycloneDX 1.2 XML",
        168,
        168,
        &[],
    ),
    // CycloneDX Node.js module: 883 npm (137 scoped), and the subject, an npm package.
    (
        "bom-examples-protonmail-webclient.cdx-1.2.json",
        "CycloneDX 1.2 JSON",
        884,
        884,
        &[],
    ),
    // Syft, Ubuntu 22.04: 101 deb, 1 without a purl.
    (
        "bomber-ubuntu-22.04.cdx-1.4.json",
        "CycloneDX 1.4 JSON",
        102,
        101,
        &[(NoPurl, 1)],
    ),
    // Syft 1.6, RHEL 9.2: 159 rpm/redhat (a product stream no purl names),
    // 23 npm, 9 pypi, 1 without a purl.
    (
        "sbomer-rhel-9.2-image.cdx-1.5.json",
        "CycloneDX 1.5 JSON",
        192,
        32,
        &[(NoPurl, 1), (UnknownRelease, 159)],
    ),
    // Trivy, Debian 10: 105 deb, 55 gem, 1 without a purl.
    (
        "trivy-fluentd-debian-10-gems.cdx-1.7.json",
        "CycloneDX 1.7 JSON",
        161,
        160,
        &[(NoPurl, 1)],
    ),
    // Trivy, CentOS 7: 2 rpm/centos (no OSV advisories), 1 without a purl;
    // the subject, the image without a purl, is not listed.
    (
        "trivy-centos-7.spdx-2.2.spdx",
        "SPDX-2.2 tag-value",
        3,
        0,
        &[(NoPurl, 1), (UnknownDistribution, 2)],
    ),
    // Syft: 1 apk (alpine-3.12.5), 3 maven.
    (
        "syft-alpine-maven.spdx-2.3.spdx",
        "SPDX-2.3 tag-value",
        4,
        4,
        &[],
    ),
    // sigs.k8s.io/bom: the subject, a deb without a distro, and 3 cargo.
    (
        "spdx-example11.spdx-3.0.1.json",
        "SPDX 3.0 JSON-LD",
        4,
        3,
        &[(UnknownRelease, 1)],
    ),
    (
        "k8s-bom-example11.spdx-2.3.json",
        "SPDX-2.3 JSON",
        4,
        3,
        &[(UnknownRelease, 1)],
    ),
    // Trivy: 4 bitnami.
    (
        "trivy-bitnami-postgresql.spdx-2.3.json",
        "SPDX-2.3 JSON",
        4,
        4,
        &[],
    ),
    // Syft 0.58: 85 golang, 3 deb (debian-11).
    (
        "guac-kubectl-go-binaries.spdx-2.2.json",
        "SPDX-2.2 JSON",
        88,
        88,
        &[],
    ),
];

#[test]
fn every_entry_of_the_corpus_is_asked_or_counted_with_its_reason() {
    let mut failures = Vec::new();
    for (name, format, listed, asked, not_asked) in CORPUS {
        let contents = read(&corpus(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let c = &contents.coverage;
        let reasons: Vec<(NotAsked, u32)> = c.not_asked.iter().map(|(r, n)| (*r, *n)).collect();
        let mut expected: Vec<(NotAsked, u32)> = not_asked.to_vec();
        expected.sort();
        if (contents.format.as_str(), c.listed, c.asked, &reasons)
            != (*format, *listed, *asked, &expected)
        {
            failures.push(format!(
                "{name}: {} {}/{} {reasons:?}, expected {format} {asked}/{listed} {expected:?}",
                contents.format, c.asked, c.listed
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_debian_image_is_asked_about_under_its_source_packages() {
    let contents = read(&corpus("osv-scanner-postgres-stretch.cdx-1.4.xml")).unwrap();
    let asked: Vec<String> = contents.packages.iter().map(|p| p.to_string()).collect();
    // The binaries the advisories never name, by their sources (Debian's
    // Source: field, which Syft writes as `upstream`).
    for (binary, source) in [
        ("libssl1.1", "openssl"),
        ("bsdutils", "util-linux"),
        ("libc6", "glibc"),
        ("e2fslibs", "e2fsprogs"),
        ("dirmngr", "gnupg2"),
    ] {
        assert!(
            asked
                .iter()
                .any(|a| a.starts_with(&format!("Debian:9/{source}@"))),
            "{binary} is not asked as {source}"
        );
        assert!(
            !asked
                .iter()
                .any(|a| a.starts_with(&format!("Debian:9/{binary}@"))),
            "{binary} is asked under its own name"
        );
    }
}

#[test]
fn go_module_paths_and_npm_scopes_keep_their_spelling() {
    let protonmail = read(&corpus("bom-examples-protonmail-webclient.cdx-1.2.json")).unwrap();
    let scoped = protonmail
        .packages
        .iter()
        .filter(|p| p.to_string().starts_with("npm/@"))
        .count();
    assert!(scoped > 0, "no scoped npm name asked");
    let kubectl = read(&corpus("guac-kubectl-go-binaries.spdx-2.2.json")).unwrap();
    let upper = kubectl
        .packages
        .iter()
        .filter(|p| {
            p.to_string().starts_with("Go/")
                && p.to_string().chars().any(|c| c.is_ascii_uppercase())
        })
        .count();
    assert!(upper > 0, "every Go module path was lowercased");
}
