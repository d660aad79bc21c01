//! The VEX documents of `testkit/fixtures/sbom/vex`, public and written by
//! their projects; the expected statements are read off each document.

use super::*;
use std::path::PathBuf;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testkit/fixtures/sbom/vex")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn openvex_statements_that_clear_findings_are_read_with_their_subcomponents() {
    let statements = read(&fixture("go-vex-alpine-openssl.openvex-0.2.0.json"), "vex").unwrap();
    let seen: Vec<(&str, TriageState)> = statements
        .iter()
        .map(|s| (s.vulnerabilities[0].as_str(), s.state))
        .collect();
    assert_eq!(
        seen,
        [
            ("CVE-2023-1255", TriageState::Fixed),
            ("CVE-2023-2650", TriageState::Fixed),
            ("CVE-2023-2975", TriageState::Fixed),
            ("CVE-2023-3446", TriageState::NotAffected),
            ("CVE-2023-3817", TriageState::NotAffected),
        ]
    );
    assert_eq!(statements[0].by, "vex #1");
    assert_eq!(
        statements[0].packages,
        [
            "pkg:apk/alpine/libssl3@3.0.8-r3",
            "pkg:apk/alpine/libcrypto3@3.0.8-r3"
        ]
    );
    // v0.0.1, and a vulnerability named by its `@id` alone.
    let old = read(&fixture("guac-git-not-affected.openvex-0.0.1.json"), "git").unwrap();
    assert_eq!(old[0].vulnerabilities, ["CVE-2023-12345"]);
    assert!(
        old[0]
            .packages
            .iter()
            .all(|p| p.starts_with("pkg:apk/alpine/git@"))
    );
    let trivy = read(
        &fixture("trivy-golang-not-affected.openvex-0.2.0.json"),
        "t",
    )
    .unwrap();
    assert_eq!(trivy[0].vulnerabilities, ["CVE-2022-23628"]);
    assert_eq!(
        trivy[0].packages,
        ["pkg:golang/github.com/open-policy-agent/opa@v0.35.0"]
    );
}

#[test]
fn cyclonedx_vex_names_its_packages_by_bom_link_or_bom_ref() {
    let statements = read(&fixture("bom-examples-vex.cdx-1.4.json"), "cdx").unwrap();
    assert_eq!(statements.len(), 1);
    let s = &statements[0];
    assert_eq!(s.state, TriageState::NotAffected);
    assert_eq!(
        s.vulnerabilities,
        [
            "CVE-2020-25649",
            "SNYK-JAVA-COMFASTERXMLJACKSONCORE-1048302"
        ]
    );
    assert_eq!(
        s.packages,
        ["pkg:maven/com.fasterxml.jackson.core/jackson-databind@2.10.0?type=jar"]
    );
    assert!(
        s.justification
            .starts_with("code_not_reachable: Automated dataflow"),
        "{}",
        s.justification
    );
    // CISA's case 1 names `product-ABC`, a bom-ref of no component here:
    // kept as given, it names no package and covers nothing.
    let cisa = read(
        &fixture("bom-examples-cisa-case1-not-affected.cdx-1.4.json"),
        "cisa",
    )
    .unwrap();
    assert_eq!(cisa[0].packages, ["product-ABC"]);
}

#[test]
fn other_documents_are_refused() {
    assert_eq!(
        read(br#"{"spdxVersion": "SPDX-2.3"}"#, "x").unwrap_err(),
        VexError::UnknownFormat
    );
    assert!(matches!(
        read(b"{\"statements\": [", "x"),
        Err(VexError::NotJson(_))
    ));
    let many = serde_json::json!({
        "@context": "https://openvex.dev/ns/v0.2.0",
        "statements": vec![serde_json::json!({"vulnerability": {"name": "CVE-1"}, "status": "not_affected"}); MAX_STATEMENTS + 1]
    });
    assert_eq!(
        read(&serde_json::to_vec(&many).unwrap(), "x").unwrap_err(),
        VexError::TooMany
    );
}
