//! CRD compatibility with the previous release, without building it: its
//! CRDs and objects its operator wrote, kept as fixtures
//! (fixtures/previous-release, see its README), validated by the API
//! emulator's admission (schema, pruning, CEL rules):
//! - every object the previous release wrote is valid under this tree's
//!   CRDs and loses no field there (a field this tree removed must not be
//!   in use);
//! - this tree's example manifests are valid under the previous CRDs (a
//!   new field must not be required there; fields it does not know are
//!   dropped, which a rollback loses, and listed);
//! - this tree still serves every CRD the previous release did.
//!
//! `make upgrade-test` checks the same both ways on live objects, the
//! status this tree's operator writes included, and checks the fixtures
//! against the previous release's commit.

use assetscan_chaos::upgrade::validate::CrdValidator;
use assetscan_testkit::emulator::{parse_manifests, read_crd_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/previous-release")
}

fn names(crds: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = crds
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_the_previous_release_are_valid_under_this_trees_crds() {
    let crds = read_crd_dir(&repo().join("crds")).unwrap();
    let validator = CrdValidator::start("this tree's", crds).await.unwrap();
    let text = std::fs::read_to_string(fixtures().join("assetscans.json")).unwrap();
    let objects: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(
        objects.len() >= 10,
        "the fixture holds the objects of a run"
    );
    for object in &objects {
        assert!(
            object["status"]["phase"].is_string(),
            "written by the operator"
        );
        let verdict = validator.check(object).await.unwrap();
        let name = &object["metadata"]["name"];
        assert_eq!(
            verdict.refused, None,
            "{name} refused under this tree's CRDs"
        );
        assert!(
            verdict.pruned.is_empty(),
            "{name} loses {:?} under this tree's CRDs: a field still in use was removed",
            verdict.pruned
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_trees_manifests_are_valid_under_the_previous_crds() {
    let previous = read_crd_dir(&fixtures().join("crds")).unwrap();
    let validator = CrdValidator::start("the previous release's", previous)
        .await
        .unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(repo().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("assetscan-") && name.ends_with(".yaml")) {
            continue;
        }
        for manifest in parse_manifests(&std::fs::read_to_string(&path).unwrap()).unwrap() {
            let verdict = validator.check(&manifest).await.unwrap();
            assert_eq!(
                verdict.refused, None,
                "{name} refused under the previous CRDs"
            );
            if !verdict.pruned.is_empty() {
                println!("{name}: the previous CRDs drop {:?}", verdict.pruned);
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "the examples were read");
}

#[test]
fn this_tree_serves_every_crd_of_the_previous_release() {
    let previous = names(&read_crd_dir(&fixtures().join("crds")).unwrap());
    let current = names(&read_crd_dir(&repo().join("crds")).unwrap());
    for name in &previous {
        assert!(current.contains(name), "{name} is gone from crds/");
    }
}

/// The newest release whose commit CHANGELOG.md names is the previous
/// release `make upgrade-test` builds (a release's own commit cannot name
/// itself: until the next commit does, the one before stays the previous
/// release), and the fixtures must come from it.
#[test]
fn the_fixtures_are_those_of_the_release_the_changelog_names() {
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let commit = assetscan_chaos::upgrade::release::release_commit(&changelog)
        .expect("CHANGELOG.md names the latest release's commit (`Commit: <40 hex>`)");
    let provenance = std::fs::read_to_string(fixtures().join("README.md")).unwrap();
    assert!(
        provenance.contains(commit),
        "the fixtures come from {commit}: refresh them (docs/upgrading.md, 'Cutting a release')"
    );
}

/// The schema changes since the previous release: no field becomes
/// required (an object the previous release accepted would be refused),
/// and every field added or removed is named in CHANGELOG.md's Unreleased
/// section.
#[test]
fn no_field_becomes_required_and_every_schema_change_is_in_the_changelog() {
    let previous = read_crd_dir(&fixtures().join("crds")).unwrap();
    let current = read_crd_dir(&repo().join("crds")).unwrap();
    let changes = assetscan_chaos::upgrade::release::schema_changes(&previous, &current);
    assert!(
        changes.newly_required.is_empty(),
        "required now, not in the previous release: {:?}",
        changes.newly_required
    );
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let unreleased = changelog
        .split("\n## [")
        .find(|section| section.starts_with("Unreleased"))
        .unwrap();
    for path in changes.added.iter().chain(&changes.removed) {
        let field = path
            .rsplit(['.', ':'])
            .next()
            .unwrap()
            .trim_end_matches("[]");
        assert!(
            unreleased.contains(field),
            "{path} changed since the previous release: CHANGELOG.md's Unreleased section must name `{field}`"
        );
    }
}
