//! A real operator process: the helm test hook's script, and the health scripts against what it writes.

use super::*;

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
