//! The options of an install: sharding, the disruption budget, notifier
//! secrets, scheduling, the ServiceMonitor, the notes and the metrics
//! behind the API server's reviews.

use super::*;

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
