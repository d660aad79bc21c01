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

/// What the operator's code uses (`src/kubernetes/rbac.rs`), and nothing more.
fn controller_grants() -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for access in assetscan_operator::kubernetes::rbac::OPERATOR_ACCESS {
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

// ---------------------------------------------------------------------------

/// The chart's `crds/` holds exactly the generated CRDs, as generated.
#[test]
fn chart_crds_are_copies_of_the_generated_crds() {
    let names = |dir: PathBuf| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let generated = names(root().join("crds"));
    assert_eq!(
        names(chart().join("crds")),
        generated,
        "the chart's crds/ holds exactly the generated CRDs: `make crds`"
    );
    for name in &generated {
        let source = root().join("crds").join(name);
        let copy = chart().join("crds").join(name);
        assert!(
            std::fs::read_to_string(&copy).unwrap() == std::fs::read_to_string(&source).unwrap(),
            "{} differs from {}; copy it: `make crds`",
            copy.display(),
            source.display()
        );
    }
}

/// The chart ships this crate's version, for a cluster that has what the
/// CRD's rules need (CEL transition rules with messages: 1.30).
#[test]
fn chart_follows_the_crate_and_its_kubernetes_requirement() {
    let meta = yaml(&std::fs::read_to_string(chart().join("Chart.yaml")).unwrap());
    assert_eq!(
        s(&meta["appVersion"]),
        env!("CARGO_PKG_VERSION"),
        "appVersion follows the crate"
    );
    assert_eq!(s(&meta["kubeVersion"]), ">=1.28.0-0");
    render(&["--kube-version", "1.28.0"]);
    refused(&["--kube-version", "1.27.9"], "kubeVersion");
}

#[test]
fn chart_passes_helm_lint_strict() {
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let allow = ALLOW_NO_REDIS_PASSWORD;
    if let Err(e) = run_helm(&[&["lint", "--strict", chart][..], &allow].concat()) {
        panic!("helm lint --strict failed:\n{e}");
    }
    // The value files of ci/ (as chart-testing uses them).
    for entry in std::fs::read_dir(Path::new(chart).join("ci")).unwrap() {
        let values = entry.unwrap().path();
        if values.extension().is_none_or(|ext| ext != "yaml") {
            continue;
        }
        let values = values.to_str().unwrap();
        if let Err(e) = run_helm(&["lint", "--strict", chart, "-f", values]) {
            panic!("helm lint --strict -f {values} failed:\n{e}");
        }
    }
    for combo in [
        &["--set", "sharding.enabled=true", "--set", "replicas=3"][..],
        &[
            "--set",
            "watchNamespace=scans",
            "--set",
            "redis.existingSecret=redis",
        ][..],
        &["--set", "metrics.serviceMonitor.enabled=true"][..],
    ] {
        let mut args = vec!["lint", "--strict", chart];
        args.extend_from_slice(&allow);
        args.extend_from_slice(combo);
        if let Err(e) = run_helm(&args) {
            panic!("helm lint --strict {combo:?} failed:\n{e}");
        }
    }
}

#[test]
fn default_values_render_an_active_active_deployment() {
    let r = render(&[]);
    let expected: BTreeSet<String> = [
        "ServiceAccount",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        // The `helm test` hook.
        "Pod",
    ]
    .map(String::from)
    .into();
    assert_eq!(r.kinds(), expected, "{:?}", r.names());

    let deploy = r.get("Deployment", FULLNAME);
    assert_eq!(deploy["metadata"]["namespace"].as_str(), Some(NAMESPACE));
    assert_eq!(deploy["spec"]["replicas"].as_u64(), Some(2));
    let selector = &deploy["spec"]["selector"]["matchLabels"];
    let pod_labels = r.pod()["metadata"]["labels"].as_object().unwrap();
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(pod_labels.get(k), Some(v), "pod labels carry the selector");
    }
    let spec = &r.pod()["spec"];
    assert_eq!(s(&spec["serviceAccountName"]), FULLNAME);
    assert_eq!(spec["automountServiceAccountToken"].as_bool(), Some(true));
    assert_eq!(spec["enableServiceLinks"].as_bool(), Some(false));
    assert!(r.has("ServiceAccount", FULLNAME));

    let c = r.container();
    // The default tag is the chart's appVersion, which is the crate's
    // version (scripts/check-release.py keeps them equal).
    let tag = env!("CARGO_PKG_VERSION");
    assert_eq!(
        s(&c["image"]),
        format!("ghcr.io/assetscan/assetscan-operator:{tag}")
    );
    assert_eq!(c["args"], yaml("[run]"));
    let port = &c["ports"][0];
    assert_eq!(
        (s(&port["name"]), port["containerPort"].as_u64()),
        ("metrics", Some(8080))
    );

    // The Service for Prometheus.
    let svc = r.get("Service", &format!("{FULLNAME}-metrics"));
    assert_eq!(svc["spec"]["selector"], *selector);
    let svc_port = &svc["spec"]["ports"][0];
    assert_eq!(s(&svc_port["name"]), "metrics");
    assert_eq!(svc_port["port"].as_u64(), Some(8080));
    assert_eq!(s(&svc_port["targetPort"]), "metrics");

    // PodDisruptionBudget: one pod at a time.
    let pdb = r.get("PodDisruptionBudget", FULLNAME);
    assert_eq!(pdb["spec"]["maxUnavailable"].as_u64(), Some(1));
    assert_eq!(pdb["spec"]["selector"]["matchLabels"], *selector);

    // Spread over nodes, with the pods' own labels filled in.
    let spread = &spec["topologySpreadConstraints"][0];
    assert_eq!(s(&spread["topologyKey"]), "kubernetes.io/hostname");
    assert_eq!(spread["labelSelector"]["matchLabels"], *selector);
}

#[test]
fn environment_of_run_is_wired() {
    let r = render(&[]);
    let env = r.env();
    let known = cli_env_vars();
    for name in env.keys().filter(|n| *n != "RUST_LOG") {
        assert!(
            known.contains(name),
            "{name} is not an environment variable of src/cli ({known:?})"
        );
    }
    assert_eq!(
        r.env_value("ASSETSCAN_CONFIG").as_deref(),
        Some("/etc/assetscan-operator/config.yaml")
    );
    assert_eq!(r.env_value("METRICS_ADDR").as_deref(), Some("0.0.0.0:8080"));
    assert_eq!(r.env_value("ASSETSCAN_CONCURRENCY").as_deref(), Some("8"));
    assert_eq!(r.env_value("LOG_FORMAT").as_deref(), Some("json"));
    assert_eq!(
        r.env_value("REDIS_URL").as_deref(),
        Some("redis://redis:6379")
    );
    assert_eq!(
        s(&env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]),
        "metadata.name"
    );
    for absent in [
        "WATCH_NAMESPACE",
        "ASSETSCAN_SHARD_INDEX",
        "ASSETSCAN_SHARD_COUNT",
        "RUST_LOG",
    ] {
        assert!(!env.contains_key(absent), "{absent} is set by default");
    }

    // The config file is the ConfigMap, mounted read-only where ASSETSCAN_CONFIG points.
    let mount = r.container()["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"].as_str() == Some("config"))
        .expect("config mount");
    assert_eq!(s(&mount["mountPath"]), "/etc/assetscan-operator");
    assert_eq!(mount["readOnly"].as_bool(), Some(true));
    let volume = r.pod()["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some("config"))
        .expect("config volume");
    assert_eq!(
        s(&volume["configMap"]["name"]),
        format!("{FULLNAME}-config")
    );

    let r = render(&[
        "--set",
        "concurrency=32",
        "--set",
        "logFormat=text",
        "--set",
        "logLevel=debug",
        "--set",
        "metrics.port=9100",
    ]);
    assert_eq!(r.env_value("ASSETSCAN_CONCURRENCY").as_deref(), Some("32"));
    assert_eq!(r.env_value("LOG_FORMAT").as_deref(), Some("text"));
    assert_eq!(r.env_value("RUST_LOG").as_deref(), Some("debug"));
    assert_eq!(r.env_value("METRICS_ADDR").as_deref(), Some("0.0.0.0:9100"));
    assert_eq!(
        r.container()["ports"][0]["containerPort"].as_u64(),
        Some(9100)
    );
    let svc = r.get("Service", &format!("{FULLNAME}-metrics"));
    assert_eq!(
        svc["spec"]["ports"][0]["port"].as_u64(),
        Some(8080),
        "the Service keeps port 8080"
    );
}

#[test]
fn probes_use_healthz_and_readyz_on_the_metrics_port() {
    let probes = std::fs::read_to_string(root().join("src/probes.rs")).unwrap();
    let r = render(&[]);
    let c = r.container();
    for (probe, path) in [
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ] {
        let get = &c[probe]["httpGet"];
        assert_eq!(s(&get["path"]), path, "{probe}");
        assert_eq!(s(&get["port"]), "metrics", "{probe}");
        assert!(
            probes.contains(&format!(".route(\"{path}\"")),
            "src/probes.rs serves {path}"
        );
    }
}

#[test]
fn pods_run_non_root_read_only_without_capabilities() {
    let r = render(&[]);
    let pod = &r.pod()["spec"]["securityContext"];
    assert_eq!(pod["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(s(&pod["seccompProfile"]["type"]), "RuntimeDefault");
    assert_ne!(pod["runAsUser"].as_u64(), Some(0));
    let c = &r.container()["securityContext"];
    assert_eq!(c["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(c["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(c["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert_eq!(c["capabilities"]["drop"], yaml("[ALL]"));
    assert_eq!(s(&c["seccompProfile"]["type"]), "RuntimeDefault");
    let resources = &r.container()["resources"];
    assert!(resources["requests"]["cpu"].is_string() && resources["limits"]["memory"].is_string());
}

#[test]
fn termination_grace_period_covers_the_lock_ttl() {
    let r = render(&[]);
    let ttl = r.config().lock.ttl;
    let grace = r.pod()["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    assert!(
        Duration::from_secs(grace) >= ttl,
        "grace {grace}s < lock ttl {ttl:?}"
    );

    let r = render(&[
        "--set",
        "config.lock.ttl=2m",
        "--set",
        "terminationGracePeriodSeconds=120",
    ]);
    assert_eq!(r.config().lock.ttl, Duration::from_secs(120));
    refused(
        &["--set", "config.lock.ttl=2m"],
        "terminationGracePeriodSeconds (60) must be at least config.lock.ttl (120s)",
    );
    refused(
        &["--set", "config.lock.ttl=61000ms"],
        "at least config.lock.ttl (61s)",
    );
    render(&["--set", "config.lock.ttl=60000ms"]);
    // A stopping pod finishes the delivery it has in flight (bounded by
    // the notify step's timeout) before it exits.
    refused(
        &["--set", "config.steps.notify.timeout=56s"],
        "terminationGracePeriodSeconds (60) must be at least config.steps.notify.timeout (56s) + 5s",
    );
    render(&["--set", "config.steps.notify.timeout=55s"]);
}

/// The start bound and the rescan spread are chart values, in the config
/// the operator reads; the schema refuses what the operator would.
#[test]
fn the_start_bound_is_a_chart_value() {
    let starts = render(&[]).config().scan_starts;
    assert_eq!((starts.per_second, starts.burst), (20, 20));
    assert_eq!(starts.rescan_spread, 0.1);
    let r = render(&[
        "--set",
        "config.scanStarts.perSecond=5",
        "--set",
        "config.scanStarts.burst=1",
        // `--set` reads 0.25 as a string; a values file or `--set-json`
        // gives the number.
        "--set-json",
        "config.scanStarts.rescanSpread=0.25",
    ]);
    let starts = r.config().scan_starts;
    assert_eq!((starts.per_second, starts.burst), (5, 1));
    assert_eq!(starts.rescan_spread, 0.25);
    refused(&["--set", "config.scanStarts.perSecond=0"], "perSecond");
    refused(&["--set", "config.scanStarts.burst=0"], "burst");
    refused(
        &["--set-json", "config.scanStarts.rescanSpread=2"],
        "rescanSpread",
    );
    refused(&["--set", "config.scanStarts.perSecnd=5"], "perSecnd");
}

#[test]
fn rbac_grants_exactly_what_the_controller_uses() {
    // All namespaces: a ClusterRole bound to the operator's ServiceAccount.
    let r = render(&[]);
    assert!(r.all("Role").is_empty() && r.all("RoleBinding").is_empty());
    assert_eq!(grants(r.get("ClusterRole", FULLNAME)), controller_grants());
    let binding = r.get("ClusterRoleBinding", FULLNAME);
    assert_eq!(
        binding["roleRef"],
        yaml(&format!(
            "{{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {FULLNAME}}}"
        ))
    );
    assert_eq!(
        binding["subjects"],
        yaml(&format!(
            "[{{kind: ServiceAccount, name: {FULLNAME}, namespace: {NAMESPACE}}}]"
        ))
    );

    // The aggregated roles are for people, never bound to the operator.
    for name in [format!("{FULLNAME}-view"), format!("{FULLNAME}-edit")] {
        let read_only: BTreeSet<String> = ["get", "list", "watch"].map(String::from).into();
        for ((group, resource), verbs) in grants(r.get("ClusterRole", &name)) {
            assert_eq!(group, "assetscan.io", "{name}");
            if resource == "assetscans/status" {
                assert!(
                    verbs.is_subset(&read_only),
                    "{name}: only the operator writes the status"
                );
            }
        }
    }
    // Beside the operator's own binding, only the metrics reviews' (see
    // `metrics_are_served_behind_the_api_servers_reviews`).
    assert_eq!(
        binding_names(&r),
        [FULLNAME.to_owned(), format!("{FULLNAME}-metrics-auth")]
    );

    // A channel's namespaceSelector: the namespaces' labels too, and no
    // more; names alone need nothing more.
    let selector =
        r#"config.channelAccess={"secops":{"namespaceSelector":{"matchLabels":{"a":"b"}}}}"#;
    let r = render(&["--set-json", selector]);
    let mut with_labels = controller_grants();
    let labels = assetscan_operator::kubernetes::rbac::NAMESPACE_LABELS_ACCESS;
    with_labels.insert(
        (labels.group.to_owned(), labels.resource.to_owned()),
        labels.verbs.iter().map(|v| (*v).to_owned()).collect(),
    );
    assert_eq!(grants(r.get("ClusterRole", FULLNAME)), with_labels);
    let names = r#"config.channelAccess={"secops":{"namespaces":["team-a"]}}"#;
    let r = render(&["--set-json", names]);
    assert_eq!(grants(r.get("ClusterRole", FULLNAME)), controller_grants());

    // One namespace: a Role and RoleBinding there, no operator ClusterRole.
    let r = render(&["--set", "watchNamespace=scans"]);
    assert_eq!(r.env_value("WATCH_NAMESPACE").as_deref(), Some("scans"));
    assert!(!r.has("ClusterRole", FULLNAME));
    assert_eq!(binding_names(&r), [format!("{FULLNAME}-metrics-auth")]);
    let role = r.get("Role", FULLNAME);
    assert_eq!(s(&role["metadata"]["namespace"]), "scans");
    assert_eq!(grants(role), controller_grants());
    let binding = r.get("RoleBinding", FULLNAME);
    assert_eq!(s(&binding["metadata"]["namespace"]), "scans");
    assert_eq!(s(&binding["roleRef"]["kind"]), "Role");
    assert_eq!(
        binding["subjects"],
        yaml(&format!(
            "[{{kind: ServiceAccount, name: {FULLNAME}, namespace: {NAMESPACE}}}]"
        ))
    );

    // Without RBAC or aggregated roles; with an existing ServiceAccount.
    let r = render(&[
        "--set",
        "rbac.create=false",
        "--set",
        "rbac.aggregateToDefaultRoles=false",
        "--set",
        "serviceAccount.create=false",
        "--set",
        "serviceAccount.name=scanner",
    ]);
    assert!(r.all("ClusterRole").is_empty() && r.all("ServiceAccount").is_empty());
    assert_eq!(s(&r.pod()["spec"]["serviceAccountName"]), "scanner");
    refused(
        &["--set", "serviceAccount.create=false"],
        "serviceAccount.name is required",
    );
}

#[test]
fn config_map_holds_a_config_the_operator_accepts() {
    let r = render(&[]);
    let config = r.config();
    assert_eq!(
        config.redis.url, None,
        "the Redis URL comes from REDIS_URL, not the file"
    );
    assert_eq!(config.lock.ttl, Duration::from_secs(30));
    assert!(config.providers.notifications.is_empty());
    install_crypto_provider();
    Providers::from_config(&config.providers)
        .expect("the default providers build (no secret needed)");

    // The default mirrors examples/config.yaml minus what needs a secret or
    // a site-specific endpoint (redis.url, the inventory, notification channels).
    let mut example = yaml(&std::fs::read_to_string(root().join("examples/config.yaml")).unwrap());
    example["redis"].as_object_mut().unwrap().remove("url");
    example["providers"]["online"]
        .as_object_mut()
        .unwrap()
        .remove("inventory");
    example["providers"]
        .as_object_mut()
        .unwrap()
        .remove("notifications");
    let mut rendered = yaml(&r.config_text());
    rendered["providers"]
        .as_object_mut()
        .unwrap()
        .remove("notifications");
    assert_eq!(
        rendered, example,
        "values.yaml `config` drifted from examples/config.yaml"
    );

    // Secrets stay references: a channel configured through values parses,
    // its variable comes from a Secret.
    let r = render(&[
        "--set-json",
        r#"config.providers.notifications={"secops-slack":{"kind":"slack","urlFrom":{"env":"SLACK_WEBHOOK_URL"}},"secops-webhook":{"kind":"webhook","urlFrom":{"env":"SECOPS_WEBHOOK_URL"},"secretFrom":{"file":"/etc/assetscan/webhook/secret"}}}"#,
        "--set-json",
        r#"config.providers.online.inventory={"baseUrl":"https://inventory.internal/api","bearerTokenFrom":{"env":"INVENTORY_TOKEN"}}"#,
        "--set",
        "config.redis.prefix=prod",
    ]);
    let config = r.config();
    assert_eq!(config.redis.prefix, "prod");
    assert_eq!(
        config.providers.notifications.keys().collect::<Vec<_>>(),
        ["secops-slack", "secops-webhook"]
    );

    // An unknown key is refused by the chart's schema (generated from the
    // types the operator reads the file with), and by the operator's parser
    // behind it.
    refused(
        &["--set", "config.providers.vulnerabilities.bogus=1"],
        "bogus",
    );
    let mut with_bogus = yaml(&render(&[]).config_text());
    with_bogus["providers"]["vulnerabilities"]["bogus"] = 1.into();
    assert!(Config::parse(&with_bogus.to_string(), Path::new("x")).is_err());
    // Switching to the generic source: osv keys dropped with null.
    let r = render(&[
        "--set-json",
        r#"config.providers.vulnerabilities={"kind":"generic","url":"https://vulns.internal/query","baseUrl":null,"concurrency":null,"batchSize":null,"maxPages":null,"cacheCapacity":null,"maxBodyBytes":null}"#,
    ]);
    let text = r.config_text();
    Config::parse(&text, Path::new("x")).unwrap_or_else(|e| panic!("{e}\n{text}"));

    // The pods roll when the config changes.
    let checksum = |r: &Rendered| r.pod()["metadata"]["annotations"]["checksum/config"].clone();
    assert_ne!(
        checksum(&render(&[])),
        checksum(&render(&["--set", "config.redis.prefix=other"]))
    );
    assert_eq!(
        checksum(&render(&[])),
        checksum(&render(&["--set", "replicas=5"]))
    );
}

#[test]
fn redis_url_from_an_existing_secret() {
    let r = render(&["--set", "redis.existingSecret=redis-auth"]);
    let env = r.env();
    let redis = &env["REDIS_URL"];
    assert!(
        redis["value"].is_null(),
        "no plain URL when a Secret is given"
    );
    assert_eq!(
        redis["valueFrom"]["secretKeyRef"],
        yaml("{name: redis-auth, key: redis-url}")
    );

    let r = render(&[
        "--set",
        "redis.existingSecret=redis-auth",
        "--set",
        "redis.existingSecretKey=url",
    ]);
    assert_eq!(
        s(&r.env()["REDIS_URL"]["valueFrom"]["secretKeyRef"]["key"]),
        "url"
    );

    // Only the config file's redis.url: no REDIS_URL at all.
    let r = render(&[
        "--set",
        "redis.url=",
        "--set",
        "config.redis.url=redis://redis.db:6379/2",
    ]);
    assert!(!r.env().contains_key("REDIS_URL"));
    assert_eq!(
        r.config().redis.url.as_deref(),
        Some("redis://redis.db:6379/2")
    );
    refused(&["--set", "redis.url="], "no Redis");

    let r = render(&[
        "--set-json",
        r#"redis.url="cluster:redis://a:6379,redis://b:6379""#,
    ]);
    assert_eq!(
        r.env_value("REDIS_URL").as_deref(),
        Some("cluster:redis://a:6379,redis://b:6379")
    );
}

/// The `ci/` values: Sentinel, and an ACL user with TLS. Every secret comes
/// from a Secret (never a plain value), every file from a read-only mount of
/// one, and the URL is one the operator parses.
#[test]
fn redis_sentinel_acl_user_and_tls_come_from_values_and_secrets() {
    let known = cli_env_vars();
    let ci = |name: &str| chart().join("ci").join(name).display().to_string();
    let secret_ref = |r: &Rendered, env: &str| r.env()[env]["valueFrom"]["secretKeyRef"].clone();

    let sentinel = ci("sentinel-values.yaml");
    let r = render(&["-f", &sentinel]);
    let url = r.env_value("REDIS_URL").expect("REDIS_URL");
    assert_eq!(
        url,
        "redis+sentinel://redis-node-0.redis-headless.redis.svc:26379,\
         redis-node-1.redis-headless.redis.svc:26379,\
         redis-node-2.redis-headless.redis.svc:26379/mymaster"
    );
    assert!(matches!(
        RedisTarget::parse(&url),
        Ok(RedisTarget::Sentinel(_))
    ));
    assert_eq!(r.env_value("REDIS_USERNAME").as_deref(), Some("assetscan"));
    assert_eq!(
        secret_ref(&r, "REDIS_PASSWORD"),
        yaml("{name: assetscan-redis, key: password}")
    );
    assert_eq!(
        secret_ref(&r, "REDIS_SENTINEL_PASSWORD"),
        yaml("{name: assetscan-redis, key: sentinel-password}")
    );
    for env in r.env().keys().filter(|n| n.starts_with("REDIS_")) {
        assert!(known.contains(env), "{env} is not a flag of src/cli");
    }
    let r = render(&[
        "-f",
        &sentinel,
        "--set",
        "redis.tls.enabled=true",
        "--set",
        "redis.sentinel.db=2",
    ]);
    let url = r.env_value("REDIS_URL").unwrap();
    assert!(
        url.starts_with("rediss+sentinel://") && url.ends_with("/mymaster/2"),
        "{url}"
    );

    let r = render(&["-f", &ci("acl-tls-values.yaml")]);
    assert_eq!(
        r.env_value("REDIS_URL").as_deref(),
        Some("rediss://redis.db.svc:6380/0")
    );
    assert_eq!(
        secret_ref(&r, "REDIS_PASSWORD"),
        yaml("{name: assetscan-redis, key: password}")
    );
    let mounts = r.container()["volumeMounts"].as_array().unwrap().clone();
    let volumes = r.pod()["spec"]["volumes"].as_array().unwrap().clone();
    for (env, volume, secret, key) in [
        ("REDIS_CA_FILE", "redis-ca", "redis-ca", "ca.crt"),
        (
            "REDIS_CERT_FILE",
            "redis-client-cert",
            "assetscan-redis-client",
            "tls.crt",
        ),
        (
            "REDIS_KEY_FILE",
            "redis-client-cert",
            "assetscan-redis-client",
            "tls.key",
        ),
    ] {
        assert!(known.contains(env), "{env} is not a flag of src/cli");
        let path = r.env_value(env).unwrap_or_else(|| panic!("{env}"));
        let mount = mounts
            .iter()
            .find(|m| s(&m["name"]) == volume)
            .unwrap_or_else(|| panic!("{volume} is mounted"));
        assert_eq!(mount["readOnly"].as_bool(), Some(true));
        assert_eq!(path, format!("{}/{key}", s(&mount["mountPath"])), "{env}");
        let source = volumes.iter().find(|v| s(&v["name"]) == volume).unwrap();
        assert_eq!(s(&source["secret"]["secretName"]), secret);
        assert!(
            source["secret"]["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| s(&i["key"]) == key && s(&i["path"]) == key),
            "{volume}: {key}"
        );
    }

    refused(
        &["--set", "redis.tls.enabled=true"],
        "redis.tls.enabled needs a rediss:// redis.url",
    );
    refused(
        &["--set", "redis.tls.caSecret.name=redis-ca"],
        "need redis.tls.enabled: true",
    );
    refused(
        &["--set", "redis.sentinel.enabled=true"],
        "redis.sentinel.enabled needs redis.sentinel.hosts",
    );
    refused(
        &["--set-json", r#"redis.sentinel.hosts=["a:26379/x"]"#],
        "'/redis/sentinel/hosts/0'",
    );
    refused(&["--set", "redis.password.key="], "'/redis/password/key'");
}

#[test]
fn sharding_renders_a_statefulset_with_ordinal_indexes() {
    let r = render(&["--set", "sharding.enabled=true", "--set", "replicas=3"]);
    assert!(r.all("Deployment").is_empty());
    let sts = r.get("StatefulSet", FULLNAME);
    assert_eq!(sts["spec"]["replicas"].as_u64(), Some(3));
    assert_eq!(s(&sts["spec"]["podManagementPolicy"]), "Parallel");
    let headless = r.get("Service", s(&sts["spec"]["serviceName"]));
    assert_eq!(s(&headless["spec"]["clusterIP"]), "None");
    assert_eq!(
        headless["spec"]["selector"],
        sts["spec"]["selector"]["matchLabels"]
    );

    let env = r.env();
    assert_eq!(r.env_value("ASSETSCAN_SHARD_COUNT").as_deref(), Some("3"));
    assert_eq!(
        s(&env["ASSETSCAN_SHARD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]),
        "metadata.labels['apps.kubernetes.io/pod-index']"
    );
    assert!(r.has("PodDisruptionBudget", FULLNAME));
    // Everything else is the same pod.
    assert_eq!(
        r.env_value("ASSETSCAN_CONFIG").as_deref(),
        Some("/etc/assetscan-operator/config.yaml")
    );
    assert_eq!(
        s(&r.container()["readinessProbe"]["httpGet"]["path"]),
        "/readyz"
    );
}

#[test]
fn pdb_only_with_more_than_one_replica() {
    assert!(
        render(&["--set", "replicas=1"])
            .all("PodDisruptionBudget")
            .is_empty()
    );
    assert!(
        render(&["--set", "podDisruptionBudget.enabled=false"])
            .all("PodDisruptionBudget")
            .is_empty()
    );
    let r = render(&["--set", "replicas=0"]);
    assert!(r.all("PodDisruptionBudget").is_empty());
    assert_eq!(r.workload()["spec"]["replicas"].as_u64(), Some(0));
}

#[test]
fn notifier_secrets_reach_the_pod_as_env_and_files() {
    let r = render(&[
        "--set-json",
        r#"extraEnv=[{"name":"SLACK_WEBHOOK_URL","valueFrom":{"secretKeyRef":{"name":"notifiers","key":"slack"}}}]"#,
        "--set-json",
        r#"envFrom=[{"secretRef":{"name":"wecom"}}]"#,
        "--set-json",
        r#"extraVolumes=[{"name":"webhook-secret","secret":{"secretName":"webhook","defaultMode":288}}]"#,
        "--set-json",
        r#"extraVolumeMounts=[{"name":"webhook-secret","mountPath":"/etc/assetscan/webhook","readOnly":true}]"#,
    ]);
    let env = r.env();
    assert_eq!(
        env["SLACK_WEBHOOK_URL"]["valueFrom"]["secretKeyRef"],
        yaml("{name: notifiers, key: slack}")
    );
    assert_eq!(
        r.container()["envFrom"],
        yaml("[{secretRef: {name: wecom}}]")
    );
    let volumes = r.pod()["spec"]["volumes"].as_array().unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"].as_str() == Some("webhook"))
    );
    let mounts = r.container()["volumeMounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["mountPath"].as_str() == Some("/etc/assetscan/webhook"))
    );
    // The chart's own variables are still there.
    assert!(env.contains_key("REDIS_URL") && env.contains_key("POD_NAME"));
}

#[test]
fn scheduling_knobs_reach_the_pod() {
    let r = render(&[
        "--set",
        "nodeSelector.pool=ops",
        "--set-json",
        r#"tolerations=[{"key":"dedicated","operator":"Equal","value":"ops","effect":"NoSchedule"}]"#,
        "--set-json",
        r#"affinity={"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[]}}"#,
        "--set-json",
        r#"topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"x":"y"}}}]"#,
        "--set",
        "priorityClassName=system-cluster-critical",
        "--set",
        "podAnnotations.team=secops",
        "--set",
        "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "--set-json",
        r#"imagePullSecrets=[{"name":"regcred"}]"#,
    ]);
    let spec = &r.pod()["spec"];
    assert_eq!(s(&spec["nodeSelector"]["pool"]), "ops");
    assert_eq!(s(&spec["tolerations"][0]["key"]), "dedicated");
    assert!(spec["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(
        spec["topologySpreadConstraints"][0]["labelSelector"],
        yaml("{matchLabels: {x: y}}")
    );
    assert_eq!(s(&spec["priorityClassName"]), "system-cluster-critical");
    assert_eq!(s(&r.pod()["metadata"]["annotations"]["team"]), "secops");
    assert!(s(&r.container()["image"]).ends_with(&format!(
        ":{}@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        env!("CARGO_PKG_VERSION")
    )));
    assert_eq!(spec["imagePullSecrets"], yaml("[{name: regcred}]"));
}

#[test]
fn service_monitor_is_optional_and_scrapes_the_metrics_service() {
    assert!(render(&[]).all("ServiceMonitor").is_empty());
    let r = render(&[
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.labels.release=prometheus",
        "--set",
        "sharding.enabled=true",
    ]);
    let sm = r.get("ServiceMonitor", FULLNAME);
    assert_eq!(s(&sm["apiVersion"]), "monitoring.coreos.com/v1");
    assert_eq!(s(&sm["metadata"]["labels"]["release"]), "prometheus");
    let endpoint = &sm["spec"]["endpoints"][0];
    assert_eq!(
        (s(&endpoint["port"]), s(&endpoint["path"])),
        ("metrics", "/metrics")
    );
    assert_eq!(
        sm["spec"]["namespaceSelector"]["matchNames"],
        yaml(&format!("[{NAMESPACE}]"))
    );
    // Its selector picks the metrics Service, not the headless one.
    let selects = |svc: &Value| {
        let labels: &Map<String, Value> = svc["metadata"]["labels"].as_object().unwrap();
        sm["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    };
    let services = r.all("Service");
    let picked: Vec<&str> = services
        .iter()
        .filter(|svc| selects(svc))
        .map(|svc| s(&svc["metadata"]["name"]))
        .collect();
    assert_eq!(picked, [format!("{FULLNAME}-metrics")]);
}

#[test]
fn notes_show_a_valid_assetscan_and_how_to_watch_it() {
    let chart = chart();
    let notes = |extra: &[&str]| {
        let mut args = vec![
            "install",
            RELEASE,
            chart.to_str().unwrap(),
            "--namespace",
            NAMESPACE,
            "--dry-run=client",
        ];
        args.extend_from_slice(&ALLOW_NO_REDIS_PASSWORD);
        args.extend_from_slice(extra);
        let out = run_helm(&args)
            .unwrap_or_else(|e| panic!("helm install --dry-run=client failed:\n{e}"));
        out.split_once("NOTES:")
            .expect("NOTES in the output")
            .1
            .to_owned()
    };
    let text = notes(&[]);
    assert!(
        text.contains("kubectl -n default get assetscans -w"),
        "{text}"
    );
    assert!(
        text.contains(&format!("rollout status deployment/{FULLNAME}")),
        "{text}"
    );
    let example = text
        .split_once("<<'YAML'")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .and_then(|(_, rest)| rest.split_once("\n   YAML"))
        .expect("an AssetScan between <<'YAML' and YAML")
        .0
        .lines()
        .map(|l| l.strip_prefix("   ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let scan: assetscan_operator::kubernetes::crd::AssetScan =
        assetscan_operator::yaml::from_str(&example)
            .unwrap_or_else(|e| panic!("the example AssetScan does not parse: {e}\n{example}"));
    kube::core::cel::validate_cel(&scan)
        .unwrap_or_else(|e| panic!("the example AssetScan is invalid: {e:?}"));

    let text = notes(&[
        "--set",
        "watchNamespace=scans",
        "--set",
        "sharding.enabled=true",
    ]);
    assert!(
        text.contains("kubectl -n scans get assetscans -w"),
        "{text}"
    );
    assert!(text.contains("namespace: scans"), "{text}");
    assert!(
        text.contains(&format!("rollout status statefulset/{FULLNAME}")),
        "{text}"
    );
}

/// The metrics port, secured by default: TLS, probes over HTTPS, the
/// operator's ClusterRole for the reviews (equal to `METRICS_ACCESS`), the
/// reader ClusterRole bound to the ServiceAccounts values name, and a
/// ServiceMonitor that sends Prometheus' token over HTTPS; a Secret's
/// certificate when given; `metrics.secure=false` for plain HTTP.
#[test]
fn metrics_are_served_behind_the_api_servers_reviews() {
    let metrics_access = || {
        let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for access in assetscan_operator::kubernetes::rbac::METRICS_ACCESS {
            out.entry((access.group.to_owned(), access.resource.to_owned()))
                .or_default()
                .extend(access.verbs.iter().map(|v| (*v).to_owned()));
        }
        out
    };
    let auth = format!("{FULLNAME}-metrics-auth");
    let reader = format!("{FULLNAME}-metrics-reader");
    for values in [&[][..], &["--set", "watchNamespace=scans"][..]] {
        let r = render(values);
        assert_eq!(grants(r.get("ClusterRole", &auth)), metrics_access());
        assert_eq!(
            r.get("ClusterRoleBinding", &auth)["subjects"],
            yaml(&format!(
                "[{{kind: ServiceAccount, name: {FULLNAME}, namespace: {NAMESPACE}}}]"
            ))
        );
    }
    let r = render(&[]);
    assert_eq!(
        r.get("ClusterRole", &reader)["rules"],
        yaml("[{nonResourceURLs: [/metrics], verbs: [get]}]")
    );
    assert!(
        !r.has("ClusterRoleBinding", &reader),
        "bound to no one by default"
    );
    let c = r.container();
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        assert_eq!(s(&c[probe]["httpGet"]["scheme"]), "HTTPS", "{probe}");
    }
    for absent in ["METRICS_PLAIN_HTTP", "METRICS_TLS_CERT_FILE"] {
        assert!(r.env_value(absent).is_none(), "{absent} is set by default");
    }
    let test_pod = r.get("Pod", &format!("{FULLNAME}-test-readyz"));
    assert!(
        serde_json::to_string(test_pod)
            .unwrap()
            .contains("https://")
    );

    let r = render(&[
        "--set",
        "metrics.reader.serviceAccounts[0].name=prometheus-k8s",
        "--set",
        "metrics.reader.serviceAccounts[0].namespace=monitoring",
        "--set",
        "metrics.tls.secretName=metrics-cert",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    ]);
    let binding = r.get("ClusterRoleBinding", &reader);
    assert_eq!(s(&binding["roleRef"]["name"]), reader);
    assert_eq!(
        binding["subjects"],
        yaml("[{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}]")
    );
    let dir = "/etc/assetscan/metrics-tls";
    assert_eq!(
        r.env_value("METRICS_TLS_CERT_FILE"),
        Some(format!("{dir}/tls.crt"))
    );
    assert_eq!(
        r.env_value("METRICS_TLS_KEY_FILE"),
        Some(format!("{dir}/tls.key"))
    );
    let volumes = r.pod()["spec"]["volumes"].as_array().unwrap();
    let volume = volumes.iter().find(|v| v["name"] == "metrics-tls").unwrap();
    assert_eq!(s(&volume["secret"]["secretName"]), "metrics-cert");
    let mounts = c["volumeMounts"].as_array().unwrap();
    assert!(!mounts.iter().any(|m| m["name"] == "metrics-tls"));
    let mounts = r.container()["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == "metrics-tls").unwrap();
    assert_eq!(
        (s(&mount["mountPath"]), mount["readOnly"].as_bool()),
        (dir, Some(true))
    );
    let endpoint = &r.get("ServiceMonitor", FULLNAME)["spec"]["endpoints"][0];
    assert_eq!(s(&endpoint["scheme"]), "https");
    assert_eq!(
        s(&endpoint["bearerTokenFile"]),
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    assert_eq!(endpoint["tlsConfig"], yaml("{insecureSkipVerify: true}"));

    let with_ca = [
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.serviceMonitor.tls.insecureSkipVerify=false",
    ];
    refused(&with_ca, "set ca.secretName");
    let mut ca = with_ca.to_vec();
    ca.extend([
        "--set",
        "metrics.serviceMonitor.tls.ca.secretName=metrics-ca",
    ]);
    let r = render(&ca);
    assert_eq!(
        r.get("ServiceMonitor", FULLNAME)["spec"]["endpoints"][0]["tlsConfig"],
        yaml("{insecureSkipVerify: false, ca: {secret: {name: metrics-ca, key: ca.crt}}}")
    );

    // Plain HTTP, for those who must: no reviews, no roles, no token sent.
    let r = render(&[
        "--set",
        "metrics.secure=false",
        "--set",
        "metrics.serviceMonitor.enabled=true",
    ]);
    assert_eq!(r.env_value("METRICS_PLAIN_HTTP").as_deref(), Some("true"));
    assert!(cli_env_vars().contains("METRICS_PLAIN_HTTP"));
    assert!(!r.has("ClusterRole", &auth) && !r.has("ClusterRole", &reader));
    assert_eq!(
        s(&r.container()["readinessProbe"]["httpGet"]["scheme"]),
        "HTTP"
    );
    let endpoint = &r.get("ServiceMonitor", FULLNAME)["spec"]["endpoints"][0];
    assert_eq!(s(&endpoint["scheme"]), "http");
    assert!(endpoint["bearerTokenFile"].is_null() && endpoint["tlsConfig"].is_null());
}
