//! The AssetScan CRD: the checked-in YAML, its names, its OpenAPI constraints
//! and its CEL rules (evaluated with kube's own CEL validator, the same engine
//! the test kit's API emulator uses).

use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::crd::{
    ASSET_ID_PATTERN, AssetScan, AssetScanReport, AssetScanSpec, AssetScanStatus,
    ClusterNotificationChannel, NotificationChannel, Package, SbomReference, Target, crds_yaml,
};
use kube::core::cel::{ValidationErrors, validate_cel, validate_cel_update};
use kube::{CustomResourceExt, Resource};
use serde_json::{Value, json};
use std::path::PathBuf;

const HEADER: &str = "# Generated from src/kubernetes/crd/. Do not edit: run\n#   UPDATE_CRDS=1 cargo test -p assetscan-operator --test crd\n";

fn crd_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crds")
        .join(format!("{name}.yaml"))
}

/// Each CRD file equals what the Rust types generate (and is rewritten
/// with UPDATE_CRDS=1).
#[test]
fn checked_in_crds_match_the_rust_types() {
    let crds = crds_yaml();
    for (name, yaml) in &crds {
        let expected = format!("{HEADER}{yaml}");
        let path = crd_file(name);
        if std::env::var_os("UPDATE_CRDS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &expected).unwrap();
            continue;
        }
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "{} is out of date with src/kubernetes/crd/; regenerate it with\n  UPDATE_CRDS=1 cargo test -p assetscan-operator --test crd",
            path.display()
        );
    }
    // After the files are written, so that UPDATE_CRDS=1 creates a new one.
    let mut names: Vec<String> = crds
        .iter()
        .map(|(name, _)| format!("{name}.yaml"))
        .collect();
    names.sort();
    let dir = crd_file("x").parent().unwrap().to_owned();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        names, files,
        "crds/ holds one file for each CRD, and no other"
    );
}

/// The report: namespaced, no status subresource (written whole, once),
/// immutable, the columns `kubectl get asr` shows.
#[test]
fn the_report_crd_is_immutable_with_its_columns() {
    let crd = AssetScanReport::crd();
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["asr".to_owned()]));
    assert_eq!(crd.spec.names.categories, Some(vec!["security".to_owned()]));
    let version = &crd.spec.versions[0];
    assert!(!has_status_subresource(&crd));
    let columns: Vec<&str> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(columns, ["Asset", "Verdict", "Findings", "Max-CVSS", "Age"]);
    let schema = serde_json::to_value(&version.schema).unwrap();
    let rules = &schema["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"];
    assert_eq!(rules[0]["rule"], "self == oldSelf", "{schema:#}");
}

#[test]
fn names_scope_columns_and_status_subresource() {
    let crd = AssetScan::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("assetscans.assetscan.io")
    );
    assert_eq!(AssetScan::api_version(&()), "assetscan.io/v1alpha1");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, "AssetScan");
    assert_eq!(crd.spec.names.plural, "assetscans");
    assert_eq!(crd.spec.names.short_names, Some(vec!["ascan".to_owned()]));
    assert_eq!(crd.spec.names.categories, Some(vec!["security".to_owned()]));

    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<(&str, &str)> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Asset", ".spec.assetId"),
            ("Phase", ".status.phase"),
            ("High-Risk", ".status.highRisk"),
            ("Coverage", ".status.coverage.summary"),
            ("Notified", ".status.notification.state"),
            ("Token", ".status.fencingToken"),
            ("Age", ".metadata.creationTimestamp"),
        ]
    );
}

// ---- OpenAPI constraints (enforced by the API server / the emulator) ----

fn schema() -> Value {
    let crd = AssetScan::crd();
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

/// The schema node at `path` (property names; `[]` steps into list items).
fn node<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(schema, |s, step| match *step {
        "[]" => &s["items"],
        name => &s["properties"][name],
    })
}

#[test]
fn asset_id_pattern_is_at_least_as_strict_as_the_store() {
    let schema = schema();
    let asset_id = node(&schema, &["spec", "assetId"]);
    assert_eq!(asset_id["pattern"], ASSET_ID_PATTERN);
    assert_eq!(asset_id["minLength"], 1);
    assert_eq!(asset_id["maxLength"], 128);
    assert!(
        schema["properties"]["spec"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("assetId"))
    );

    let pattern = regex::Regex::new(ASSET_ID_PATTERN).unwrap();
    for good in ["web-01", "10.0.0.7", "prod/db:5432", "host_a.example.com"] {
        assert!(pattern.is_match(good), "{good:?} should be accepted");
    }
    // Everything the store refuses (braces would break the Redis Cluster hash
    // tag, whitespace and control characters the key layout), and more.
    for bad in [
        "", "a{b", "a}b", "{a}", "a b", "a\tb", "a\nb", "a\u{7f}b", "ä", "-lead",
    ] {
        assert!(!pattern.is_match(bad), "{bad:?} should be rejected");
    }
}

#[test]
fn ranges_and_enums_reject_out_of_bounds_values() {
    let schema = schema();
    let port = node(&schema, &["spec", "target", "ports", "[]"]);
    assert_eq!(
        (port["minimum"].as_f64(), port["maximum"].as_f64()),
        (Some(1.0), Some(65535.0))
    );
    assert_eq!(
        port["format"], "int32",
        "no uint16: the API server does not know it"
    );
    let ports = node(&schema, &["spec", "target", "ports"]);
    assert_eq!(ports["maxItems"], 16);
    assert_eq!(ports["x-kubernetes-list-type"], "set");

    let policy = node(&schema, &["spec", "policy"]);
    let cvss = &policy["properties"]["cvssThreshold"];
    assert_eq!(
        (cvss["minimum"].as_f64(), cvss["maximum"].as_f64()),
        (Some(0.0), Some(10.0))
    );
    assert_eq!(cvss["default"].as_f64(), Some(7.0));
    let epss = &policy["properties"]["epssThreshold"];
    assert_eq!(
        (epss["minimum"].as_f64(), epss["maximum"].as_f64()),
        (Some(0.0), Some(1.0))
    );
    assert_eq!(epss["default"].as_f64(), Some(0.5));
    let threat_intel = &policy["properties"]["threatIntel"];
    assert_eq!(
        threat_intel["enum"],
        json!(["WhenNeeded", "Always", "Never"])
    );
    assert_eq!(threat_intel["default"], "WhenNeeded");

    assert_eq!(node(&schema, &["spec", "software"])["maxItems"], 500);
    assert_eq!(node(&schema, &["spec", "notify"])["maxItems"], 8);
    assert_eq!(node(&schema, &["spec", "suspend"])["default"], false);
    assert!(node(&schema, &["spec", "rescanInterval"])["pattern"].is_string());
    assert_eq!(
        node(&schema, &["status", "vulnerabilities", "topIds"])["maxItems"],
        5
    );
    assert_eq!(
        node(&schema, &["status", "fencingToken"])["format"],
        "int64"
    );
}

#[test]
fn phase_is_an_enum_of_the_ticket_wire_names() {
    let schema = schema();
    // Every status the state machine declares (domain/src/machine.rs,
    // whose tests keep it growing only), by its wire name, in its order.
    let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(node(&schema, &["status", "phase"])["enum"], json!(names));
    assert_eq!(
        node(&schema, &["status", "notification", "state"])["enum"],
        json!(["sending", "sent", "skipped"])
    );
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    let schema = schema();
    let conditions = node(&schema, &["status", "conditions"]);
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    let required = conditions["items"]["required"].as_array().unwrap();
    for field in ["type", "status", "reason", "message", "lastTransitionTime"] {
        assert!(
            required.contains(&json!(field)),
            "condition.{field} required"
        );
    }
}

// ---- CEL rules ----

fn host_target() -> Target {
    Target {
        host: Some("web-01.example.com".into()),
        ports: vec![22, 443],
        inventory_ref: None,
    }
}

fn scan(target: Target, software: Vec<Package>) -> AssetScan {
    AssetScan::new(
        "web-01",
        AssetScanSpec {
            asset_id: "web-01".into(),
            target,
            software,
            sbom: None,
            vex: vec![],
            policy: Default::default(),
            notify: vec!["secops".into()],
            rescan_interval: Some("6h".into()),
            suspend: false,
            report_history_limit: None,
        },
    )
}

fn with_fence(token: i64, revision: i64) -> AssetScan {
    let mut scan = scan(host_target(), vec![]);
    scan.status = Some(AssetScanStatus {
        fencing_token: Some(token),
        revision: Some(revision),
        ..Default::default()
    });
    scan
}

fn assert_rejected(result: Result<(), ValidationErrors>, message: &str) {
    let errors = result.expect_err("expected a CEL rejection");
    assert!(
        errors.iter().any(|e| e.message.contains(message)),
        "expected a failure saying {message:?}, got: {errors}"
    );
}

#[test]
fn status_fencing_accepts_forward_and_equal_writes() {
    let old = with_fence(5, 3);
    validate_cel_update(&with_fence(6, 1), &old).unwrap();
    validate_cel_update(&with_fence(5, 3), &old).unwrap();
    validate_cel_update(&with_fence(5, 4), &old).unwrap();
}

#[test]
fn status_fencing_accepts_the_first_status_write() {
    let old = scan(host_target(), vec![]);
    validate_cel_update(&with_fence(1, 1), &old).unwrap();
    validate_cel(&with_fence(1, 1)).unwrap();
}

#[test]
fn status_fencing_rejects_going_backwards() {
    let old = with_fence(5, 3);
    let backwards = "may not go backwards";
    assert_rejected(validate_cel_update(&with_fence(5, 2), &old), backwards);
    assert_rejected(validate_cel_update(&with_fence(4, 9), &old), backwards);

    let mut dropped = with_fence(5, 3);
    dropped.status = Some(AssetScanStatus::default());
    assert_rejected(validate_cel_update(&dropped, &old), backwards);

    let mut removed = with_fence(5, 3);
    removed.status = None;
    assert_rejected(
        validate_cel_update(&removed, &old),
        "status may not be removed",
    );
}

#[test]
fn status_fencing_token_and_revision_come_together() {
    let mut half = with_fence(5, 3);
    half.status.as_mut().unwrap().revision = None;
    assert_rejected(validate_cel(&half), "must be set together");
}

#[test]
fn target_needs_exactly_one_of_host_or_inventory_ref() {
    let inventory = Target {
        inventory_ref: Some("cmdb-4711".into()),
        ..Default::default()
    };
    validate_cel(&scan(host_target(), vec![])).unwrap();
    validate_cel(&scan(inventory.clone(), vec![])).unwrap();

    let message = "set exactly one of: host (with ports), or inventoryRef";
    let both = Target {
        inventory_ref: Some("cmdb-4711".into()),
        ..host_target()
    };
    assert_rejected(validate_cel(&scan(both, vec![])), message);
    assert_rejected(validate_cel(&scan(Target::default(), vec![])), message);
    let host_without_ports = Target {
        ports: vec![],
        ..host_target()
    };
    assert_rejected(validate_cel(&scan(host_without_ports, vec![])), message);
    let inventory_with_ports = Target {
        ports: vec![443],
        ..inventory
    };
    assert_rejected(validate_cel(&scan(inventory_with_ports, vec![])), message);
}

#[test]
fn software_entries_need_exactly_one_of_purl_or_name_ecosystem_version() {
    let named = Package {
        name: Some("openssl".into()),
        ecosystem: Some("Debian:12".into()),
        version: Some("3.0.11-1".into()),
        purl: None,
    };
    let purl = Package {
        purl: Some("pkg:npm/lodash@4.17.20".into()),
        ..Default::default()
    };
    validate_cel(&scan(host_target(), vec![named.clone(), purl.clone()])).unwrap();

    let message = "set exactly one of: purl, or name with ecosystem and version";
    let both = Package {
        purl: purl.purl.clone(),
        ..named.clone()
    };
    let partial = Package {
        version: None,
        ..named.clone()
    };
    for bad in [both, partial, Package::default()] {
        assert_rejected(
            validate_cel(&scan(host_target(), vec![named.clone(), bad])),
            message,
        );
    }
}

#[test]
fn software_is_listed_or_referenced_not_both() {
    let mut by_ref = scan(host_target(), vec![]);
    by_ref.spec.sbom = Some(SbomReference {
        source: "artifacts".into(),
        reference: "images/web/1.cdx.json".into(),
        digest: None,
    });
    validate_cel(&by_ref).unwrap();
    let purl = Package {
        purl: Some("pkg:npm/lodash@4.17.20".into()),
        ..Default::default()
    };
    by_ref.spec.software = vec![purl];
    assert_rejected(
        validate_cel(&by_ref),
        "set at most one of: software (listed), or sbom (by reference)",
    );
}

#[test]
fn asset_id_is_immutable() {
    let old = scan(host_target(), vec![]);
    let mut renamed = old.clone();
    renamed.spec.asset_id = "web-02".into();
    assert_rejected(validate_cel_update(&renamed, &old), "assetId is immutable");
    validate_cel_update(&old.clone(), &old).unwrap();
}

#[test]
fn rescan_interval_has_a_floor() {
    let mut fast = scan(host_target(), vec![]);
    fast.spec.rescan_interval = Some("30s".into());
    assert_rejected(validate_cel(&fast), "at least 1m");
    fast.spec.rescan_interval = Some("1h30m".into());
    validate_cel(&fast).unwrap();
}

#[test]
fn status_observed_generation_may_not_go_backwards() {
    let at_generation = |token, generation| {
        let mut scan = with_fence(token, 1);
        scan.status.as_mut().unwrap().observed_generation = Some(generation);
        scan
    };
    let old = at_generation(5, 4);
    // A newer token from an executor that read an older spec is refused...
    assert_rejected(
        validate_cel_update(&at_generation(9, 3), &old),
        assetscan_operator::domain::fence::GENERATION_RULE.message,
    );
    // ...while the same or a newer generation passes.
    validate_cel_update(&at_generation(6, 4), &old).unwrap();
    validate_cel_update(&at_generation(6, 5), &old).unwrap();
}

/// The team's channel: namespaced, its status a subresource the operator
/// alone writes, its type one of the receivers, and its Secret reference a
/// name with no namespace (the Secret is always the channel's namespace's).
#[test]
fn a_notification_channel_names_a_secret_of_its_own_namespace_only() {
    let crd = NotificationChannel::crd();
    assert_eq!(crd.spec.scope, "Namespaced");
    let version = &crd.spec.versions[0];
    assert!(has_status_subresource(&crd));
    let schema = serde_json::to_value(version.schema.as_ref().unwrap()).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    let secret_ref = &spec["properties"]["secretRef"];
    let keys: Vec<&String> = secret_ref["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["name"], "no namespace: {secret_ref}");
    assert_eq!(secret_ref["required"], json!(["name"]));
    assert_eq!(
        spec["properties"]["type"]["enum"],
        json!([
            "webhook",
            "slack",
            "teams",
            "wecom",
            "alertmanager",
            "pagerduty",
            "cloudevents"
        ])
    );
    assert_eq!(spec["required"], json!(["secretRef", "type"]));
}

/// The platform's channel: cluster-scoped, with the receiver's settings of
/// a team's channel, a Secret named with its namespace, and `access` in
/// the words of `channelAccess`; an object that opens it to no one is
/// valid (closed unless opened).
#[test]
fn a_cluster_channel_names_its_secrets_namespace_and_who_may_use_it() {
    let crd = ClusterNotificationChannel::crd();
    assert_eq!(crd.spec.scope, "Cluster");
    assert!(has_status_subresource(&crd));
    let version = &crd.spec.versions[0];
    let schema = serde_json::to_value(version.schema.as_ref().unwrap()).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["required"], json!(["secretRef", "type"]));
    assert_eq!(
        spec["properties"]["secretRef"]["required"],
        json!(["name", "namespace"])
    );
    // Kubernetes' own DNS-1123 label format (apimachinery's DNS1123LabelFmt).
    let namespace = &spec["properties"]["secretRef"]["properties"]["namespace"];
    assert_eq!(namespace["pattern"], "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
    assert_eq!(namespace["maxLength"], 63);
    let access: Vec<&String> = (spec["properties"]["access"]["properties"].as_object())
        .unwrap()
        .keys()
        .collect();
    assert_eq!(access, ["allNamespaces", "namespaceSelector", "namespaces"]);
    let team = NotificationChannel::crd();
    let team = serde_json::to_value(team.spec.versions[0].schema.as_ref().unwrap()).unwrap();
    let team = &team["openAPIV3Schema"]["properties"]["spec"]["properties"];
    for field in [
        "type",
        "labels",
        "activeFor",
        "mode",
        "source",
        "url",
        "timeout",
    ] {
        assert_eq!(spec["properties"][field], team[field], "{field}");
    }
    let closed: ClusterNotificationChannel = serde_json::from_value(json!({
        "apiVersion": "assetscan.io/v1alpha1", "kind": "ClusterNotificationChannel",
        "metadata": {"name": "secops"},
        "spec": {"type": "slack", "secretRef": {"name": "s", "namespace": "assetscan"}},
    }))
    .unwrap();
    assert!(closed.spec.access.is_closed());
}

fn has_status_subresource(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> bool {
    let version = &crd.spec.versions[0];
    (version.subresources.as_ref()).is_some_and(|s| s.status.is_some())
}
