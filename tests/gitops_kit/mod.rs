//! What tests/gitops.rs shares: the chart and Argo CD paths, helm, promtool
//! and the Lua interpreters (found, or installed by their scripts), rendering the chart,
//! running the health scripts, the operator's exported metrics with a
//! PromQL checker, and a real operator process.

pub mod lua;
pub mod process;
pub mod promql;

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
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
    let value: serde_yaml::Value = serde_yaml::from_str(&read(path))
        .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
    serde_json::to_value(value).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------
// Tools: helm, promtool and the Lua interpreters, found or installed by
// their scripts.

/// `name` on PATH or in target/tools, else what `script` installs.
fn tool(name: &str, script: &str) -> PathBuf {
    let find = || {
        let on_path = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        });
        on_path.or_else(|| {
            let local = root().join("target").join("tools").join(name);
            local.is_file().then_some(local)
        })
    };
    if let Some(found) = find() {
        return found;
    }
    let status = Command::new("bash")
        .arg(root().join("scripts").join(script))
        .current_dir(root())
        .status();
    match (status, find()) {
        (Ok(s), Some(found)) if s.success() => found,
        (status, _) => {
            panic!("{name} is needed and scripts/{script} could not install it ({status:?})")
        }
    }
}

pub fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| tool("helm", "ensure-helm.sh"))
}

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

pub fn run_helm(args: &[&str]) -> Result<String, String> {
    let out = Command::new(helm())
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", helm().display()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// `helm template` of the chart with `extra` flags: its documents.
pub fn try_render(extra: &[&str]) -> Result<Rendered, String> {
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().unwrap(),
        "--namespace",
        NAMESPACE,
    ];
    args.extend_from_slice(extra);
    let text = run_helm(&args)?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("helm rendered invalid YAML: {e}\n{text}"));
        if !value.is_null() {
            docs.push(serde_json::to_value(value).unwrap());
        }
    }
    Ok(Rendered(docs))
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
