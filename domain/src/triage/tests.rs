use super::*;
use crate::coverage::Inventory;
use crate::ticket::Severity;

fn finding(id: &str, cves: &[&str], package: &str) -> Finding {
    Finding {
        id: id.into(),
        cves: cves.iter().map(|c| c.to_string()).collect(),
        package: package.into(),
        cvss: Some(9.8),
        severity: Severity::Critical,
        summary: String::new(),
    }
}

fn statement(
    by: &str,
    vulnerability: &str,
    packages: &[&str],
    expires_ms: Option<u64>,
) -> Statement {
    Statement {
        by: by.into(),
        vulnerabilities: vec![vulnerability.into()],
        packages: packages.iter().map(|p| p.to_string()).collect(),
        state: TriageState::NotAffected,
        justification: "vulnerable_code_not_in_execute_path".into(),
        owner: Some("security@example.com".into()),
        expires_ms,
    }
}

/// An Alpine image whose `libssl3` was asked as its origin, `openssl`.
fn alpine() -> Origins {
    let mut inventory = Inventory::new();
    let listed =
        "pkg:apk/alpine/libssl3@3.0.8-r3?arch=x86_64&upstream=openssl&distro=alpine-3.17.2";
    inventory.add_entry(Some(listed), "libssl3", None);
    inventory.finish().origins
}

const OPENSSL: &str = "Alpine:v3.17/openssl@3.0.8-r3";

#[test]
fn a_statement_on_a_binary_covers_the_findings_of_its_source() {
    // OpenVEX's own example names the binaries, without a distro.
    let triage = Triage::new(
        vec![statement(
            "VEX #1",
            "CVE-2023-2650",
            &["pkg:apk/alpine/libssl3@3.0.8-r3"],
            None,
        )],
        &alpine(),
        0,
    );
    let covered = finding("ALPINE-CVE-2023-2650", &["CVE-2023-2650"], OPENSSL);
    assert_eq!(triage.judge(&covered).map(|t| t.by), Some("VEX #1".into()));
    // Another version, another vulnerability, another package: not covered.
    for other in [
        finding(
            "ALPINE-CVE-2023-2650",
            &["CVE-2023-2650"],
            "Alpine:v3.17/openssl@3.0.9-r0",
        ),
        finding("ALPINE-CVE-2023-0464", &["CVE-2023-0464"], OPENSSL),
        finding(
            "ALPINE-CVE-2023-2650",
            &["CVE-2023-2650"],
            "Alpine:v3.17/musl@1.2.3-r4",
        ),
    ] {
        assert_eq!(triage.judge(&other), None, "{other:?}");
    }
}

#[test]
fn a_statement_without_packages_covers_the_whole_asset_and_ids_match_by_alias() {
    let triage = Triage::new(
        vec![statement("x", "GHSA-jfh8-c2jp-5v3q", &[], None)],
        &Origins::default(),
        0,
    );
    assert!(
        triage
            .judge(&finding(
                "GHSA-jfh8-c2jp-5v3q",
                &["CVE-2021-44228"],
                "Maven/a:b@1"
            ))
            .is_some()
    );
    let by_cve = Triage::new(
        vec![statement("y", "CVE-2021-44228", &[], None)],
        &Origins::default(),
        0,
    );
    assert!(
        by_cve
            .judge(&finding(
                "GHSA-jfh8-c2jp-5v3q",
                &["CVE-2021-44228"],
                "Maven/a:b@1"
            ))
            .is_some()
    );
}

#[test]
fn an_expired_statement_no_longer_applies_and_says_so() {
    let statements = vec![statement(
        "FindingException team-a/x",
        "CVE-2023-2650",
        &["Alpine:v3.17/openssl"],
        Some(1_000),
    )];
    let before = Triage::new(statements.clone(), &Origins::default(), 999);
    let covered = finding("ALPINE-CVE-2023-2650", &["CVE-2023-2650"], OPENSSL);
    assert!(
        before.judge(&covered).is_some(),
        "any version of the coordinates named"
    );
    let after = Triage::new(statements, &Origins::default(), 1_000);
    assert_eq!(after.judge(&covered), None);
    assert_eq!(after.expired(), ["FindingException team-a/x"]);
}

#[test]
fn references_that_name_no_package_are_not_guessed() {
    let triage = Triage::new(
        vec![statement(
            "cdx #1",
            "CVE-1",
            &["urn:cdx:other-bom/1#component-7"],
            None,
        )],
        &Origins::default(),
        0,
    );
    assert_eq!(triage.unresolved(), ["cdx #1"]);
    assert_eq!(triage.judge(&finding("CVE-1", &["CVE-1"], "npm/a@1")), None);
}
