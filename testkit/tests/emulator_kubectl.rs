//! The machine's real `kubectl` against the emulator, through the generated
//! kubeconfig: `get` (server-side tables with the CRD's printer columns),
//! `get -o yaml`, client-side and server-side `apply -f`, validation errors
//! as users see them, registering a CRD with `apply`, and `delete -f`.
//! kubectl is the one on PATH, else the one `scripts/ensure-helm.sh`
//! installs: never skipped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

mod common;
use common::{CRD, merge_patch_status};

struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    async fn run(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::process::Command::new(assetscan_testkit::tools::kubectl())
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .arg("--cache-dir")
                .arg(&self.cache)
                .args(args)
                .env_remove("KUBECONFIG")
                .output(),
        )
        .await
        .expect("kubectl finishes")
        .expect("kubectl runs");
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// Runs a command that must fail; its error output.
    /// Runs kubectl, which must fail saying `words`.
    async fn fails_saying(&self, args: &[&str], words: &str) {
        let out = self.run(args).await;
        assert!(!out.ok, "kubectl {args:?} succeeded: {}", out.stdout);
        assert!(out.stderr.contains(words), "{}", out.stderr);
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write manifest");
    path.display().to_string()
}

/// The fixture scan as `<name>.yaml` in `dir`, named `name`, with `edits`
/// (text replacements) made to its manifest.
fn scan_manifest(dir: &Path, name: &str, edits: &[(&str, &str)]) -> String {
    let text = edits
        .iter()
        .fold(SCAN.replace("web", name), |text, (from, to)| {
            text.replace(from, to)
        });
    write(dir, &format!("{name}.yaml"), &text)
}

const SCAN: &str = "apiVersion: example.com/v1
kind: AssetScan
metadata:
  name: web
spec:
  target:
    host: example.org
";

/// The emulator with the fixture CRD, and the machine's kubectl on it.
struct Session {
    emu: Emulator,
    api: Api<DynamicObject>,
    dir: tempfile::TempDir,
    kubectl: Kubectl,
}

async fn session() -> Session {
    let (emu, api) = common::start(EmulatorOptions::default()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let kubectl = Kubectl {
        kubeconfig,
        cache: dir.path().join("cache"),
    };
    Session {
        emu,
        api,
        dir,
        kubectl,
    }
}

/// Client-side apply creates, then patches, then finds nothing to do;
/// `-o yaml` shows the stored object with defaults, server fields and
/// status; `delete -f` removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_get_yaml_and_delete() {
    let s = session().await;
    let scan = write(s.dir.path(), "scan.yaml", SCAN);
    assert_eq!(
        s.kubectl.ok(&["apply", "-f", &scan]).await.trim(),
        "assetscan.example.com/web created"
    );
    let changed = write(
        s.dir.path(),
        "scan.yaml",
        &format!("{SCAN}    port: 8443\n"),
    );
    assert_eq!(
        s.kubectl.ok(&["apply", "-f", &changed]).await.trim(),
        "assetscan.example.com/web configured"
    );
    assert_eq!(
        s.kubectl.ok(&["apply", "-f", &changed]).await.trim(),
        "assetscan.example.com/web unchanged"
    );
    let status = json!({"status": {"phase": "FINISHED", "fencingToken": 3, "revision": 1}});
    merge_patch_status(&s.api, "web", status)
        .await
        .expect("status");
    let yaml = s
        .kubectl
        .ok(&["get", "assetscan", "web", "-o", "yaml"])
        .await;
    let obj: Value = assetscan_testkit::yaml::from_str(&yaml).expect("yaml");
    assert_eq!(obj["spec"]["target"]["port"], 8443);
    assert_eq!(obj["spec"]["threatIntel"], "WhenNeeded", "schema default");
    assert_eq!(obj["metadata"]["generation"], 2);
    assert_eq!(obj["status"]["phase"], "FINISHED");
    assert!(
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    assert_eq!(
        s.kubectl.ok(&["delete", "-f", &changed]).await.trim(),
        "assetscan.example.com \"web\" deleted"
    );
    s.kubectl
        .fails_saying(
            &["get", "assetscan", "web"],
            "assetscans.example.com \"web\" not found",
        )
        .await;
}

/// Server-side table with the CRD's printer columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_the_crds_printer_columns() {
    let s = session().await;
    let scan = write(s.dir.path(), "scan.yaml", SCAN);
    s.kubectl.ok(&["apply", "-f", &scan]).await;
    let status = json!({"status": {"phase": "FINISHED", "fencingToken": 3, "revision": 1,
        "conditions": [{"type": "Ready", "status": "True"}]}});
    merge_patch_status(&s.api, "web", status)
        .await
        .expect("status");
    let table = s.kubectl.ok(&["get", "assetscans"]).await;
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        vec!["NAME", "PHASE", "READY", "TOKEN", "AGE"],
        "{table}"
    );
    assert_eq!(&lines[1][..4], &["web", "FINISHED", "True", "3"], "{table}");
    assert!(
        s.kubectl
            .ok(&["get", "ascan", "-A"])
            .await
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("default"))
    );
}

/// Errors read the way they do against a real cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_read_as_against_a_real_cluster() {
    let s = session().await;
    let bad = scan_manifest(
        s.dir.path(),
        "bad",
        &[("example.org", "example.org\n    port: 70000")],
    );
    let too_big = "The AssetScan \"bad\" is invalid: spec.target.port: Invalid value: 70000: spec.target.port in body should be less than or equal to 65535";
    s.kubectl
        .fails_saying(&["apply", "-f", &bad], too_big)
        .await;
    let unknown = scan_manifest(
        s.dir.path(),
        "unknown",
        &[("spec:\n", "spec:\n  bogus: 1\n")],
    );
    s.kubectl
        .fails_saying(
            &["apply", "-f", &unknown],
            "strict decoding error: unknown field \"spec.bogus\"",
        )
        .await;
}

/// Server-side apply: the object created, with kubectl as its manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_records_its_manager() {
    let s = session().await;
    let ssa = scan_manifest(s.dir.path(), "ssa", &[]);
    assert_eq!(
        s.kubectl
            .ok(&["apply", "--server-side", "-f", &ssa])
            .await
            .trim(),
        "assetscan.example.com/ssa serverside-applied"
    );
    let ssa_obj = s
        .emu
        .object("assetscans", Some("default"), "ssa")
        .expect("created");
    assert_eq!(
        ssa_obj["metadata"]["managedFields"][0]["manager"],
        "kubectl"
    );
    assert_eq!(
        ssa_obj["metadata"]["managedFields"][0]["operation"],
        "Apply"
    );
}

/// A CRD registered with kubectl apply is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_applied_is_served_at_once() {
    let s = session().await;
    let widget_crd = write(
        s.dir.path(),
        "widgets.yaml",
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
",
    );
    assert_eq!(
        s.kubectl.ok(&["apply", "-f", &widget_crd]).await.trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
    );
    let widget = write(
        s.dir.path(),
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n",
    );
    assert_eq!(
        s.kubectl.ok(&["apply", "-f", &widget]).await.trim(),
        "widget.example.com/w created"
    );
    assert!(
        s.kubectl
            .ok(&["get", "widgets"])
            .await
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("w "))
    );
}

/// The standalone binary: ready line, kubeconfig, request counters, an
/// outage by signal, SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_until_sigterm() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let crds = dir.path().join("crds");
    std::fs::create_dir(&crds).expect("mkdir");
    std::fs::write(crds.join("assetscans.yaml"), CRD).expect("crd");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-emulator"))
        .args(["--port", "0", "--crds"])
        .arg(&crds)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kube-emulator");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("ready line in time")
        .expect("read")
        .expect("a line");
    assert!(
        ready.starts_with("kube-emulator listening on http://127.0.0.1:"),
        "{ready}"
    );

    let kubectl = Kubectl {
        kubeconfig,
        cache: dir.path().join("cache"),
    };
    let crd_list = kubectl.ok(&["get", "crd"]).await;
    assert!(crd_list.contains("assetscans.example.com"), "{crd_list}");
    assert!(
        kubectl
            .ok(&["get", "namespaces"])
            .await
            .contains("kube-system")
    );

    let counters = kubectl.ok(&["get", "--raw", "/emulator/requests"]).await;
    assert!(
        counters.contains(r#""resource":"customresourcedefinitions","verb":"list""#),
        "{counters}"
    );

    let pid = child.id().expect("running").to_string();
    let signal = |name: &'static str| {
        let pid = pid.clone();
        async move {
            let sent = tokio::process::Command::new("kill")
                .args([name, &pid])
                .status()
                .await
                .expect("kill runs");
            assert!(sent.success());
        }
    };
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
            .expect("a line")
    };
    // SIGUSR1: an outage until SIGUSR2.
    signal("-USR1").await;
    assert_eq!(next_line().await, "kube-emulator down");
    let refused = kubectl.run(&["get", "namespaces"]).await;
    assert!(!refused.ok, "served during the outage: {}", refused.stdout);
    assert!(refused.stderr.contains("refused"), "{}", refused.stderr);
    signal("-USR2").await;
    assert_eq!(next_line().await, "kube-emulator serving");
    assert!(
        kubectl
            .ok(&["get", "namespaces"])
            .await
            .contains("kube-system")
    );

    signal("-TERM").await;
    let status = tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .expect("exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "clean exit: {status:?}");
}
