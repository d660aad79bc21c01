//! Expected coordinates written from each ecosystem's rule and OSV's names
//! for its ecosystems (docs/sbom.md cites them), never from this code.

use super::*;

fn asked(purl: &str) -> Result<String, NotAsked> {
    coordinates_of_purl(purl, None)
        .map(|c| format!("{}|{}|{}", c.ecosystem(), c.name(), c.version()))
}

#[track_caller]
fn expect(cases: &[(&str, &str)]) {
    for (purl, expected) in cases {
        assert_eq!(asked(purl).as_deref(), Ok(*expected), "{purl}");
    }
}

#[test]
fn debian_and_ubuntu_binaries_are_asked_under_their_source_package() {
    expect(&[
        // osv-scanner's postgres-stretch.cdx.xml (Syft 0.73): the source
        // with its version in `upstream`, percent-encoded.
        (
            "pkg:deb/debian/bsdutils@1:2.29.2-1+deb9u1?arch=amd64&upstream=util-linux%402.29.2-1%2Bdeb9u1&distro=debian-9",
            "Debian:9|util-linux|2.29.2-1+deb9u1",
        ),
        // The source's name alone: dpkg gives no source version when it is
        // the binary's.
        (
            "pkg:deb/debian/libssl1.1@1.1.0l-1~deb9u1?arch=amd64&upstream=openssl&distro=debian-9",
            "Debian:9|openssl|1.1.0l-1~deb9u1",
        ),
        (
            "pkg:deb/debian/libc6@2.36-9+deb12u4?arch=amd64&upstream=glibc&distro=debian-12.4",
            "Debian:12|glibc|2.36-9+deb12u4",
        ),
        // A binary of its own source, and a code name for the release.
        (
            "pkg:deb/debian/bash@5.2.15-2+b2?distro=bookworm",
            "Debian:12|bash|5.2.15-2+b2",
        ),
        (
            "pkg:deb/ubuntu/libssl3@3.0.2-0ubuntu1.15?arch=amd64&upstream=openssl&distro=ubuntu-22.04",
            "Ubuntu:22.04:LTS|openssl|3.0.2-0ubuntu1.15",
        ),
        (
            "pkg:deb/ubuntu/bash@5.2.21-2ubuntu4?distro=noble",
            "Ubuntu:24.04:LTS|bash|5.2.21-2ubuntu4",
        ),
        (
            "pkg:deb/ubuntu/bash@5.2.15-2ubuntu1?distro=ubuntu-23.10",
            "Ubuntu:23.10|bash|5.2.15-2ubuntu1",
        ),
        // osv-scalibr's qualifiers for the source (its own scans' purls).
        (
            "pkg:deb/ubuntu/libpam0g@1.3.1-5ubuntu4.7?arch=amd64&distro=focal&source=pam&sourceversion=1.3.1-5ubuntu4.7",
            "Ubuntu:20.04:LTS|pam|1.3.1-5ubuntu4.7",
        ),
    ]);
}

#[test]
fn a_debian_binary_asked_under_its_own_name_would_miss_its_advisories() {
    // The false negative this mapping exists to prevent: OpenSSL's
    // advisories name `openssl`, never `libssl1.1`.
    let libssl = asked(
        "pkg:deb/debian/libssl1.1@1.1.0l-1~deb9u1?arch=amd64&upstream=openssl&distro=debian-9",
    );
    assert_ne!(libssl.as_deref(), Ok("Debian:9|libssl1.1|1.1.0l-1~deb9u1"));
}

#[test]
fn a_source_stated_beside_the_purl_is_taken_when_the_purl_has_none() {
    let hint = SourceHint {
        name: "openssl".into(),
        version: Some("1.1.1n-0+deb11u3".into()),
    };
    let c = coordinates_of_purl(
        "pkg:deb/debian/libssl1.1@1.1.1n-0+deb11u3?arch=amd64&distro=debian-11.6",
        Some(&hint),
    )
    .unwrap();
    assert_eq!(
        (c.ecosystem(), c.name(), c.version()),
        ("Debian:11", "openssl", "1.1.1n-0+deb11u3")
    );
}

#[test]
fn alpine_wolfi_and_chainguard_are_asked_under_the_origin() {
    expect(&[
        (
            "pkg:apk/alpine/libcrypto3@3.1.4-r5?arch=x86_64&upstream=openssl&distro=alpine-3.19.1",
            "Alpine:v3.19|openssl|3.1.4-r5",
        ),
        (
            "pkg:apk/alpine/musl@1.2.4-r2?arch=x86_64&distro=alpine-3.19.1",
            "Alpine:v3.19|musl|1.2.4-r2",
        ),
        (
            "pkg:apk/wolfi/libcrypto3@3.2.1-r0?arch=x86_64&upstream=openssl&distro=wolfi-20230201",
            "Wolfi|openssl|3.2.1-r0",
        ),
        (
            "pkg:apk/chainguard/glibc@2.38-r9?arch=x86_64",
            "Chainguard|glibc|2.38-r9",
        ),
        (
            "pkg:apk/alpine/zlib@1.3.1-r2?distro=3.22.0&origin=zlib",
            "Alpine:v3.22|zlib|1.3.1-r2",
        ),
    ]);
}

#[test]
fn rpm_distributions_are_asked_under_the_source_rpm() {
    expect(&[
        // Syft writes the epoch in its qualifier, not in the version.
        (
            "pkg:rpm/rocky/openssl-libs@3.0.7-25.el9_3?arch=x86_64&epoch=1&upstream=openssl-3.0.7-25.el9_3.src.rpm&distro=rocky-9.3",
            "Rocky Linux:9|openssl|1:3.0.7-25.el9_3",
        ),
        (
            "pkg:rpm/almalinux/curl@7.76.1-26.el9?arch=x86_64&upstream=curl-7.76.1-26.el9.src.rpm&distro=almalinux-9.3",
            "AlmaLinux:9|curl|7.76.1-26.el9",
        ),
        // openSUSE's advisories carry no epoch.
        (
            "pkg:rpm/opensuse/vim@9.0.2103-150000.5.25.1?arch=x86_64&epoch=0&distro=opensuse-tumbleweed-20240101",
            "openSUSE:Tumbleweed|vim|9.0.2103-150000.5.25.1",
        ),
        (
            "pkg:rpm/azurelinux/curl@8.8.0-2.azl3?distro=azurelinux-3.0",
            "Azure Linux:3|curl|8.8.0-2.azl3",
        ),
        (
            "pkg:rpm/opensuse/libopenssl3@3.0.8-150500.5.8.1?arch=x86_64&distro=opensuse-leap-15.5",
            "openSUSE:Leap 15.5|libopenssl3|3.0.8-150500.5.8.1",
        ),
        (
            "pkg:rpm/suse/bash@4.4-150400.27.3.2?distro=sles-15.5",
            "SUSE:Linux Enterprise Server 15 SP5|bash|4.4-150400.27.3.2",
        ),
    ]);
}

#[test]
fn language_names_keep_the_case_their_ecosystem_keeps() {
    expect(&[
        (
            "pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.7.0",
            "Go|github.com/CycloneDX/cyclonedx-go|0.7.0",
        ),
        (
            "pkg:golang/github.com/BurntSushi/toml@v1.3.2",
            "Go|github.com/BurntSushi/toml|1.3.2",
        ),
        ("pkg:golang/stdlib@go1.21.0", "Go|stdlib|1.21.0"),
        ("pkg:golang/stdlib@1.22.1", "Go|stdlib|1.22.1"),
        ("pkg:npm/%40babel/core@7.0.0", "npm|@babel/core|7.0.0"),
        ("pkg:npm/lodash@4.17.20", "npm|lodash|4.17.20"),
        ("pkg:pypi/Jinja2@3.1.4", "PyPI|jinja2|3.1.4"),
        ("pkg:pypi/ruamel.yaml@0.17.21", "PyPI|ruamel-yaml|0.17.21"),
        (
            "pkg:pypi/typing_extensions@4.8.0",
            "PyPI|typing-extensions|4.8.0",
        ),
        (
            "pkg:maven/org.apache.logging.log4j/log4j-core@2.14.1?type=jar",
            "Maven|org.apache.logging.log4j:log4j-core|2.14.1",
        ),
        (
            "pkg:nuget/Newtonsoft.Json@12.0.1",
            "NuGet|Newtonsoft.Json|12.0.1",
        ),
        ("pkg:cargo/tokio@1.19.2", "crates.io|tokio|1.19.2"),
        ("pkg:gem/rails@7.0.4", "RubyGems|rails|7.0.4"),
        (
            "pkg:composer/laravel/framework@7.12.0",
            "Packagist|laravel/framework|7.12.0",
        ),
        ("pkg:hex/plug@1.14.0", "Hex|plug|1.14.0"),
        ("pkg:pub/http@0.13.0", "Pub|http|0.13.0"),
        (
            "pkg:swift/github.com/apple/swift-nio@2.41.0",
            "SwiftURL|github.com/apple/swift-nio|2.41.0",
        ),
        (
            "pkg:github/actions/checkout@v4",
            "GitHub Actions|actions/checkout|v4",
        ),
    ]);
}

#[test]
fn what_cannot_be_asked_says_why() {
    for (purl, why) in [
        ("pkg:npm/lodash", NotAsked::NoVersion),
        ("not a purl", NotAsked::NotAPurl),
        ("pkg:", NotAsked::NotAPurl),
        ("pkg:oci/web@sha256%3Aabc", NotAsked::NoAdvisorySource),
        ("pkg:generic/openssl@3.0", NotAsked::NoAdvisorySource),
        (
            "pkg:rpm/amzn/curl@8.3.0-1.amzn2023?distro=amzn-2023",
            NotAsked::UnknownDistribution,
        ),
        (
            "pkg:deb/kali/bash@5.2?distro=kali-2024.1",
            NotAsked::UnknownDistribution,
        ),
        (
            "pkg:deb/debian/libselinux1-dev@3.1-3?arch=s390x",
            NotAsked::UnknownRelease,
        ),
        ("pkg:deb/ubuntu/libc6@2.35", NotAsked::UnknownRelease),
        (
            "pkg:apk/alpine/musl@1.2.4-r2?distro=edge",
            NotAsked::UnknownRelease,
        ),
        ("pkg:rpm/rocky/bash@5.1", NotAsked::UnknownRelease),
        // Red Hat's advisories name a product stream no purl carries.
        (
            "pkg:rpm/redhat/bash@5.1.8-6.el9_1?arch=x86_64&distro=rhel-9.2",
            NotAsked::UnknownRelease,
        ),
        (
            "pkg:dotnet/System.Text.Json@8.0.0",
            NotAsked::NoAdvisorySource,
        ),
    ] {
        assert_eq!(asked(purl), Err(why), "{purl}");
    }
}

#[test]
fn listed_packages_and_sbom_purls_take_one_path() {
    let listed = crate::Package::purl(
        "pkg:deb/debian/libssl3@3.0.11-1~deb12u2?upstream=openssl&distro=debian-12",
    )
    .unwrap();
    let from_list = crate::Inventory::of_packages(std::slice::from_ref(&listed)).finish();
    let mut sbom = crate::Inventory::new();
    sbom.add_entry(Some(listed.to_string().as_str()), "libssl3", None);
    let from_sbom = sbom.finish();
    assert_eq!(from_list.packages, from_sbom.packages);
    assert_eq!(from_list.packages[0].name(), "openssl");
}

#[test]
fn kinds_are_bounded_and_plain() {
    assert_eq!(
        kind_of_purl("pkg:rpm/amzn/curl@8?distro=amzn-2023"),
        "rpm/amzn"
    );
    assert_eq!(kind_of_purl("pkg:oci/web@1"), "oci");
    assert_eq!(kind_of_purl("pkg:deb/ÄÖ/x@1"), "other");
    assert_eq!(kind_of_purl("nonsense"), "other");
}
