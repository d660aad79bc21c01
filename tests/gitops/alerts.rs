//! Alerts and dashboard: every query on metrics the operator exports, and the alerts firing when they should.

use super::*;

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
