//! The Helm chart, charts/assetscan-operator: `helm lint --strict` (which
//! also validates values against values.schema.json, so invalid values are
//! its business, not this file's), then `helm template` with the default
//! values and with value combinations (sharding, one watched namespace, the
//! Redis URL from a Secret, notifier secrets, the ServiceMonitor), the
//! rendered objects checked against what the operator needs: RBAC equal to
//! the API calls the controller makes, the environment of `run`, probes on
//! /healthz and /readyz, the security context, and a ConfigMap whose config
//! the operator's own parser accepts; the templates' own refusals (a grace
//! period shorter than the lock ttl, no Redis) are checked here too.
//!
//! Needs a real helm (v4): on PATH, or at target/tools/helm, where
//! `scripts/ensure-helm.sh` puts it (the test runs the script when neither is
//! there).
//!
//!   cargo test --all-features --test chart

use assetscan_operator::cli::config::Config;
use assetscan_operator::providers::{Providers, install_crypto_provider};
use assetscan_operator::store::RedisTarget;
use assetscan_testkit::tools::{self, run_helm};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

const RELEASE: &str = "scan";
const NAMESPACE: &str = "secops";
/// `<release>-<chart>`.
const FULLNAME: &str = "scan-assetscan-operator";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("charts").join("assetscan-operator")
}

/// The default Redis has no password: the chart refuses it unless told
/// (`redis_without_a_password_is_refused_unless_allowed`). The tests of
/// everything else allow it.
const ALLOW_NO_REDIS_PASSWORD: [&str; 2] = ["--set", "redis.allowUnauthenticated=true"];

/// Renders the chart; `extra` are helm flags (`--set k=v`, ...).
fn try_render(extra: &[&str]) -> Result<Vec<Value>, String> {
    let flags = [&ALLOW_NO_REDIS_PASSWORD[..], extra].concat();
    tools::template(RELEASE, &chart(), NAMESPACE, &flags)
}

#[test]
fn redis_without_a_password_is_refused_unless_allowed() {
    let plain = |extra: &[&str]| tools::template(RELEASE, &chart(), NAMESPACE, extra);
    for extra in [
        &[][..],
        &["--set", "redis.url=redis://app@redis:6379"][..],
        &["--set", "redis.allowUnauthenticated=false"][..],
    ] {
        let refusal = plain(extra)
            .err()
            .unwrap_or_else(|| panic!("{extra:?}: rendered without a Redis password"));
        assert!(
            refusal.contains("Redis without a password")
                && refusal.contains("redis.allowUnauthenticated"),
            "{extra:?}: {refusal}"
        );
    }
    for allowed in [
        &["--set", "redis.allowUnauthenticated=true"][..],
        &["--set", "redis.password.existingSecret=redis-password"][..],
        &["--set", "redis.existingSecret=redis-url"][..],
        &["--set", "redis.url=redis://app:s3cret@redis:6379"][..],
        &[
            "--set",
            "redis.url=",
            "--set",
            "config.redis.url=rediss://:pw@redis:6380",
        ][..],
    ] {
        if let Err(e) = plain(allowed) {
            panic!("{allowed:?} has a password or allows none: {e}");
        }
    }
}

fn render(extra: &[&str]) -> Rendered {
    Rendered(try_render(extra).unwrap_or_else(|e| panic!("helm template {extra:?} failed:\n{e}")))
}

/// Renders with `extra` and expects a refusal that mentions `needle`.
fn refused(extra: &[&str], needle: &str) {
    match try_render(extra) {
        Ok(_) => panic!("helm template {extra:?} should have been refused"),
        Err(e) => assert!(
            e.contains(needle),
            "helm template {extra:?}: expected {needle:?} in:\n{e}"
        ),
    }
}

struct Rendered(Vec<Value>);

impl Rendered {
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.0
            .iter()
            .filter(|d| d["kind"].as_str() == Some(kind))
            .collect()
    }

    fn kinds(&self) -> BTreeSet<String> {
        self.0
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn get(&self, kind: &str, name: &str) -> &Value {
        self.0
            .iter()
            .find(|d| {
                d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name)
            })
            .unwrap_or_else(|| panic!("no {kind} {name} among {:?}", self.names()))
    }

    fn has(&self, kind: &str, name: &str) -> bool {
        self.0.iter().any(|d| {
            d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name)
        })
    }

    fn names(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|d| {
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap_or("?"),
                    d["metadata"]["name"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }

    /// The Deployment, or the StatefulSet when sharding is on.
    fn workload(&self) -> &Value {
        let mut workloads: Vec<&Value> = self.all("Deployment");
        workloads.extend(self.all("StatefulSet"));
        assert_eq!(
            workloads.len(),
            1,
            "one workload expected: {:?}",
            self.names()
        );
        workloads[0]
    }

    fn pod(&self) -> &Value {
        &self.workload()["spec"]["template"]
    }

    fn container(&self) -> &Value {
        let containers = self.pod()["spec"]["containers"]
            .as_array()
            .expect("containers");
        assert_eq!(containers.len(), 1);
        &containers[0]
    }

    fn env(&self) -> BTreeMap<String, Value> {
        self.container()["env"]
            .as_array()
            .expect("env")
            .iter()
            .map(|e| (e["name"].as_str().unwrap().to_owned(), e.clone()))
            .collect()
    }

    fn env_value(&self, name: &str) -> Option<String> {
        self.env()
            .get(name)
            .and_then(|e| e["value"].as_str().map(str::to_owned))
    }

    fn config_text(&self) -> String {
        let cm = self.get("ConfigMap", &format!("{FULLNAME}-config"));
        cm["data"]["config.yaml"]
            .as_str()
            .expect("config.yaml in the ConfigMap")
            .to_owned()
    }

    fn config(&self) -> Config {
        let text = self.config_text();
        Config::parse(&text, Path::new("ConfigMap config.yaml"))
            .unwrap_or_else(|e| panic!("the operator rejects the rendered config: {e}\n{text}"))
    }
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v:?}"))
        .iter()
        .map(|x| s(x).to_owned())
        .collect()
}

fn yaml(text: &str) -> Value {
    assetscan_operator::yaml::from_str(text).unwrap()
}

/// (apiGroup, resource) -> verbs, from a Role's or ClusterRole's rules.
fn grants(role: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in role["rules"].as_array().expect("rules") {
        assert!(rule["resourceNames"].is_null() && rule["nonResourceURLs"].is_null());
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                out.entry((group.clone(), resource))
                    .or_default()
                    .extend(strings(&rule["verbs"]));
            }
        }
    }
    out
}

/// What the operator's code uses (`src/kubernetes/rbac.rs`), and nothing more,
/// by default: the controller's calls and the channel objects' (the
/// cluster's too, watching every namespace).
fn controller_grants() -> BTreeMap<(String, String), BTreeSet<String>> {
    use assetscan_operator::kubernetes::rbac::{CLUSTER_CHANNELS_ACCESS, OPERATOR_ACCESS};
    let teams = assetscan_operator::kubernetes::rbac::TEAM_CHANNELS_ACCESS;
    grants_of(
        (OPERATOR_ACCESS.iter())
            .chain(teams)
            .chain(CLUSTER_CHANNELS_ACCESS),
    )
}

/// What the operator's code uses watching one namespace: no cluster
/// channel.
fn namespaced_grants() -> BTreeMap<(String, String), BTreeSet<String>> {
    use assetscan_operator::kubernetes::rbac::{OPERATOR_ACCESS, TEAM_CHANNELS_ACCESS};
    grants_of(OPERATOR_ACCESS.iter().chain(TEAM_CHANNELS_ACCESS))
}

/// The controller's calls alone (`config.teamChannels.enabled=false`).
fn grants_without_team_channels() -> BTreeMap<(String, String), BTreeSet<String>> {
    grants_of(assetscan_operator::kubernetes::rbac::OPERATOR_ACCESS.iter())
}

fn grants_of<'a>(
    accesses: impl Iterator<Item = &'a assetscan_operator::kubernetes::rbac::ApiAccess>,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for access in accesses {
        out.entry((access.group.to_owned(), access.resource.to_owned()))
            .or_default()
            .extend(access.verbs.iter().map(|v| (*v).to_owned()));
    }
    out
}

/// Environment variables the `run` subcommand reads (`env = "..."` in src/cli).
fn cli_env_vars() -> BTreeSet<String> {
    let pattern = regex::Regex::new(r#"env = "([A-Z0-9_]+)""#).unwrap();
    let mut names = BTreeSet::new();
    for file in ["src/cli/mod.rs", "src/cli/metrics_serving.rs"] {
        let source = std::fs::read_to_string(root().join(file)).unwrap();
        names.extend(pattern.captures_iter(&source).map(|c| c[1].to_owned()));
    }
    names
}

fn binding_names(r: &Rendered) -> Vec<String> {
    let mut names: Vec<String> = r
        .all("ClusterRoleBinding")
        .iter()
        .map(|b| s(&b["metadata"]["name"]).to_owned())
        .collect();
    names.sort();
    names
}

mod access;
mod options;
mod pod;
