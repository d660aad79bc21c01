//! The chart as shipped and the pod it renders: the CRD copies, the
//! version, `helm lint`, the default deployment, the environment of `run`,
//! the probes, the security context, the grace period and the start bound.

use super::*;

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
