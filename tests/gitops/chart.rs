//! The chart as a GitOps pipeline renders it: the minimum Kubernetes, the ci values, optional parts, the schema, the network policy.

use super::*;

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
