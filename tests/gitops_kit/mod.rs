//! What tests/gitops/ shares: the chart and Argo CD paths, helm, promtool
//! and the Lua interpreters (found, or installed by their scripts), rendering the chart,
//! running the health scripts, the operator's exported metrics with a
//! PromQL checker, and a real operator process.

pub mod lua;
pub mod process;
pub mod promql;

use assetscan_operator::yaml;
pub use assetscan_testkit::tools::run_helm;
use assetscan_testkit::tools::{self, tool};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub const RELEASE: &str = "scan";
pub const NAMESPACE: &str = "secops";
/// `<release>-<chart>`.
pub const FULLNAME: &str = "scan-assetscan-operator";

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn chart() -> PathBuf {
    root().join("charts").join("assetscan-operator")
}

pub fn customizations() -> PathBuf {
    root()
        .join("deploy")
        .join("argocd")
        .join("resource_customizations")
        .join("assetscan.io")
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub fn yaml_file(path: &Path) -> Value {
    yaml::from_str(&read(path)).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Tools: promtool and the Lua interpreters, found or installed by their
// scripts (helm: `assetscan_testkit::tools`).

/// The interpreters the health scripts must run under: Lua 5.4, and Lua 5.1,
/// the language of Argo CD's embedded interpreter.
pub fn luas() -> &'static [PathBuf] {
    static LUAS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    LUAS.get_or_init(|| {
        ["lua5.4", "lua5.1"]
            .iter()
            .map(|name| tool(name, "ensure-lua.sh"))
            .collect()
    })
}

/// Prometheus' rule checker and alerting unit-test runner.
pub fn promtool() -> &'static Path {
    static PROMTOOL: OnceLock<PathBuf> = OnceLock::new();
    PROMTOOL.get_or_init(|| tool("promtool", "ensure-promtool.sh"))
}

/// `helm template` of the chart with `extra` flags: its documents. The
/// default Redis has no password, which the chart refuses unless told
/// (tests/chart/); these renders allow it.
pub fn try_render(extra: &[&str]) -> Result<Rendered, String> {
    let flags = [&["--set", "redis.allowUnauthenticated=true"][..], extra].concat();
    Ok(Rendered(tools::template(
        RELEASE,
        &chart(),
        NAMESPACE,
        &flags,
    )?))
}

pub fn render(extra: &[&str]) -> Rendered {
    try_render(extra).unwrap_or_else(|e| panic!("helm template {extra:?} failed:\n{e}"))
}

pub struct Rendered(Vec<Value>);

impl Rendered {
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.0.iter().filter(|d| d["kind"] == kind).collect()
    }

    pub fn one(&self, kind: &str) -> &Value {
        match self.all(kind)[..] {
            [doc] => doc,
            ref docs => panic!("one {kind} expected, found {}", docs.len()),
        }
    }

    pub fn get(&self, kind: &str, name: &str) -> &Value {
        self.0
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    pub fn kinds(&self) -> BTreeSet<String> {
        self.0
            .iter()
            .filter_map(|d| d["kind"].as_str().map(str::to_owned))
            .collect()
    }
}

pub fn matches(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .expect("a label selector")
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}
