//! The previous release as the repository records it: the commit the
//! latest release section of CHANGELOG.md names, what its operator
//! understands (by its version), its Lua scripts compared with this
//! tree's, and its CRDs compared with the copy kept as test fixtures.
//! Nothing here needs a git tag.

use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;

/// A release's number, `X.Y.Z`, as a CHANGELOG.md section names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl FromStr for Version {
    type Err = String;

    fn from_str(text: &str) -> Result<Version, String> {
        let parts: Vec<u64> = text
            .split('.')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("release {text:?}: {e}"))?;
        match parts[..] {
            [major, minor, patch] => Ok(Version {
                major,
                minor,
                patch,
            }),
            _ => Err(format!("release {text:?}: not X.Y.Z")),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The first release with namespaced keys, `channelAccess`, SBOM sources
/// and Standard Webhooks signatures (the next after 0.1.0).
const NAMESPACED: Version = Version {
    major: 0,
    minor: 2,
    patch: 0,
};

/// What a release's operator understands where releases differ: its
/// configuration refuses keys it does not know (so the harness writes each
/// release its own), and its webhook signs as it was built to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Understands {
    /// `channelAccess` (and the cluster-wide default of a channel not
    /// listed: open to no namespace).
    pub channel_access: bool,
    /// `providers.sbomSources`.
    pub sbom_sources: bool,
    /// The webhook's `whsec_` secret and Standard Webhooks signature, and
    /// its keys `additionalSecretsFrom`, `legacySignature`,
    /// `legacySecretFrom`; without: `X-AssetScan-Signature` keyed with the
    /// secret's text, alone.
    pub standard_webhooks: bool,
    /// Locks named by namespace and asset id; without, by asset id alone,
    /// so that this tree needs the identity bridge to exclude it.
    pub namespaced_keys: bool,
}

impl Understands {
    /// This tree's operator.
    pub const CURRENT: Understands = Understands {
        channel_access: true,
        sbom_sources: true,
        standard_webhooks: true,
        namespaced_keys: true,
    };

    /// The operator of release `version`: 0.1.0's knows none of it, any
    /// from 0.2.0 on (this tree's code when it is cut) all of it.
    pub fn release(version: Version) -> Understands {
        let since = version >= NAMESPACED;
        Understands {
            channel_access: since,
            sbom_sources: since,
            standard_webhooks: since,
            namespaced_keys: since,
        }
    }
}

/// The releases the CHANGELOG at `changelog` records by commit, newest
/// first: each `## [X.Y.Z]` section with a `Commit: <40 hex>` line, as
/// `scripts/upgrade-test.sh releases` (of the tree at `repo`) reads them,
/// which `.ci/run` upgrades from. The script is the one reader, so the
/// releases kept and the releases upgraded from cannot disagree. A
/// release's own commit cannot name itself: until the next commit does, its
/// section is not among them.
pub fn released(repo: &Path, changelog: &Path) -> Result<Vec<(Version, String)>, String> {
    let out = Command::new("bash")
        .arg(repo.join("scripts/upgrade-test.sh"))
        .arg("releases")
        .env("CHANGELOG", changelog)
        .output()
        .map_err(|e| format!("scripts/upgrade-test.sh releases: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "scripts/upgrade-test.sh releases: {}: {stderr}",
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    (stdout.lines())
        .map(|line| {
            let (version, commit) = line
                .split_once(' ')
                .ok_or_else(|| format!("scripts/upgrade-test.sh releases said {line:?}"))?;
            Ok((version.parse()?, commit.to_owned()))
        })
        .collect()
}

/// How the Lua scripts of two trees differ, file by file (`lua/*.lua`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ScriptChanges {
    pub changed: Vec<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
}

impl ScriptChanges {
    pub fn none(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

fn scripts(dir: &Path) -> std::io::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".lua") {
            names.insert(name);
        }
    }
    Ok(names)
}

/// Compares `previous/lua` with `current/lua`.
pub fn script_changes(previous: &Path, current: &Path) -> std::io::Result<ScriptChanges> {
    let (old_dir, new_dir) = (previous.join("lua"), current.join("lua"));
    let (old, new) = (scripts(&old_dir)?, scripts(&new_dir)?);
    let mut changes = ScriptChanges {
        added: new.difference(&old).cloned().collect(),
        removed: old.difference(&new).cloned().collect(),
        ..ScriptChanges::default()
    };
    for name in old.intersection(&new) {
        if std::fs::read(old_dir.join(name))? != std::fs::read(new_dir.join(name))? {
            changes.changed.push(name.clone());
        }
    }
    Ok(changes)
}

/// `git show <commit>:<path>` in `repo`, when the history is there (a
/// shallow clone may not have it: `None`).
pub fn file_at(repo: &Path, commit: &str, path: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["show", &format!("{commit}:{path}")])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How the schemas of two CRD sets differ, as paths
/// (`<crd>/<version>:spec.policy.cvssThreshold`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SchemaChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Required in the newer set, not in the older one, inside an object the
    /// older set had: a required field of a newly added optional object
    /// asks nothing of the objects written before it.
    pub newly_required: Vec<String>,
}

/// Every property path of a CRD set's schemas, and which are required.
fn properties(crds: &[Value]) -> (BTreeSet<String>, BTreeSet<String>) {
    fn walk(
        path: &str,
        schema: &Value,
        all: &mut BTreeSet<String>,
        required: &mut BTreeSet<String>,
    ) {
        if !schema.is_object() {
            return;
        }
        for name in schema["required"].as_array().into_iter().flatten() {
            if let Some(name) = name.as_str() {
                required.insert(format!("{path}.{name}"));
            }
        }
        for (name, child) in schema["properties"].as_object().into_iter().flatten() {
            let here = format!("{path}.{name}");
            all.insert(here.clone());
            walk(&here, child, all, required);
        }
        walk(&format!("{path}[]"), &schema["items"], all, required);
    }
    let (mut all, mut required) = (BTreeSet::new(), BTreeSet::new());
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            let root = format!("{name}/{}:", version["name"].as_str().unwrap_or_default());
            walk(
                &root,
                &version["schema"]["openAPIV3Schema"],
                &mut all,
                &mut required,
            );
        }
    }
    (all, required)
}

/// What changed from `previous` to `current`.
pub fn schema_changes(previous: &[Value], current: &[Value]) -> SchemaChanges {
    let (old, old_required) = properties(previous);
    let (new, new_required) = properties(current);
    let clean = |set: Vec<&String>| set.into_iter().map(|p| p.replacen(":.", ":", 1)).collect();
    SchemaChanges {
        added: clean(new.difference(&old).collect()),
        removed: clean(old.difference(&new).collect()),
        newly_required: clean(
            new_required
                .difference(&old_required)
                .filter(|path| in_older_object(path, &old))
                .collect(),
        ),
    }
}

/// Whether the object holding `path` (`<crd>/<version>:spec.sbom.ref` is held
/// by `…:spec.sbom`) is in `older`; the schema's root is, when `older` has
/// that CRD version at all (a new CRD has no objects to refuse).
fn in_older_object(path: &str, older: &BTreeSet<String>) -> bool {
    match path.rsplit_once('.') {
        Some((root, _)) if root.ends_with(':') => older.iter().any(|p| p.starts_with(root)),
        Some((parent, _)) => older.contains(parent),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_releases_are_the_sections_that_name_their_commit() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = tempfile::tempdir().unwrap();
        let read = |text: &str| {
            let path = dir.path().join("CHANGELOG.md");
            std::fs::write(&path, text).unwrap();
            released(&repo, &path).unwrap()
        };
        let text = "## [Unreleased]\n\nCommit: eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\n\n## [0.3.0] - 2027-02-01\n\n### Added\n\n## [0.2.0] - 2027-01-01\n\nCommit: 0123456789abcdef0123456789abcdef01234567\n\n## [0.1.0]\n\nCommit: ffffffffffffffffffffffffffffffffffffffff\n";
        let v = |s: &str| s.parse::<Version>().unwrap();
        assert_eq!(
            read(text),
            vec![
                (
                    v("0.2.0"),
                    "0123456789abcdef0123456789abcdef01234567".to_owned()
                ),
                (
                    v("0.1.0"),
                    "ffffffffffffffffffffffffffffffffffffffff".to_owned()
                ),
            ]
        );
        assert_eq!(
            read("## [0.1.0]\nCommit: not-hex-at-all-and-long-enough-to-be-forty"),
            vec![]
        );
        assert_eq!(
            read("## [0.1.0]\nCommit: 0123456789abcdef"),
            vec![],
            "too short"
        );
        assert_eq!(read("## [Unreleased]\n"), vec![]);
    }

    #[test]
    fn a_release_understands_what_its_version_brought() {
        let v010: Version = "0.1.0".parse().unwrap();
        assert_eq!(v010.to_string(), "0.1.0");
        assert!(!Understands::release(v010).channel_access);
        assert!(!Understands::release(v010).standard_webhooks);
        assert_eq!(
            Understands::release("0.2.0".parse().unwrap()),
            Understands::CURRENT
        );
        assert_eq!(
            Understands::release("1.0.3".parse().unwrap()),
            Understands::CURRENT
        );
        assert!("0.1".parse::<Version>().is_err());
        assert!("0.x.1".parse::<Version>().is_err());
    }

    #[test]
    fn script_changes_name_each_file() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for dir in [a.path(), b.path()] {
            std::fs::create_dir(dir.join("lua")).unwrap();
            std::fs::write(dir.join("lua/same.lua"), "return 1").unwrap();
        }
        assert!(script_changes(a.path(), b.path()).unwrap().none());
        std::fs::write(b.path().join("lua/same.lua"), "return 2").unwrap();
        std::fs::write(b.path().join("lua/new.lua"), "return 3").unwrap();
        let changes = script_changes(a.path(), b.path()).unwrap();
        assert_eq!(changes.changed, vec!["same.lua"]);
        assert_eq!(changes.added, vec!["new.lua"]);
        assert!(changes.removed.is_empty());
    }

    #[test]
    fn schema_changes_name_added_removed_and_required_fields() {
        let crd = |spec: Value| {
            serde_json::json!({"metadata": {"name": "a.x"}, "spec": {"versions": [{"name": "v1",
                "schema": {"openAPIV3Schema": {"properties": {"spec": spec}}}}]}})
        };
        let old = crd(
            serde_json::json!({"properties": {"a": {}, "b": {"items": {"properties": {"c": {}}}}}}),
        );
        let new = crd(
            serde_json::json!({"required": ["d"], "properties": {"a": {}, "b": {}, "d": {},
            "e": {"required": ["f"], "properties": {"f": {}}}}}),
        );
        let changes = schema_changes(std::slice::from_ref(&old), &[new]);
        assert_eq!(
            changes.added,
            vec!["a.x/v1:spec.d", "a.x/v1:spec.e", "a.x/v1:spec.e.f"]
        );
        assert_eq!(changes.removed, vec!["a.x/v1:spec.b[].c"]);
        assert_eq!(changes.newly_required, vec!["a.x/v1:spec.d"]);

        // A new CRD's required fields ask nothing of objects written before:
        // there are none. Its fields are added all the same.
        let mut other = crd(serde_json::json!({"required": ["g"], "properties": {"g": {}}}));
        other["metadata"]["name"] = serde_json::json!("b.x");
        let fresh = crd(
            serde_json::json!({"properties": {"a": {}, "b": {"items": {"properties": {"c": {}}}}}}),
        );
        let changes = schema_changes(&[old], &[fresh, other]);
        assert_eq!(changes.added, vec!["b.x/v1:spec", "b.x/v1:spec.g"]);
        assert!(
            changes.newly_required.is_empty(),
            "{:?}",
            changes.newly_required
        );
    }
}
