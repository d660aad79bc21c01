//! What a GitOps install relies on, beyond the chart's core (tests/chart/):
//!
//! - the Argo CD health scripts in deploy/argocd/resource_customizations,
//!   run by real Lua interpreters (5.4, and 5.1, the dialect of Argo CD's
//!   own interpreter) against every sample in their `health_test.yaml`,
//!   against the statuses the operator's own mirror function writes for
//!   every phase, and against the objects a real operator process wrote
//!   through the Kubernetes API emulator;
//! - the argocd-cm patch that carries those scripts;
//! - the chart's production parts: the supported Kubernetes version, every
//!   values file in charts/assetscan-operator/ci (real `helm template` and
//!   `helm lint --strict`), the optional NetworkPolicy, PrometheusRule and
//!   Grafana dashboard (rendered only when enabled; every query names a
//!   metric the operator really exports, read from its own registry; the
//!   alerts pass `promtool check rules` and fire as `promtool test rules`
//!   expects), and the `helm test` hook, whose script is run against a real
//!   operator.
//!
//! Needs helm v4 (on PATH or at target/tools/helm: scripts/ensure-helm.sh),
//! lua5.4 + lua5.1 with cjson (scripts/ensure-lua.sh) and promtool
//! (scripts/ensure-promtool.sh); each is installed by its script when
//! missing.
//!
//!   cargo test --all-features --test gitops

mod gitops_kit;
mod kit;
mod metrics_kit;

use assetscan_operator::domain::ticket::{RiskFacts, Status, Ticket};
use assetscan_operator::kubernetes::controller::{ConditionType, status_from_ticket};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanStatus};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::process::free_port;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::wait;
use gitops_kit::lua::{Health, asset_scan_script, check_health_tests, health};
use gitops_kit::process::{run_hook, start_operator};
use gitops_kit::promql::{check_query, dashboard_queries};
use gitops_kit::*;
use k8s_openapi::jiff::Timestamp;
use kit::scans::{is_terminal, reason, scan};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

// ---------------------------------------------------------------------------
// Argo CD health scripts.

#[test]
fn asset_scan_health_of_every_sample() {
    let statuses = check_health_tests("AssetScan");
    let all: BTreeSet<String> = ["Healthy", "Progressing", "Degraded", "Suspended"]
        .map(String::from)
        .into();
    assert_eq!(statuses, all, "a sample for each verdict");
}

#[test]
fn asset_scan_report_health_of_every_sample() {
    let statuses = check_health_tests("AssetScanReport");
    assert_eq!(
        statuses,
        ["Healthy", "Progressing"].map(String::from).into()
    );
}

/// The samples are statuses the operator can write: each one reads into the
/// operator's own types and back without losing or changing a field.
#[test]
fn asset_scan_samples_have_the_operators_status_shape() {
    let dir = customizations().join("AssetScan").join("testdata");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let obj = yaml_file(&path);
        let scan: AssetScan = serde_json::from_value(obj.clone())
            .unwrap_or_else(|e| panic!("{} is not an AssetScan: {e}", path.display()));
        if let Some(status) = obj.get("status") {
            let typed: &AssetScanStatus = scan.status.as_ref().unwrap();
            assert_eq!(
                &serde_json::to_value(typed).unwrap(),
                status,
                "{}: a field the operator does not write",
                path.display()
            );
        }
    }
}

/// An AssetScan at `generation` whose status is what the operator's mirror
/// wrote of `ticket` when it acted on generation `observed`.
fn mirrored(ticket: &Ticket, observed: i64, generation: i64, suspend: bool) -> Value {
    let status = status_from_ticket(
        ticket,
        None,
        Some(observed),
        Timestamp::from_second(1_767_600_000).unwrap(),
        None,
    );
    json!({
        "apiVersion": "assetscan.io/v1alpha1",
        "kind": "AssetScan",
        "metadata": {"name": "web-01", "namespace": "secops", "generation": generation},
        "spec": {"assetId": "web-01", "target": {"inventoryRef": "web-01"}, "suspend": suspend},
        "status": status,
    })
}

/// The script against what `status_from_ticket`, the operator's status
/// mirror, writes for every ticket status: a run under way is Progressing,
/// a FINISHED run Healthy whatever its verdict, a FAILED one Degraded.
#[test]
fn asset_scan_health_follows_the_mirror_for_every_phase() {
    let script = asset_scan_script();
    for phase in Status::ALL {
        // Run ids are `<uid prefix>-g<generation>-s<scan>`.
        let mut ticket = Ticket::new("web-01", "3f2a9c1e-g3-s0", 1_767_600_000_000);
        ticket.status = phase;
        let expected = match phase {
            Status::Finished => "Healthy",
            Status::Failed => "Degraded",
            _ => "Progressing",
        };
        for lua in luas() {
            let verdict = health(lua, &script, &mirrored(&ticket, 3, 3, false));
            assert_eq!(verdict.status, expected, "{phase}: {verdict:?}");
            if expected == "Progressing" {
                assert!(verdict.message.contains(phase.as_str()), "{verdict:?}");
            }
            // The spec changed and the operator has not acted on it yet.
            let stale = health(lua, &script, &mirrored(&ticket, 3, 4, false));
            assert_eq!(
                (stale.status.as_str(), stale.message.as_str()),
                (
                    "Progressing",
                    "waiting for the operator to observe generation 4"
                ),
                "{phase}"
            );
            // Suspended once no run is under way; a run in flight finishes.
            let suspended = health(lua, &script, &mirrored(&ticket, 3, 3, true));
            let want = match phase {
                Status::Failed => "Degraded",
                Status::Finished => "Suspended",
                _ => "Progressing",
            };
            assert_eq!(suspended.status, want, "{phase} suspended");
        }
    }

    // A confirmed high risk describes the asset: the run is still Healthy.
    let mut ticket = Ticket::new("web-01", "3f2a9c1e-g3-s0", 1_767_600_000_000);
    ticket.status = Status::Finished;
    ticket.facts.online = Some(true);
    ticket.facts.risk = Some(RiskFacts {
        high_risk: true,
        reasons: vec!["CVE-2024-3094 CVSS 10.0 >= 7.0".into()],
        confirmed_at: None,
    });
    for lua in luas() {
        let verdict = health(lua, &script, &mirrored(&ticket, 3, 3, false));
        assert_eq!(verdict.status, "Healthy");
        assert_eq!(
            verdict.message,
            "run 3f2a9c1e-g3-s0: scan complete; high risk: CVE-2024-3094 CVSS 10.0 >= 7.0"
        );
    }
}

/// Argo CD's rule: a script never errors, whatever the object holds.
#[test]
fn health_scripts_survive_malformed_objects() {
    let objects = [
        json!({}),
        json!({"metadata": {}, "status": "broken"}),
        json!({"metadata": {"generation": 2}, "spec": {"suspend": "yes"},
               "status": {"phase": 7, "run": 3, "conditions": "none"}}),
        json!({"metadata": {"generation": 2},
               "status": {"phase": "FAILED", "conditions": [5, {"type": "Stalled"}]}}),
        json!({"metadata": {"generation": 2},
               "status": {"phase": "FINISHED", "observedGeneration": 2, "highRisk": true,
                          "notification": {}, "conditions": [{"type": "HighRisk", "status": "True"}]}}),
        json!({"status": {"verdict": 3}}),
    ];
    for lua in luas() {
        for kind in ["AssetScan", "AssetScanReport"] {
            let script = customizations().join(kind).join("health.lua");
            for obj in &objects {
                health(lua, &script, obj);
            }
        }
    }
}

#[test]
fn argocd_cm_patch_carries_the_scripts() {
    let path = root()
        .join("deploy")
        .join("argocd")
        .join("argocd-cm-patch.yaml");
    let key = |kind: &str| format!("resource.customizations.health.assetscan.io_{kind}");
    let kinds = ["AssetScan", "AssetScanReport"];
    if std::env::var_os("UPDATE_ARGOCD_CM").is_some_and(|v| v == "1") {
        let mut text = String::from(
            "# The Argo CD health checks of assetscan.io kinds, for argocd-cm:\n\
             #   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file deploy/argocd/argocd-cm-patch.yaml\n\
             # A copy of resource_customizations/; regenerate with\n\
             #   UPDATE_ARGOCD_CM=1 cargo test --test gitops argocd_cm_patch\n\
             data:\n",
        );
        for kind in kinds {
            text.push_str(&format!("  {}: |\n", key(kind)));
            for line in read(&customizations().join(kind).join("health.lua")).lines() {
                match line {
                    "" => text.push('\n'),
                    _ => text.push_str(&format!("    {line}\n")),
                }
            }
        }
        std::fs::write(&path, text).unwrap();
    }
    let patch = yaml_file(&path);
    let data = patch["data"].as_object().expect("data");
    assert_eq!(data.len(), kinds.len(), "{data:?}");
    for kind in kinds {
        assert_eq!(
            data[&key(kind)].as_str(),
            Some(read(&customizations().join(kind).join("health.lua")).as_str()),
            "{} is behind resource_customizations/{kind}/health.lua: \
             UPDATE_ARGOCD_CM=1 cargo test --test gitops argocd_cm_patch",
            path.display()
        );
    }
}

// ---------------------------------------------------------------------------
// The chart.

#[test]
fn kubernetes_1_28_is_the_minimum() {
    let meta = yaml_file(&chart().join("Chart.yaml"));
    assert_eq!(meta["kubeVersion"], ">=1.28.0-0");
    render(&["--kube-version", "1.28.7"]);
    match try_render(&["--kube-version", "1.27.16"]) {
        Ok(_) => panic!("Kubernetes 1.27 must be refused"),
        Err(e) => assert!(e.contains("kubeVersion"), "{e}"),
    }
}

/// Every values file in ci/ lints strictly and renders; the known ones
/// render what they are for.
#[test]
fn ci_values_files_render_and_lint() {
    let chart = chart();
    let mut files: Vec<PathBuf> = std::fs::read_dir(chart.join("ci"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-values.yaml"))
        .collect();
    files.sort();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "ha-values.yaml",
        "sharding-values.yaml",
        "redis-cluster-values.yaml",
        "namespaced-values.yaml",
        "monitoring-values.yaml",
    ] {
        assert!(names.iter().any(|n| n == expected), "ci/{expected} missing");
    }
    for (file, name) in files.iter().zip(&names) {
        let file = file.to_str().unwrap();
        if let Err(e) = run_helm(&["lint", "--strict", chart.to_str().unwrap(), "-f", file]) {
            panic!("helm lint --strict -f ci/{name} failed:\n{e}");
        }
        let r = render(&["-f", file]);
        let env = |name: &str| -> Option<Value> {
            let workload = r
                .all("Deployment")
                .into_iter()
                .chain(r.all("StatefulSet"))
                .next()
                .expect("a workload");
            workload["spec"]["template"]["spec"]["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .cloned()
        };
        match name.as_str() {
            "ha-values.yaml" => {
                let deploy = r.get("Deployment", FULLNAME);
                assert_eq!(deploy["spec"]["replicas"], 3);
                let pdb = r.get("PodDisruptionBudget", FULLNAME);
                assert_eq!(pdb["spec"]["maxUnavailable"], 1);
                assert!(matches(
                    &pdb["spec"]["selector"]["matchLabels"],
                    &deploy["spec"]["template"]["metadata"]["labels"]
                ));
            }
            "sharding-values.yaml" => {
                let sts = r.get("StatefulSet", FULLNAME);
                assert_eq!(sts["spec"]["replicas"], 3);
                assert!(r.all("Deployment").is_empty());
                assert_eq!(env("ASSETSCAN_SHARD_COUNT").unwrap()["value"], "3");
                assert_eq!(r.all("PodDisruptionBudget").len(), 1);
            }
            "redis-cluster-values.yaml" => {
                let url = env("REDIS_URL").expect("REDIS_URL");
                assert_eq!(
                    url["valueFrom"]["secretKeyRef"],
                    json!({"name": "assetscan-redis-cluster", "key": "redis-url"})
                );
                let policy = r.one("NetworkPolicy");
                let redis_rule = policy["spec"]["egress"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|rule| rule["ports"][0]["port"] == 6379)
                    .expect("an egress rule for Redis");
                assert_eq!(
                    redis_rule["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
                    "redis-cluster"
                );
            }
            "namespaced-values.yaml" => {
                assert_eq!(env("WATCH_NAMESPACE").unwrap()["value"], "scans");
                let role = r.get("Role", FULLNAME);
                assert_eq!(role["metadata"]["namespace"], "scans");
                // Cluster-wide: only the metrics reviews and the reader role.
                let cluster_roles: BTreeSet<&str> = r
                    .all("ClusterRole")
                    .iter()
                    .map(|role| role["metadata"]["name"].as_str().unwrap())
                    .collect();
                let metrics_roles = [
                    format!("{FULLNAME}-metrics-auth"),
                    format!("{FULLNAME}-metrics-reader"),
                ];
                assert_eq!(
                    cluster_roles,
                    metrics_roles.iter().map(String::as_str).collect()
                );
            }
            "monitoring-values.yaml" => {
                for kind in ["ServiceMonitor", "PrometheusRule", "NetworkPolicy"] {
                    r.one(kind);
                }
                // Scraped over HTTPS with Prometheus' own token.
                let endpoint = &r.one("ServiceMonitor")["spec"]["endpoints"][0];
                assert_eq!(endpoint["scheme"], "https");
                assert!(endpoint["bearerTokenFile"].is_string());
                let dashboard = r.get("ConfigMap", &format!("{FULLNAME}-dashboard"));
                assert_eq!(dashboard["metadata"]["namespace"], "monitoring");
            }
            // Files added later (Redis Sentinel, ACL/TLS) only need to lint
            // and render until they bring their own expectations.
            _ => {}
        }
    }
}

#[test]
fn optional_parts_render_only_when_enabled() {
    let optional = |r: &Rendered| {
        let mut found: BTreeSet<String> = r
            .kinds()
            .into_iter()
            .filter(|k| k == "NetworkPolicy" || k == "PrometheusRule")
            .collect();
        if r.all("ConfigMap")
            .iter()
            .any(|cm| cm["metadata"]["name"] == format!("{FULLNAME}-dashboard").as_str())
        {
            found.insert("dashboard".into());
        }
        found
    };
    assert!(optional(&render(&[])).is_empty(), "off by default");
    for (flag, part) in [
        (NETWORK_POLICY, "NetworkPolicy"),
        ("prometheusRule.enabled=true", "PrometheusRule"),
        ("grafanaDashboard.enabled=true", "dashboard"),
    ] {
        assert_eq!(
            optional(&render(&["--set", flag])),
            BTreeSet::from([part.to_owned()]),
            "{flag}"
        );
    }
}

/// values.schema.json covers the new values: a typo or a wrong type fails
/// the install instead of being ignored.
#[test]
fn new_values_are_validated_by_the_schema() {
    for (flag, at) in [
        (
            "networkPolicy.enable=true",
            "'/networkPolicy': additional properties 'enable'",
        ),
        (
            "networkPolicy.egress.redis.ports[0]=0",
            "'/networkPolicy/egress/redis/ports/0'",
        ),
        (
            "networkPolicy.egress.assets.enabled=maybe",
            "'/networkPolicy/egress/assets/enabled'",
        ),
        ("helmTest.attempts=0", "'/helmTest/attempts'"),
        (
            "prometheusRule.alerts.stepErrors.ratio=2",
            "'/prometheusRule/alerts/stepErrors/ratio'",
        ),
        (
            "prometheusRule.alerts.redisUnavailable.for=soon",
            "'/prometheusRule/alerts/redisUnavailable/for'",
        ),
        (
            "prometheusRule.alerts.runsFailed.window=30",
            "'/prometheusRule/alerts/runsFailed/window'",
        ),
        (
            "prometheusRule.alerts.bogus.enabled=true",
            "'/prometheusRule/alerts': additional properties 'bogus'",
        ),
        (
            "grafanaDashboard.labels.grafana_dashboard=1",
            "'/grafanaDashboard/labels/grafana_dashboard'",
        ),
    ] {
        match try_render(&["--set", flag]) {
            Ok(_) => panic!("{flag} must be refused"),
            Err(e) => assert!(e.contains(&format!("at {at}")), "{flag}: {e}"),
        }
    }
}

/// The NetworkPolicy with the least it needs: the monitoring namespace and
/// a destination for each egress rule without a default.
const NETWORK_POLICY_SETTINGS: [&str; 5] = [
    "networkPolicy.metrics.namespace=monitoring",
    "networkPolicy.egress.apiServer.to[0].ipBlock.cidr=10.0.0.1/32",
    "networkPolicy.egress.redis.to[0].podSelector.matchLabels.app=redis",
    "networkPolicy.egress.providers.to[0].ipBlock.cidr=203.0.113.0/24",
    "networkPolicy.enabled=true",
];
const NETWORK_POLICY: &str = "networkPolicy.enabled=true,networkPolicy.metrics.namespace=monitoring,networkPolicy.egress.apiServer.to[0].ipBlock.cidr=10.0.0.1/32,networkPolicy.egress.redis.to[0].podSelector.matchLabels.app=redis,networkPolicy.egress.providers.to[0].ipBlock.cidr=203.0.113.0/24";

#[test]
fn network_policy_refuses_to_open_what_the_values_do_not_name() {
    assert_eq!(
        NETWORK_POLICY.split(',').count(),
        NETWORK_POLICY_SETTINGS.len()
    );
    // Each required value left out in turn (the settings without it), or
    // emptied, or a rule enabled without its destinations.
    let without = |setting: &str| {
        NETWORK_POLICY_SETTINGS
            .iter()
            .filter(|s| !s.starts_with(setting))
            .copied()
            .collect::<Vec<_>>()
            .join(",")
    };
    for (set, json, needed) in [
        (
            without("networkPolicy.metrics"),
            "",
            "networkPolicy.metrics.namespace",
        ),
        (
            without("networkPolicy.egress.apiServer"),
            "",
            "networkPolicy.egress.apiServer.to",
        ),
        (
            NETWORK_POLICY.to_owned(),
            "networkPolicy.egress.dns.to=[]",
            "networkPolicy.egress.dns.to",
        ),
        (
            without("networkPolicy.egress.redis"),
            "",
            "networkPolicy.egress.redis.to",
        ),
        (
            without("networkPolicy.egress.providers"),
            "",
            "networkPolicy.egress.providers.to",
        ),
        (
            format!("{NETWORK_POLICY},networkPolicy.egress.assets.enabled=true"),
            "",
            "networkPolicy.egress.assets.to",
        ),
    ] {
        let mut flags = vec!["--set", set.as_str()];
        if !json.is_empty() {
            flags.extend(["--set-json", json]);
        }
        match try_render(&flags) {
            Ok(_) => panic!("{flags:?}: rendered an open NetworkPolicy"),
            Err(e) => assert!(e.contains(&format!("needs {needed}")), "{flags:?}: {e}"),
        }
    }
}

/// A rule's `ports: []` would render a NetworkPolicy rule open to every
/// port: the chart's schema refuses it.
#[test]
fn network_policy_refuses_an_empty_ports_list() {
    for rule in ["apiServer", "dns", "redis", "providers"] {
        let ports = format!("networkPolicy.egress.{rule}.ports=[]");
        match try_render(&["--set", NETWORK_POLICY, "--set-json", &ports]) {
            Ok(_) => panic!("{ports}: rendered a rule open to every port"),
            Err(e) => assert!(
                e.contains(&format!("{rule}/ports")) || e.contains(&format!("{rule}.ports")),
                "{ports}: {e}"
            ),
        }
    }
}

#[test]
fn network_policy_allows_only_the_given_sources_and_destinations() {
    let values = chart().join("ci").join("monitoring-values.yaml");
    let r = render(&["-f", values.to_str().unwrap()]);
    let policy = r.one("NetworkPolicy");
    let pods = &r.get("Deployment", FULLNAME)["spec"]["template"]["metadata"]["labels"];
    assert!(matches(&policy["spec"]["podSelector"]["matchLabels"], pods));
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));

    // Ingress: the metrics port, from Prometheus' pods in the monitoring
    // namespace, and the `helm test` pod; nothing else.
    let ingress = policy["spec"]["ingress"].as_array().unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(
        ingress[0]["ports"],
        json!([{"port": "metrics", "protocol": "TCP"}])
    );
    let from = ingress[0]["from"].as_array().unwrap();
    assert_eq!(
        from[0],
        json!({
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        })
    );
    let test_pod = r.one("Pod");
    assert!(matches(
        &from[1]["podSelector"]["matchLabels"],
        &test_pod["metadata"]["labels"]
    ));
    assert!(
        from[1].get("namespaceSelector").is_none(),
        "the release's namespace"
    );
    assert_eq!(from.len(), 2);

    // Egress: each rule to the destinations and ports the values give.
    let rule = |ports: &[(u64, &str)], to: Value| {
        let ports: Vec<Value> = ports
            .iter()
            .map(|(port, protocol)| json!({"port": port, "protocol": protocol}))
            .collect();
        json!({"ports": ports, "to": to})
    };
    let egress = policy["spec"]["egress"].as_array().unwrap();
    let expected = [
        (
            "API server",
            rule(
                &[(443, "TCP"), (6443, "TCP")],
                json!([{"ipBlock": {"cidr": "10.0.0.1/32"}}]),
            ),
        ),
        (
            "DNS",
            rule(
                &[(53, "UDP"), (53, "TCP")],
                json!([{
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                }]),
            ),
        ),
        (
            "Redis",
            rule(
                &[(6379, "TCP")],
                json!([{
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "redis"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "redis"}},
                }]),
            ),
        ),
        (
            "providers",
            rule(
                &[(443, "TCP")],
                json!([{"ipBlock": {
                    "cidr": "0.0.0.0/0",
                    "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
                }}]),
            ),
        ),
        (
            "online checks (enabled in these values)",
            rule(
                &[(22, "TCP"), (443, "TCP")],
                json!([{"ipBlock": {"cidr": "10.20.0.0/16"}}]),
            ),
        ),
    ];
    for (i, (what, rule)) in expected.iter().enumerate() {
        assert_eq!(&egress[i], rule, "{what}");
    }
    assert_eq!(egress.len(), expected.len(), "no other egress rule");

    // The least values: four rules, every one with its destinations.
    let r = render(&["--set", NETWORK_POLICY]);
    let policy = r.one("NetworkPolicy");
    let egress = policy["spec"]["egress"].as_array().unwrap();
    assert_eq!(egress.len(), 4, "{egress:?}");
    assert!(
        egress
            .iter()
            .all(|rule| rule["to"].as_array().is_some_and(|to| !to.is_empty()))
    );
    assert!(
        policy["spec"]["ingress"][0]["from"][0]
            .get("podSelector")
            .is_none()
    );
}

// ---------------------------------------------------------------------------
// Alerts and dashboard: every query on metrics the operator exports.

/// The checker itself: it accepts real queries and refuses wrong names,
/// labels and values.
#[test]
fn query_checker_knows_the_exported_metrics() {
    for good in [
        "sum by (result) (rate(assetscan_reconciles_total[5m]))",
        r#"histogram_quantile(0.95, sum by (le, step) (rate(assetscan_step_duration_seconds_bucket{namespace=~"$namespace"}[$__rate_interval])))"#,
        r#"sum(increase(assetscan_reconcile_failures_total{reason="RedisUnavailable"}[1h])) > 0"#,
        "assetscan_locks_held + assetscan_watchdog_losses",
        "label_values(assetscan_locks_held, namespace)",
    ] {
        check_query(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for (bad, why) in [
        ("rate(assetscan_reconciles[5m])", "is not exported"),
        ("rate(assetscan_scans_total[5m])", "is not exported"),
        ("up == 0", "is not exported"),
        (
            r#"assetscan_reconciles_total{phase="FAILED"}"#,
            "has no label phase",
        ),
        (
            r#"assetscan_reconciles_total{result="exploded"}"#,
            "never written",
        ),
        (
            r#"assetscan_reconcile_failures_total{reason=~"RedisUnavailable|RedisDown"}"#,
            "never written",
        ),
        (
            "sum by (verdict) (assetscan_reconciles_total)",
            "has the label verdict",
        ),
        ("sum(rate(assetscan_step_errors_total[5m])", "unbalanced"),
        ("vector(1)", "no metric"),
    ] {
        match check_query(bad) {
            Ok(()) => panic!("{bad} must be refused"),
            Err(e) => assert!(e.contains(why), "{bad}: {e}"),
        }
    }
}

#[test]
fn prometheus_rule_alerts_on_exported_metrics() {
    let r = render(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.alertLabels.team=secops",
        "--set",
        "prometheusRule.labels.release=prometheus",
        "--set",
        "prometheusRule.alerts.notificationUndelivered.for=45m",
    ]);
    let rule = r.one("PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    assert_eq!(rule["metadata"]["labels"]["release"], "prometheus");
    let rules = rule["spec"]["groups"][0]["rules"].as_array().unwrap();
    let mut alerts = BTreeMap::new();
    for alert in rules {
        let name = alert["alert"].as_str().expect("alerting rules only");
        let expr = alert["expr"].as_str().unwrap();
        check_query(expr).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            ["critical", "warning"].contains(&alert["labels"]["severity"].as_str().unwrap()),
            "{name}"
        );
        assert_eq!(alert["labels"]["team"], "secops", "{name}");
        for annotation in ["summary", "description"] {
            assert!(
                alert["annotations"][annotation]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "{name} needs a {annotation}"
            );
        }
        alerts.insert(name.to_owned(), alert.clone());
    }
    assert_eq!(
        alerts.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "AssetScanHighRiskNotNotified",
            "AssetScanNoReplicaScraped",
            "AssetScanRedisUnavailable",
            "AssetScanRunsFailed",
            "AssetScanRunsOverdue",
            "AssetScanStepErrors"
        ]
    );
    let text = |field: &Value| field.as_str().unwrap_or_default().to_owned();
    for (alert, selects) in [
        ("AssetScanRedisUnavailable", r#"reason="RedisUnavailable""#),
        ("AssetScanRunsFailed", r#"result="failed""#),
        (
            "AssetScanHighRiskNotNotified",
            "max by (namespace) (assetscan_high_risk_unnotified_oldest_age_seconds) > 900",
        ),
        (
            "AssetScanRunsOverdue",
            "max by (namespace) (assetscan_overdue_oldest_age_seconds) > 1800",
        ),
        (
            "AssetScanNoReplicaScraped",
            r#"absent(assetscan_shards{namespace="secops"})"#,
        ),
    ] {
        let expr = text(&alerts[alert]["expr"]);
        assert!(expr.contains(selects), "{alert}: {expr}");
    }
    let undelivered = &alerts["AssetScanHighRiskNotNotified"];
    assert_eq!(undelivered["for"], "45m");
    // Prometheus' own templating survives Helm's.
    let description = text(&undelivered["annotations"]["description"]);
    assert!(
        description.contains("{{ $labels.namespace }}"),
        "{description}"
    );

    // An alert can be turned off alone.
    let r = render(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.alerts.stepErrors.enabled=false",
    ]);
    let rules = r.one("PrometheusRule")["spec"]["groups"][0]["rules"].clone();
    assert_eq!(rules.as_array().unwrap().len(), 5);
    assert!(!rules.to_string().contains("AssetScanStepErrors"));
}

/// Prometheus itself accepts the rules (`promtool check rules`), and each
/// alert fires on the series that mean trouble, only after its `for`, and
/// not on the others (`promtool test rules` with tests/gitops_kit/alerts_test.yaml).
#[test]
fn prometheus_rule_alerts_fire_when_they_should() {
    let r = render(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRule.alertLabels.team=secops",
    ]);
    let mut spec = r.one("PrometheusRule")["spec"].clone();
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    let promtool = |args: &[&str]| {
        let out = Command::new(promtool())
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(&rules, assetscan_operator::yaml::to_string(&spec).unwrap()).unwrap();
    promtool(&["check", "rules", "rules.yaml"]);
    // The unit tests compare labels; annotations are checked above.
    for group in spec["groups"].as_array_mut().unwrap() {
        for rule in group["rules"].as_array_mut().unwrap() {
            rule.as_object_mut().unwrap().remove("annotations");
        }
    }
    std::fs::write(&rules, assetscan_operator::yaml::to_string(&spec).unwrap()).unwrap();
    std::fs::copy(
        root()
            .join("tests")
            .join("gitops_kit")
            .join("alerts_test.yaml"),
        dir.path().join("alerts_test.yaml"),
    )
    .unwrap();
    promtool(&["test", "rules", "alerts_test.yaml"]);
}

#[test]
fn grafana_dashboard_queries_exported_metrics() {
    let file = chart().join("dashboards").join("assetscan-operator.json");
    let dashboard: Value = serde_json::from_str(&read(&file)).expect("the dashboard is JSON");
    let queries = dashboard_queries(&dashboard);
    assert!(queries.len() >= 10, "{queries:?}");
    for expr in &queries {
        check_query(expr).unwrap_or_else(|e| panic!("dashboard: {e}"));
    }
    // What it must show.
    let all = queries.join("\n");
    for metric in [
        "assetscan_reconciles_total",
        "assetscan_step_duration_seconds_bucket",
        "assetscan_stale_writes_rejected_total",
        "assetscan_lock_contention_total",
        "assetscan_notifications_sent_total",
        "assetscan_reconcile_failures_total",
        "assetscan_detection_to_notification_seconds_bucket",
        "assetscan_high_risk_unnotified_oldest_age_seconds",
        "assetscan_overdue_oldest_age_seconds",
        "assetscan_scans",
        "assetscan_reconcile_duration_seconds_bucket",
    ] {
        assert!(all.contains(metric), "no panel shows {metric}");
    }
    let panels = dashboard["panels"].as_array().unwrap();
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        assert!(panel["description"].as_str().is_some_and(|d| !d.is_empty()));
    }

    let r = render(&[
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.namespace=monitoring",
    ]);
    let cm = r.get("ConfigMap", &format!("{FULLNAME}-dashboard"));
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(cm["metadata"]["namespace"], "monitoring");
    let shipped: Value =
        serde_json::from_str(cm["data"]["assetscan-operator.json"].as_str().unwrap()).unwrap();
    assert_eq!(shipped, dashboard);
}

// ---------------------------------------------------------------------------
// A real operator process: the `helm test` hook's script, and the health
// script on the objects it writes.

/// How long a test waits for the event it is about: a guard against hangs.
const PATIENCE: Duration = Duration::from_secs(60);

/// Polls the object until `done` holds: it, as JSON.
async fn wait_for(
    api: &Api<AssetScan>,
    name: &str,
    what: &str,
    done: impl Fn(&AssetScan) -> bool,
) -> Value {
    let obj = wait::object(api, name, what, PATIENCE, done).await;
    serde_json::to_value(obj).unwrap()
}

/// `name`, of asset `<name>.example.com`, probed on 127.0.0.1 at `port`,
/// notifying nobody; with one package (Jinja2 3.1.4), or none.
fn probed(name: &str, port: u16, software: bool) -> AssetScan {
    let scan = scan(name)
        .asset(&format!("{name}.example.com"))
        .host("127.0.0.1", &[port])
        .notify(&[]);
    match software {
        true => scan.purl("pkg:pypi/jinja2@3.1.4").build(),
        false => scan.build(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_test_hook_and_health_against_a_real_operator() {
    let mut redis = RedisServer::start().expect("redis-server starts");
    let emu = Emulator::start(EmulatorOptions {
        crd_dir: Some(root().join("crds")),
        ..EmulatorOptions::default()
    })
    .await
    .expect("emulator starts");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig).unwrap();
    // Nothing listens on `closed`: an online check there finds the asset
    // offline, and the vulnerability source there fails at once.
    let closed = free_port();
    let op = start_operator(dir.path(), &redis.url(), &kubeconfig, closed);
    let port = op.port();
    let https = metrics_kit::https_client(([127, 0, 0, 1], port).into(), None);
    let readyz_answers = async |wanted: u16| {
        op.wait_for(&format!("/readyz answers {wanted}"), PATIENCE, async || {
            let answer = metrics_kit::https_get(&https, port, "/readyz", None).await;
            answer
                .is_ok_and(|(status, _)| status == wanted)
                .then_some(())
        })
        .await
    };
    readyz_answers(200).await;

    let rendered = render(&["--set", "helmTest.attempts=1"]);
    let hook = rendered.one("Pod");
    assert_eq!(hook["metadata"]["annotations"]["helm.sh/hook"], "test");
    let service = rendered.get("Service", &format!("{FULLNAME}-metrics"));
    assert!(
        !matches(&service["spec"]["selector"], &hook["metadata"]["labels"]),
        "the metrics Service must not pick the test pod"
    );
    let url = hook["spec"]["containers"][0]["env"][0]["value"]
        .as_str()
        .unwrap();
    assert_eq!(
        url,
        format!("https://{FULLNAME}-metrics.{NAMESPACE}.svc:8080/readyz")
    );
    let passed = run_hook(hook, port);
    assert!(
        passed.status.success(),
        "the hook fails on a ready operator: {}",
        String::from_utf8_lossy(&passed.stderr)
    );

    let api: Api<AssetScan> = Api::namespaced(emu.client().unwrap(), "default");
    let script = asset_scan_script();
    let verdicts = |obj: &Value| -> Vec<Health> {
        luas().iter().map(|lua| health(lua, &script, obj)).collect()
    };
    // Offline: the run finishes, Healthy.
    api.create(&PostParams::default(), &probed("offline", closed, false))
        .await
        .unwrap();
    let obj = wait_for(&api, "offline", "finished", is_terminal).await;
    for verdict in verdicts(&obj) {
        assert_eq!(verdict.status, "Healthy", "{obj}");
        assert!(
            verdict.message.ends_with("scan complete: asset offline"),
            "{verdict:?}"
        );
    }

    // Online (the operator's own port) with a vulnerability source that
    // refuses: the run fails, Degraded.
    api.create(&PostParams::default(), &probed("failing", port, true))
        .await
        .unwrap();
    let obj = wait_for(&api, "failing", "failed", is_terminal).await;
    assert_eq!(obj["status"]["phase"], "FAILED");
    for verdict in verdicts(&obj) {
        assert_eq!(verdict.status, "Degraded", "{obj}");
        assert!(verdict.message.contains("vuln_query failed"), "{verdict:?}");
    }

    // Suspended: the operator acknowledges the new generation, no run starts.
    let patch = |suspend: bool| Patch::Merge(json!({"spec": {"suspend": suspend}}));
    api.patch("offline", &PatchParams::default(), &patch(true))
        .await
        .unwrap();
    let obj = wait_for(&api, "offline", "suspended", |o| {
        o.status.as_ref().and_then(|s| s.observed_generation) == o.metadata.generation
            && reason(o, ConditionType::Reconciling) == Some("Suspended")
    })
    .await;
    for verdict in verdicts(&obj) {
        assert_eq!(verdict.status, "Suspended", "{obj}");
    }

    // Redis goes away: /readyz fails, and so does the hook.
    redis.stop();
    readyz_answers(503).await;
    let failed = run_hook(hook, port);
    assert!(!failed.status.success(), "the hook passes without Redis");
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("no ready operator"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );

    // Resumed while Redis is down: the new run stalls, Degraded.
    api.patch("offline", &PatchParams::default(), &patch(false))
        .await
        .unwrap();
    let obj = wait_for(&api, "offline", "stalled on Redis", |o| {
        reason(o, ConditionType::Stalled) == Some("RedisUnavailable")
            && o.status
                .as_ref()
                .and_then(|s| ConditionType::Stalled.find(&s.conditions))
                .and_then(|c| c.observed_generation)
                == o.metadata.generation
    })
    .await;
    for verdict in verdicts(&obj) {
        assert_eq!(verdict.status, "Degraded", "{obj}");
        assert!(
            verdict.message.starts_with("RedisUnavailable: "),
            "{verdict:?}"
        );
    }
}
