use super::*;
use assetscan_domain::NotAsked;
use serde_json::json;

fn read_json(value: serde_json::Value) -> Result<Contents, DocumentError> {
    read(&serde_json::to_vec(&value).unwrap())
}

fn names(contents: &Contents) -> Vec<String> {
    contents.packages.iter().map(|p| p.to_string()).collect()
}

#[test]
fn cyclonedx_components_nest_and_repeat() {
    let contents = read_json(json!({
        "bomFormat": "CycloneDX", "specVersion": "1.5",
        "metadata": {"component": {"name": "web", "purl": "pkg:oci/web@sha256%3Aab"}},
        "components": [
            {"name": "a", "purl": "pkg:npm/a@1.0.0", "components": [
                {"name": "b", "purl": "pkg:npm/b@2.0.0"},
                {"name": "no-purl"}
            ]},
            {"name": "a-again", "purl": "pkg:npm/a@1.0.0"},
            {"name": "amzn", "purl": "pkg:rpm/amzn/curl@7.50.3?distro=amzn-2"}
        ]
    }))
    .unwrap();
    assert_eq!(names(&contents), ["npm/a@1.0.0", "npm/b@2.0.0"]);
    // The subject (an image) is not a package of it: 5 entries listed.
    let coverage = &contents.coverage;
    assert_eq!((coverage.listed, coverage.asked), (5, 3));
    assert_eq!(coverage.not_asked.get(&NotAsked::NoPurl), Some(&1));
    assert_eq!(
        coverage.not_asked.get(&NotAsked::UnknownDistribution),
        Some(&1)
    );
    assert_eq!(contents.format, "CycloneDX 1.5 JSON");
}

#[test]
fn a_subject_that_names_a_package_is_asked_about() {
    let contents = read_json(json!({
        "bomFormat": "CycloneDX", "specVersion": "1.6",
        "metadata": {"component": {"name": "app", "purl": "pkg:npm/app@1.0.0"}},
        "components": []
    }))
    .unwrap();
    assert_eq!(names(&contents), ["npm/app@1.0.0"]);
}

#[test]
fn trivy_states_the_source_package_in_properties() {
    let contents = read_json(json!({
        "bomFormat": "CycloneDX", "specVersion": "1.5",
        "components": [{"name": "libssl1.1",
            "purl": "pkg:deb/debian/libssl1.1@1.1.1n-0+deb11u3?arch=amd64&distro=debian-11.6",
            "properties": [
                {"name": "aquasecurity:trivy:SrcName", "value": "openssl"},
                {"name": "aquasecurity:trivy:SrcVersion", "value": "1.1.1n"},
                {"name": "aquasecurity:trivy:SrcRelease", "value": "0+deb11u3"}
            ]}]
    }))
    .unwrap();
    assert_eq!(names(&contents), ["Debian:11/openssl@1.1.1n-0+deb11u3"]);
}

#[test]
fn spdx_packages_take_their_purl_reference_and_describe_their_subject() {
    for (version, category) in [
        ("SPDX-2.3", "PACKAGE-MANAGER"),
        ("SPDX-2.2", "PACKAGE_MANAGER"),
    ] {
        let contents = read_json(json!({
            "spdxVersion": version,
            "documentDescribes": ["SPDXRef-image"],
            "packages": [
                {"SPDXID": "SPDXRef-image", "name": "image"},
                {"SPDXID": "SPDXRef-x", "name": "x", "externalRefs": [
                    {"referenceCategory": "SECURITY", "referenceType": "cpe23Type", "referenceLocator": "cpe:2.3:a:x"},
                    {"referenceCategory": category, "referenceType": "purl", "referenceLocator": "pkg:cargo/tokio@1.19.2"}
                ]},
                {"SPDXID": "SPDXRef-y", "name": "y"}
            ]
        }))
        .unwrap();
        assert_eq!(names(&contents), ["crates.io/tokio@1.19.2"], "{version}");
        assert_eq!((contents.coverage.listed, contents.coverage.asked), (2, 1));
    }
}

#[test]
fn spdx_3_packages_are_read_from_the_graph() {
    let contents = read_json(json!({
        "@context": "https://spdx.org/rdf/3.0.1/spdx-context.jsonld",
        "@graph": [
            {"type": "software_Sbom", "spdxId": "urn:sbom", "rootElement": ["urn:image"]},
            {"type": "software_Package", "spdxId": "urn:image", "name": "image"},
            {"type": "software_Package", "spdxId": "urn:a", "name": "a",
             "software_packageUrl": "pkg:pypi/Django@4.2.0"},
            {"type": "software_File", "spdxId": "urn:f", "name": "f"}
        ]
    }))
    .unwrap();
    assert_eq!(names(&contents), ["PyPI/django@4.2.0"]);
    assert_eq!(contents.format, "SPDX 3.0 JSON-LD");
}

#[test]
fn cyclonedx_xml_is_read_as_json_is() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<bom xmlns="http://cyclonedx.org/schema/bom/1.3" version="1">
  <metadata><component type="container"><name>web</name></component></metadata>
  <components>
    <component type="library">
      <name>bsdutils</name>
      <purl>pkg:deb/debian/bsdutils@1:2.29.2-1+deb9u1?arch=amd64&amp;upstream=util-linux%402.29.2-1%2Bdeb9u1&amp;distro=debian-9</purl>
      <pedigree><ancestors><component><name>x</name><purl>pkg:npm/not-installed@1.0.0</purl></component></ancestors></pedigree>
      <components>
        <component type="library"><name>inner</name><purl><![CDATA[pkg:npm/%40babel/core@7.0.0]]></purl></component>
        <component type="library"/>
      </components>
    </component>
    <component type="library"><name>libssl</name>
      <purl>pkg:deb/debian/libssl1.1@1.1.1n-0+deb11u3?distro=debian-11</purl>
      <properties><property name="aquasecurity:trivy:SrcName">openssl</property></properties>
    </component>
  </components>
</bom>"#;
    let contents = read(xml.as_bytes()).unwrap();
    assert_eq!(
        names(&contents),
        [
            "Debian:11/openssl@1.1.1n-0+deb11u3",
            "Debian:9/util-linux@2.29.2-1+deb9u1",
            "npm/@babel/core@7.0.0",
        ]
    );
    assert_eq!((contents.coverage.listed, contents.coverage.asked), (4, 3));
    assert_eq!(contents.format, "CycloneDX 1.3 XML");
    // A BOM without components is one, with nothing listed.
    let empty = read(br#"<bom xmlns="http://cyclonedx.org/schema/bom/1.4" version="1"/>"#).unwrap();
    assert_eq!(
        (empty.coverage.listed, empty.format.as_str()),
        (0, "CycloneDX 1.4 XML")
    );
}

#[test]
fn spdx_tag_value_is_read_as_json_is() {
    let text = "SPDXVersion: SPDX-2.2\nDataLicense: CC0-1.0\nSPDXID: SPDXRef-DOCUMENT\n\
DocumentComment: <text>a comment\nPackageName: not-a-package\n</text>\n\
Relationship: SPDXRef-DOCUMENT DESCRIBES SPDXRef-root\n\n\
PackageName: root\nSPDXID: SPDXRef-root\n\n\
PackageName: musl\nSPDXID: SPDXRef-musl\n\
ExternalRef: SECURITY cpe23Type cpe:2.3:a:musl:musl:1.2.4:*:*:*:*:*:*:*\n\
ExternalRef: PACKAGE_MANAGER purl pkg:apk/alpine/musl@1.2.4-r2?arch=x86_64&distro=alpine-3.19.1\n\n\
PackageName: nameless\nSPDXID: SPDXRef-nameless\n";
    let contents = read(text.as_bytes()).unwrap();
    assert_eq!(names(&contents), ["Alpine:v3.19/musl@1.2.4-r2"]);
    assert_eq!((contents.coverage.listed, contents.coverage.asked), (2, 1));
    assert_eq!(contents.format, "SPDX-2.2 tag-value");
}

#[test]
fn other_documents_are_refused() {
    for (doc, expected) in [
        (
            json!({"bomFormat": "CycloneDX", "specVersion": "1.1"}),
            "1.1",
        ),
        (json!({"bomFormat": "CycloneDX"}), "\"\""),
        (json!({"spdxVersion": "SPDX-2.1"}), "SPDX-2.1"),
        (
            json!({"spdxVersion": "SPDX-2.3", "bomFormat": "CycloneDX"}),
            "neither",
        ),
        (json!({"components": []}), "neither"),
        (json!({"@context": "https://example.com/other"}), "SPDX 3.0"),
        (json!([1, 2]), "neither"),
    ] {
        let err = read_json(doc).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
    let cut =
        br#"{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [{"purl": "pkg:npm/a@1"#;
    assert!(matches!(read(cut), Err(DocumentError::NotJson(_))));
    for (xml, expected) in [
        (&br#"<bom xmlns="http://cyclonedx.org/schema/bom/1.1"/>"#[..], "1.1"),
        (br#"<html xmlns="http://www.w3.org/1999/xhtml"/>"#, "neither"),
        (br#"<bom xmlns="http://cyclonedx.org/schema/bom/1.4"><components><component>"#, "cut short"),
        (br#"<bom xmlns="http://cyclonedx.org/schema/bom/1.4"><components><component><purl>&xxe;</purl>"#, "undefined entity"),
    ] {
        let err = read(xml).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
    assert_eq!(
        read(b"Just some text: here\n").unwrap_err(),
        DocumentError::UnknownFormat
    );
    assert_eq!(read(b"   ").unwrap_err(), DocumentError::UnknownFormat);
}

#[test]
fn nesting_is_bounded() {
    let mut component = json!({"name": "leaf", "purl": "pkg:npm/leaf@1.0.0"});
    for _ in 0..(MAX_DEPTH + 2) {
        component = json!({"name": "n", "components": [component]});
    }
    // serde_json's own recursion limit (128) is deeper than MAX_DEPTH's
    // levels of components (two JSON levels each).
    let deep = read_json(
        json!({"bomFormat": "CycloneDX", "specVersion": "1.6", "components": [component]}),
    );
    assert!(
        matches!(
            deep,
            Err(DocumentError::TooDeep | DocumentError::NotJson(_))
        ),
        "{deep:?}"
    );
    let open = "<components><component>".repeat(MAX_DEPTH * 2 + 1);
    let xml = format!(r#"<bom xmlns="http://cyclonedx.org/schema/bom/1.4">{open}"#);
    assert_eq!(read(xml.as_bytes()).unwrap_err(), DocumentError::TooDeep);
}
