//! What the operator may do and read: RBAC equal to the controller's
//! calls, the ConfigMap's config, and Redis's URL, Sentinel, ACL user and
//! TLS from values and Secrets.

use super::*;

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

    // One namespace: a Role and RoleBinding there, no operator ClusterRole.
    let r = render(&["--set", "watchNamespace=scans"]);
    assert_eq!(r.env_value("WATCH_NAMESPACE").as_deref(), Some("scans"));
    assert!(!r.has("ClusterRole", FULLNAME));
    assert_eq!(binding_names(&r), [format!("{FULLNAME}-metrics-auth")]);
    let role = r.get("Role", FULLNAME);
    assert_eq!(s(&role["metadata"]["namespace"]), "scans");
    assert_eq!(grants(role), namespaced_grants());
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

/// What the channels add: the namespaces' labels where a selector may
/// decide, the Secrets everywhere or in the listed namespaces alone, and
/// nothing without the channel objects.
#[test]
fn rbac_reads_labels_and_secrets_only_where_channels_need_them() {
    let r = render(&[]);
    // The namespaces' labels: with the channel objects on (a cluster
    // channel's access may select namespaces at any time), and else for a
    // configured channel's namespaceSelector alone; names alone need
    // nothing more.
    let labels = assetscan_operator::kubernetes::rbac::NAMESPACE_LABELS_ACCESS;
    assert_eq!(
        grants(r.get("ClusterRole", FULLNAME))
            .get(&(labels.group.to_owned(), labels.resource.to_owned())),
        Some(&labels.verbs.iter().map(|v| (*v).to_owned()).collect())
    );
    let off = "config.teamChannels.enabled=false";
    let selector =
        r#"config.channelAccess={"secops":{"namespaceSelector":{"matchLabels":{"a":"b"}}}}"#;
    let r = render(&["--set", off, "--set-json", selector]);
    let mut with_labels = grants_without_team_channels();
    with_labels.insert(
        (labels.group.to_owned(), labels.resource.to_owned()),
        labels.verbs.iter().map(|v| (*v).to_owned()).collect(),
    );
    assert_eq!(grants(r.get("ClusterRole", FULLNAME)), with_labels);
    let names = r#"config.channelAccess={"secops":{"namespaces":["team-a"]}}"#;
    let r = render(&["--set", off, "--set-json", names]);
    assert_eq!(
        grants(r.get("ClusterRole", FULLNAME)),
        grants_without_team_channels()
    );

    // The teams' Secrets readable in the listed namespaces alone: a Role
    // and binding in each, and no Secret in the ClusterRole.
    let listed = r#"rbac.secretNamespaces=["team-a","team-b"]"#;
    let r = render(&["--set-json", listed]);
    let mut without_secrets = controller_grants();
    without_secrets.remove(&(String::new(), "secrets".to_owned()));
    assert_eq!(grants(r.get("ClusterRole", FULLNAME)), without_secrets);
    let name = format!("{FULLNAME}-channel-secrets");
    let secrets = BTreeMap::from([(
        (String::new(), "secrets".to_owned()),
        BTreeSet::from(["get".to_owned()]),
    )]);
    for namespace in ["team-a", "team-b"] {
        let role = (r.all("Role").into_iter())
            .find(|role| s(&role["metadata"]["namespace"]) == namespace)
            .unwrap_or_else(|| panic!("a Role in {namespace}"));
        assert_eq!(s(&role["metadata"]["name"]), name);
        assert_eq!(grants(role), secrets);
        let binding = (r.all("RoleBinding").into_iter())
            .find(|b| s(&b["metadata"]["namespace"]) == namespace)
            .unwrap_or_else(|| panic!("a RoleBinding in {namespace}"));
        assert_eq!(
            binding["subjects"],
            yaml(&format!(
                "[{{kind: ServiceAccount, name: {FULLNAME}, namespace: {NAMESPACE}}}]"
            ))
        );
    }
    assert_eq!(r.all("Role").len(), 2);

    // Without team channels: no NotificationChannel, and no Secret read.
    let r = render(&["--set", "config.teamChannels.enabled=false"]);
    assert_eq!(
        grants(r.get("ClusterRole", FULLNAME)),
        grants_without_team_channels()
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
