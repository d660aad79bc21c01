//! CRD compatibility with every release still supported (each release
//! CHANGELOG.md records by commit; `.ci/run` tests the upgrade from each),
//! without building them: each one's CRDs and objects its operator wrote,
//! kept as fixtures (fixtures/releases/<X.Y.Z>, see its README), validated
//! by the API emulator's admission (schema, pruning, CEL rules):
//! - every object a release wrote is valid under this tree's CRDs and
//!   loses no field there (a field this tree removed must not be in use);
//! - this tree's example manifests are valid under each release's CRDs (a
//!   new field must not be required there; fields it does not know are
//!   dropped, which a rollback loses, and listed);
//! - this tree still serves every CRD each release did;
//! - every schema change since the latest release is in CHANGELOG.md.
//!
//! `make upgrade-test` checks the same both ways on live objects, the
//! status this tree's operator writes included, and checks the fixtures
//! against the release's commit.

use assetscan_chaos::upgrade::release::{Version, released};
use assetscan_chaos::upgrade::validate::CrdValidator;
use assetscan_testkit::emulator::{parse_manifests, read_crd_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/releases")
}

fn changelog() -> String {
    std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap()
}

/// The releases kept as fixtures, newest first, each with its folder.
fn releases() -> Vec<(Version, PathBuf)> {
    let mut found: Vec<(Version, PathBuf)> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let version = name
                .parse()
                .unwrap_or_else(|e| panic!("fixtures/releases/{name}: {e}"));
            (version, path)
        })
        .collect();
    found.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    assert!(!found.is_empty(), "fixtures/releases holds no release");
    found
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
async fn objects_of_every_release_are_valid_under_this_trees_crds() {
    let crds = read_crd_dir(&repo().join("crds")).unwrap();
    let validator = CrdValidator::start("this tree's", crds).await.unwrap();
    for (version, dir) in releases() {
        let text = std::fs::read_to_string(dir.join("assetscans.json")).unwrap();
        let objects: Vec<Value> = serde_json::from_str(&text).unwrap();
        assert!(
            objects.len() >= 10,
            "the fixture of {version} holds the objects of a run"
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
                "{version}'s {name} refused under this tree's CRDs"
            );
            assert!(
                verdict.pruned.is_empty(),
                "{version}'s {name} loses {:?} under this tree's CRDs: a field still in use was removed",
                verdict.pruned
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_trees_manifests_are_valid_under_every_releases_crds() {
    for (version, dir) in releases() {
        let crds = read_crd_dir(&dir.join("crds")).unwrap();
        let validator = CrdValidator::start("a release's", crds).await.unwrap();
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
                    "{name} refused under {version}'s CRDs"
                );
                if !verdict.pruned.is_empty() {
                    println!("{name}: {version}'s CRDs drop {:?}", verdict.pruned);
                }
                checked += 1;
            }
        }
        assert!(checked >= 3, "the examples were read");
    }
}

#[test]
fn this_tree_serves_every_crd_of_every_release() {
    let current = names(&read_crd_dir(&repo().join("crds")).unwrap());
    for (version, dir) in releases() {
        for name in names(&read_crd_dir(&dir.join("crds")).unwrap()) {
            assert!(
                current.contains(&name),
                "{name} of {version} is gone from crds/"
            );
        }
    }
}

/// The releases kept are those CHANGELOG.md records by commit (the ones
/// `.ci/run` upgrades from), each from its commit (the README names it).
/// A release's own commit cannot name itself: until the next commit does,
/// its fixtures are not kept yet.
#[test]
fn the_fixtures_are_those_of_the_releases_the_changelog_names() {
    let recorded = released(&repo(), &repo().join("CHANGELOG.md")).unwrap();
    let kept: Vec<Version> = releases().into_iter().map(|(v, _)| v).collect();
    let named: Vec<Version> = recorded.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        kept, named,
        "fixtures/releases keeps the releases CHANGELOG.md names by commit (docs/upgrading.md, 'Cutting a release')"
    );
    let provenance = std::fs::read_to_string(fixtures().join("README.md")).unwrap();
    for (version, commit) in recorded {
        assert!(
            provenance.contains(commit.as_str()),
            "the fixtures of {version} come from {commit}: the README says so"
        );
    }
}

/// The schema changes since the latest release: no field becomes required
/// (an object it accepted would be refused), and every field added or
/// removed is named in CHANGELOG.md above that release's section (the
/// Unreleased section; and, in a release's own commit, its section).
#[test]
fn no_field_becomes_required_and_every_schema_change_is_in_the_changelog() {
    let (latest, dir) = releases().into_iter().next().unwrap();
    let previous = read_crd_dir(&dir.join("crds")).unwrap();
    let current = read_crd_dir(&repo().join("crds")).unwrap();
    let changes = assetscan_chaos::upgrade::release::schema_changes(&previous, &current);
    assert!(
        changes.newly_required.is_empty(),
        "required now, not in {latest}: {:?}",
        changes.newly_required
    );
    let changelog = changelog();
    let since = changelog.split(&format!("\n## [{latest}]")).next().unwrap();
    for path in changes.added.iter().chain(&changes.removed) {
        let field = path
            .rsplit(['.', ':'])
            .next()
            .unwrap()
            .trim_end_matches("[]");
        assert!(
            since.contains(field),
            "{path} changed since {latest}: CHANGELOG.md must name `{field}` above its section"
        );
    }
}
