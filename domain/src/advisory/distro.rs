//! Distribution packages: the purl's namespace names the distribution, its
//! `distro` qualifier the release, and the advisories name the **source**
//! package. A binary package built from a source of another name
//! (`libssl3` from `openssl`, `bsdutils` from `util-linux`) is asked under
//! the source's name and version, which an SBOM gives in the `upstream`
//! qualifier (`util-linux@2.29.2-1+deb9u1`, or the name alone when the
//! versions are the same) or beside the purl ([`super::SourceHint`]). A
//! package whose distribution, or release, has no advisory database here is
//! not asked: it is counted, never taken as clean.

use super::{NotAsked, SourceHint};
use crate::purl::PurlParts;

/// Debian's release numbers by code name, for `distro=bookworm`.
const DEBIAN_CODENAMES: &[(&str, &str)] = &[
    ("wheezy", "7"),
    ("jessie", "8"),
    ("stretch", "9"),
    ("buster", "10"),
    ("bullseye", "11"),
    ("bookworm", "12"),
    ("trixie", "13"),
    ("forky", "14"),
];

/// Ubuntu's releases by code name, for `distro=jammy`.
const UBUNTU_CODENAMES: &[(&str, &str)] = &[
    ("trusty", "14.04"),
    ("xenial", "16.04"),
    ("bionic", "18.04"),
    ("focal", "20.04"),
    ("jammy", "22.04"),
    ("lunar", "23.04"),
    ("mantic", "23.10"),
    ("noble", "24.04"),
    ("oracular", "24.10"),
    ("plucky", "25.04"),
    ("questing", "25.10"),
];

/// The ecosystem, name and version of a distribution package; `None` when
/// the purl's type is not a distribution's.
pub(super) fn coordinates(
    purl: &PurlParts,
    version: &str,
    hint: Option<&SourceHint>,
) -> Option<Result<(String, String, String), NotAsked>> {
    let ecosystem = match purl.ty.as_str() {
        "deb" => deb_release(purl),
        "apk" => apk_release(purl),
        "rpm" => rpm_release(purl),
        _ => return None,
    };
    Some(ecosystem.map(|ecosystem| {
        let (name, version) = source(purl, version, hint);
        let version = with_epoch(purl, &ecosystem, version);
        (ecosystem, name, version)
    }))
}

/// The source package's name and version: from the `upstream` qualifier
/// Syft writes (`name`, `name@version`, or an RPM's
/// `name-version-release.src.rpm`), the `source`/`sourceversion`,
/// `origin` or `sourcerpm` qualifiers osv-scalibr writes, or the
/// document's hint; else the binary's own.
fn source(purl: &PurlParts, version: &str, hint: Option<&SourceHint>) -> (String, String) {
    if let Some(name) = purl
        .qualifier("source")
        .or_else(|| purl.qualifier("origin"))
    {
        let version = purl.qualifier("sourceversion").unwrap_or(version);
        return (name.to_owned(), version.to_owned());
    }
    let upstream = purl
        .qualifier("upstream")
        .or_else(|| purl.qualifier("sourcerpm"));
    let from_upstream = upstream.map(|upstream| match purl.ty.as_str() {
        "rpm" => source_rpm(upstream, &purl.name, version),
        _ => match upstream.split_once('@') {
            Some((name, version)) if !name.is_empty() && !version.is_empty() => {
                (name.to_owned(), version.to_owned())
            }
            _ => (
                upstream.trim_end_matches('@').to_owned(),
                version.to_owned(),
            ),
        },
    });
    let from_hint = || {
        hint.map(|h| {
            (
                h.name.clone(),
                h.version.clone().unwrap_or_else(|| version.to_owned()),
            )
        })
    };
    from_upstream
        .filter(|(name, _)| !name.is_empty())
        .or_else(from_hint)
        .unwrap_or_else(|| (purl.name.clone(), version.to_owned()))
}

/// The advisories of AlmaLinux and Rocky Linux write an RPM's epoch in
/// their versions (`1:3.0.7-27.el9`), the other RPM distributions' do not;
/// Syft writes it in the `epoch` qualifier, not in the purl's version.
fn with_epoch(purl: &PurlParts, ecosystem: &str, version: String) -> String {
    let epoch = purl.qualifier("epoch").filter(|e| *e != "0");
    let takes_epoch = ecosystem.starts_with("AlmaLinux:") || ecosystem.starts_with("Rocky Linux:");
    match epoch {
        Some(epoch) if takes_epoch && !version.contains(':') => format!("{epoch}:{version}"),
        _ => version,
    }
}

/// `openssl-3.0.7-27.el9.src.rpm` is source `openssl`, version-release
/// `3.0.7-27.el9`; an epoch in the binary's version (`1:`) is kept, as the
/// source shares it. A name that does not parse leaves the binary's own
/// coordinates.
fn source_rpm(upstream: &str, binary: &str, version: &str) -> (String, String) {
    let stem = upstream
        .strip_suffix(".src.rpm")
        .or_else(|| upstream.strip_suffix(".nosrc.rpm"))
        .unwrap_or(upstream);
    let mut parts = stem.rsplitn(3, '-');
    let (release, upstream_version, name) = (parts.next(), parts.next(), parts.next());
    match (name, upstream_version, release) {
        (Some(name), Some(v), Some(r)) if !name.is_empty() => {
            let epoch = version.split_once(':').map(|(e, _)| format!("{e}:"));
            (
                name.to_owned(),
                format!("{}{v}-{r}", epoch.unwrap_or_default()),
            )
        }
        _ => (binary.to_owned(), version.to_owned()),
    }
}

fn distro(purl: &PurlParts) -> Option<&str> {
    purl.qualifier("distro")
}

/// `Debian:12` of `debian-12`, `debian-12.4` or `bookworm`; `Ubuntu:22.04:LTS`
/// of `ubuntu-22.04` or `jammy` (OSV names an LTS release so: April of an
/// even year), `Ubuntu:23.10` of a release between.
fn deb_release(purl: &PurlParts) -> Result<String, NotAsked> {
    let release = distro(purl).map(|d| d.to_ascii_lowercase());
    match purl.namespace.to_ascii_lowercase().as_str() {
        "debian" => {
            let release = release.ok_or(NotAsked::UnknownRelease)?;
            let number = release.strip_prefix("debian-").unwrap_or(&release);
            let number = named(DEBIAN_CODENAMES, number).unwrap_or(number);
            let major = number.split('.').next().unwrap_or(number);
            if is_number(major) {
                Ok(format!("Debian:{major}"))
            } else {
                Err(NotAsked::UnknownRelease)
            }
        }
        "ubuntu" => {
            let release = release.ok_or(NotAsked::UnknownRelease)?;
            let number = release.strip_prefix("ubuntu-").unwrap_or(&release);
            let number = named(UBUNTU_CODENAMES, number).unwrap_or(number);
            let mut parts = number.split('.');
            let (year, month) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if !(is_number(year) && is_number(month) && year.len() == 2 && month.len() == 2) {
                return Err(NotAsked::UnknownRelease);
            }
            let lts = month == "04" && year.parse::<u32>().is_ok_and(|y| y % 2 == 0);
            Ok(format!(
                "Ubuntu:{year}.{month}{}",
                if lts { ":LTS" } else { "" }
            ))
        }
        _ => Err(NotAsked::UnknownDistribution),
    }
}

/// `Alpine:v3.19` of `alpine-3.19.1`; Wolfi's and Chainguard's advisories
/// have one ecosystem each, without releases.
fn apk_release(purl: &PurlParts) -> Result<String, NotAsked> {
    match purl.namespace.to_ascii_lowercase().as_str() {
        "alpine" => {
            let release = distro(purl).ok_or(NotAsked::UnknownRelease)?;
            let number = release.strip_prefix("alpine-").unwrap_or(release);
            let mut parts = number.split('.');
            match (parts.next(), parts.next()) {
                (Some(major), Some(minor)) if is_number(major) && is_number(minor) => {
                    Ok(format!("Alpine:v{major}.{minor}"))
                }
                _ => Err(NotAsked::UnknownRelease),
            }
        }
        "wolfi" => Ok("Wolfi".to_owned()),
        "chainguard" => Ok("Chainguard".to_owned()),
        _ => Err(NotAsked::UnknownDistribution),
    }
}

/// The RPM distributions whose advisories OSV carries, by purl namespace:
/// the release is the major version (`AlmaLinux:9`, `Rocky Linux:9`,
/// `Mageia:9`, `Azure Linux:3`), SUSE's and openSUSE's their product name.
/// Red Hat's advisories name a product stream (`Red Hat:enterprise_linux:9::baseos`
/// or `::appstream`) that a purl does not carry: its packages are counted
/// as of an unknown release rather than asked under a guess.
fn rpm_release(purl: &PurlParts) -> Result<String, NotAsked> {
    let namespace = purl.namespace.to_ascii_lowercase();
    let release = distro(purl).map(release_number);
    let major = || {
        let release = release.as_deref().ok_or(NotAsked::UnknownRelease)?;
        let major = release.split('.').next().unwrap_or(release);
        if is_number(major) {
            Ok(major.to_owned())
        } else {
            Err(NotAsked::UnknownRelease)
        }
    };
    match namespace.as_str() {
        "redhat" => Err(NotAsked::UnknownRelease),
        "azurelinux" | "mariner" | "azure-linux" => major().map(|m| format!("Azure Linux:{m}")),
        "almalinux" => major().map(|m| format!("AlmaLinux:{m}")),
        "rocky" | "rocky-linux" | "rockylinux" => major().map(|m| format!("Rocky Linux:{m}")),
        "mageia" => major().map(|m| format!("Mageia:{m}")),
        "opensuse" => opensuse(release.as_deref(), distro(purl)),
        "suse" | "sles" => suse(release.as_deref()),
        "openeuler" => {
            let release = release.ok_or(NotAsked::UnknownRelease)?;
            Ok(format!("openEuler:{release}"))
        }
        _ => Err(NotAsked::UnknownDistribution),
    }
}

/// `9.4` of `rhel-9.4`, `almalinux-9.4` or `9.4`.
fn release_number(distro: &str) -> String {
    distro
        .rsplit_once('-')
        .map_or(distro, |(_, number)| number)
        .to_owned()
}

/// `openSUSE:Leap 15.5` of `opensuse-leap-15.5`; `openSUSE:Tumbleweed`.
fn opensuse(release: Option<&str>, distro: Option<&str>) -> Result<String, NotAsked> {
    let distro = distro
        .map(str::to_ascii_lowercase)
        .ok_or(NotAsked::UnknownRelease)?;
    if distro.contains("tumbleweed") {
        return Ok("openSUSE:Tumbleweed".to_owned());
    }
    match release {
        Some(number) if distro.contains("leap") && is_version(number) => {
            Ok(format!("openSUSE:Leap {number}"))
        }
        _ => Err(NotAsked::UnknownRelease),
    }
}

/// `SUSE:Linux Enterprise Server 15 SP5` of `sles-15.5`.
fn suse(release: Option<&str>) -> Result<String, NotAsked> {
    let release = release.ok_or(NotAsked::UnknownRelease)?;
    let mut parts = release.split('.');
    match (parts.next(), parts.next()) {
        (Some(major), Some("0") | None) if is_number(major) => {
            Ok(format!("SUSE:Linux Enterprise Server {major}"))
        }
        (Some(major), Some(sp)) if is_number(major) && is_number(sp) => {
            Ok(format!("SUSE:Linux Enterprise Server {major} SP{sp}"))
        }
        _ => Err(NotAsked::UnknownRelease),
    }
}

fn named<'a>(table: &[(&str, &'a str)], name: &str) -> Option<&'a str> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_ascii_digit())
}

fn is_version(text: &str) -> bool {
    text.split('.').all(is_number)
}
