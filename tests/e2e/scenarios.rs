//! The lifecycle scenarios, written once for both backends: real operator
//! processes (two replicas where it matters) against the stack's API
//! server, Redis and provider stubs. What the backends do differently is
//! asked of [`crate::backend::Backend`], never assumed.

use crate::backend::GarbageCollector;
use crate::controller_kit::create_in;
use crate::controller_kit::kit::scans::{run_ended, scan, status};
use crate::controller_kit::team_channels::{
    channel_access_to, channel_condition, channel_in, each_team_alerted_on_its_own_channel,
    secret_in,
};
use crate::controller_kit::tenants::{Tenant, TwoTenants, share_no_lock_token_or_history};
use crate::metrics_kit;
use crate::stack::{Stack, metric_of};
use assetscan_operator::domain::RESCAN_ANNOTATION;
use assetscan_operator::domain::ticket::{NotificationState, Status};
use assetscan_operator::kubernetes::controller::{self, ConditionType};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport, FindingException};
use assetscan_operator::store::IdentityBridge;
use assetscan_testkit::process::OperatorProcess;
use assetscan_testkit::stubs::{Fixtures, SBOM_MAX_BODY_BYTES};
use assetscan_testkit::wait;
use assetscan_testkit::wait::until;
use futures::future::LocalBoxFuture;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use std::collections::BTreeSet;

pub type Scenario = fn(Stack) -> LocalBoxFuture<'static, ()>;

/// Every scenario, by name.
pub const SCENARIOS: &[(&str, Scenario)] = &[
    ("lifecycle", |s| Box::pin(lifecycle(s))),
    ("reports_pruned_and_collected", |s| Box::pin(reports(s))),
    ("stalled_executor_fenced", |s| Box::pin(stalled_executor(s))),
    ("metrics_behind_rbac", |s| Box::pin(metrics_behind_rbac(s))),
    ("two_namespaces_one_asset_id", |s| {
        Box::pin(two_namespaces_one_asset_id(s))
    }),
    ("findings_and_triage_per_namespace", |s| {
        Box::pin(findings_and_triage_per_namespace(s))
    }),
    ("team_channels", |s| Box::pin(team_channels(s))),
    ("secret_namespaces", |s| Box::pin(secret_namespaces(s))),
];

/// The run of generation `g`, scan `n`, of an object with owner id `owner`.
fn run_of(owner: &str, g: u64, n: u64) -> String {
    format!("{owner}-g{g}-s{n}")
}

/// An AssetScan's life under two replicas: created and scanned; a spec
/// edit runs the new generation; the rescan annotation runs once per
/// value; `suspend` stops runs, even a rescan that falls due; resuming
/// runs again; deleting it runs the finalizer, which removes the tickets
/// from Redis and keeps the fence, so tokens never repeat.
async fn lifecycle(s: Stack) {
    if s.backend.enforces_rbac() {
        the_operator_has_only_the_charts_access(&s).await;
    }
    let replicas = [s.operator("op-a", |c| c), s.operator("op-b", |c| c)];
    let created = s.create(&s.online(scan("life-01").high_risk())).await;
    let asset = created.spec.asset_id.clone();
    let owner = controller::owner_id(&created);
    let first = s
        .wait("life-01", "generation 1 ended", |o| {
            run_ended(o, &run_of(&owner, 1, 0))
        })
        .await;
    let s1 = status(&first).clone();
    assert_eq!(s1.phase, Some(Status::Finished), "{s1:#?}");
    assert_eq!(s1.vulnerabilities.as_ref().map(|v| v.total), Some(2));
    assert_eq!(
        s.delivered_keys(),
        BTreeSet::from([s1.ticket_id.clone().unwrap()])
    );

    // Spec edit: one more package, a new run of generation 2.
    let software = json!([
        {"name": "openssh", "ecosystem": "Debian:10", "version": "1:7.9p1-10+deb10u2"},
        {"name": "xz-utils", "ecosystem": "Debian:10", "version": "5.2.4-1+deb10u1"},
        {"name": "glibc", "ecosystem": "Debian:10", "version": "2.28-10+deb10u2"},
    ]);
    let second = edit_and_wait_for_its_run(&s, &owner, json!({"software": software}), 2).await;
    let s2 = status(&second).clone();
    assert_eq!(s2.observed_generation, Some(2));
    assert!(s2.fencing_token > s1.fencing_token, "{s2:#?}");
    assert_eq!(
        s2.vulnerabilities.as_ref().map(|v| v.total),
        Some(3),
        "the new spec was scanned"
    );
    let each_run_notified = BTreeSet::from([s1.ticket_id.unwrap(), s2.ticket_id.clone().unwrap()]);
    assert_eq!(s.delivered_keys(), each_run_notified, "one key per run");

    rescan_annotation_runs_once_per_value(&s, &replicas, &owner).await;
    let before = s.runs(&asset).await;
    suspend_stops_runs(&s, &replicas, &before).await;
    let last = edit_and_wait_for_its_run(&s, &owner, json!({"suspend": false}), 4).await;
    deletion_runs_the_finalizer(&s, &last).await;
}

/// Merges `spec` into life-01, which makes `generation`, and waits for
/// that generation's first run to end.
async fn edit_and_wait_for_its_run(
    s: &Stack,
    owner: &str,
    spec: serde_json::Value,
    generation: u64,
) -> AssetScan {
    let edited = s.merge("life-01", json!({ "spec": spec })).await;
    assert_eq!(edited.metadata.generation, Some(generation as i64));
    s.wait("life-01", &format!("generation {generation} ended"), |o| {
        run_ended(o, &run_of(owner, generation, 0))
    })
    .await
}

/// The operator's credentials are the chart's Role, not the caller's: it
/// grants no delete of AssetScans, so the API server refuses one.
async fn the_operator_has_only_the_charts_access(s: &Stack) {
    let api: Api<AssetScan> = Api::namespaced(s.operator_client.clone(), &s.namespace);
    match api.delete("absent", &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"), "{e:?}")
        }
        other => panic!("the operator's credentials could delete: {other:?}"),
    }
}

/// A new value of the rescan annotation starts exactly one run, recorded
/// as handled; the object touched otherwise starts none; both replicas
/// agree, since the value handled is in the status.
async fn rescan_annotation_runs_once_per_value(
    s: &Stack,
    replicas: &[OperatorProcess],
    owner: &str,
) {
    let handled = |scan: u64, value: &'static str| {
        let want = run_of(owner, 2, scan);
        move |o: &AssetScan| {
            run_ended(o, &want) && status(o).last_handled_rescan.as_deref() == Some(value)
        }
    };
    s.annotate("life-01", json!({ RESCAN_ANNOTATION: "t1" }))
        .await;
    s.wait("life-01", "rescan t1 ended", handled(1, "t1")).await;
    let asset = s.api().get("life-01").await.unwrap().spec.asset_id;
    let expected = BTreeSet::from([
        run_of(owner, 1, 0),
        run_of(owner, 2, 0),
        run_of(owner, 2, 1),
    ]);
    // Touched otherwise: reconciles follow, and start nothing.
    let all_reconciles = "assetscan_reconciles_total{";
    let before = counts(replicas, all_reconciles).await;
    let touched = s.annotate("life-01", json!({ "team": "secops" })).await;
    reconciled_since(s, replicas, "life-01", all_reconciles, &before).await;
    assert_eq!(
        s.runs(&asset).await,
        expected,
        "no run for a value already handled"
    );
    let after = s.api().get("life-01").await.unwrap();
    assert_eq!(status(&after).run, status(&touched).run);
    s.annotate("life-01", json!({ RESCAN_ANNOTATION: "t2" }))
        .await;
    s.wait("life-01", "rescan t2 ended", handled(2, "t2")).await;
    let mut with_t2 = expected;
    with_t2.insert(run_of(owner, 2, 2));
    assert_eq!(s.runs(&asset).await, with_t2, "one run per value");
}

/// Each replica's `sample` (summed over its label sets when it ends in `{`).
async fn counts(replicas: &[OperatorProcess], sample: &str) -> Vec<f64> {
    let mut counts = Vec::with_capacity(replicas.len());
    for op in replicas {
        counts.push(metric_of(op, sample).await);
    }
    counts
}

/// Waits until every replica's `sample` grew twice since `before` (read
/// before a change to the object): the first reconcile counted may have
/// begun before the change; a poke once it ended makes sure of one that
/// began after.
async fn reconciled_since(
    s: &Stack,
    replicas: &[OperatorProcess],
    name: &str,
    sample: &str,
    before: &[f64],
) {
    let grew_by = async |n: f64| {
        let now = counts(replicas, sample).await;
        now.iter().zip(before).all(|(now, was)| *now >= was + n)
    };
    until(
        "every replica reconciled after the change",
        s.patience(),
        async || grew_by(1.0).await,
    )
    .await;
    s.poke(name).await;
    until(
        "every replica reconciled after the poke",
        s.patience(),
        async || grew_by(2.0).await,
    )
    .await;
}

/// `suspend: true`: the generation is observed, nothing runs, not even a
/// rescan that falls due; the last run's result stays.
async fn suspend_stops_runs(s: &Stack, replicas: &[OperatorProcess], runs: &BTreeSet<String>) {
    let before = s.api().get("life-01").await.unwrap();
    let suspended = s.merge("life-01", json!({"spec": {"suspend": true}})).await;
    assert_eq!(suspended.metadata.generation, Some(3));
    let seen = s
        .wait("life-01", "suspended", |o| {
            o.status.as_ref().is_some_and(|st| {
                st.observed_generation == Some(3)
                    && ConditionType::Reconciling
                        .find(&st.conditions)
                        .is_some_and(|c| c.reason == "Suspended" && c.status == "False")
            })
        })
        .await;
    let (was, is) = (status(&before), status(&seen));
    assert_eq!(
        (&is.run, is.phase, is.fencing_token),
        (&was.run, Some(Status::Finished), was.fencing_token),
        "the last run's result stays"
    );
    // A rescan falls due (time travel, under the same fence): still nothing.
    let due = Timestamp::from_second((Timestamp::now() - SignedDuration::from_secs(5)).as_second())
        .unwrap();
    let suspended_reconciles = "assetscan_reconciles_total{result=\"suspended\"}";
    let before = counts(replicas, suspended_reconciles).await;
    s.merge_status_as_user("life-01", json!({"nextScanTime": due.to_string()}))
        .await;
    reconciled_since(s, replicas, "life-01", suspended_reconciles, &before).await;
    let asset = seen.spec.asset_id.clone();
    assert_eq!(&s.runs(&asset).await, runs, "no run while suspended");
}

/// Deleting the object: the finalizer removes its tickets, not the fence;
/// the same asset under a new object goes on from the fence.
async fn deletion_runs_the_finalizer(s: &Stack, last: &AssetScan) {
    let asset = last.spec.asset_id.clone();
    let last_token = status(last).fencing_token.unwrap() as u64;
    assert!(last.finalizers().iter().any(|f| f == controller::FINALIZER));
    s.api()
        .delete("life-01", &DeleteParams::default())
        .await
        .expect("delete");
    s.wait_gone("life-01").await;
    assert_eq!(s.runs(&asset).await, BTreeSet::new(), "tickets deleted");
    let fence: Option<String> = s
        .redis
        .query(redis::cmd("GET").arg(s.keys(&asset).fence()))
        .expect("GET fence");
    assert_eq!(fence, Some(last_token.to_string()), "the fence stays");
    s.create(&scan("life-02").asset(&asset).build()).await;
    let again = s.wait("life-02", "ended", status_ended).await;
    assert!(
        status(&again).fencing_token.unwrap() as u64 > last_token,
        "tokens never repeat: {:?} after {last_token}",
        status(&again).fencing_token
    );
}

fn status_ended(o: &AssetScan) -> bool {
    o.status
        .as_ref()
        .is_some_and(|st| st.phase.is_some_and(|p| p.is_terminal()))
}

/// `reportHistoryLimit` keeps the newest reports; deleting the AssetScan
/// leaves the rest to the garbage collector, which follows their owner
/// references. A bare API server has none: there they stay, owned by an
/// object that is gone.
async fn reports(s: Stack) {
    let _op = s.operator("op-a", |c| c);
    let first = s
        .create(&s.online(scan("report-02").high_risk().report_history_limit(2)))
        .await;
    let uid = first.uid().unwrap();
    let name_of = |run: &str| format!("report-02-g1-s{}", run.rsplit_once("-s").unwrap().1);
    s.wait("report-02", "its first report", |o| {
        status_ended(o)
            && status(o).latest_report.as_deref()
                == status(o).run.as_deref().map(name_of).as_deref()
    })
    .await;
    for value in ["t1", "t2", "t3"] {
        s.annotate("report-02", json!({ RESCAN_ANNOTATION: value }))
            .await;
        s.wait("report-02", "the rescan's report", |o| {
            let st = status(o);
            st.last_handled_rescan.as_deref() == Some(value)
                && st.phase == Some(Status::Finished)
                && st.latest_report.as_deref() == st.run.as_deref().map(name_of).as_deref()
        })
        .await;
    }
    let kept = ["report-02-g1-s2", "report-02-g1-s3"];
    until("the oldest reports pruned", s.patience(), async || {
        reports_of(&s, &uid).await == kept
    })
    .await;
    let obj = s.api().get("report-02").await.unwrap();
    assert_eq!(status(&obj).reports, ["report-02-g1-s3", "report-02-g1-s2"]);

    s.api()
        .delete("report-02", &DeleteParams::default())
        .await
        .unwrap();
    s.wait_gone("report-02").await;
    match s.backend.garbage_collector() {
        GarbageCollector::Emulated | GarbageCollector::ControllerManager => {
            until(
                "reports collected with their scan",
                s.patience(),
                async || reports_of(&s, &uid).await.is_empty(),
            )
            .await;
        }
        GarbageCollector::Absent => {
            assert_eq!(reports_of(&s, &uid).await, kept, "no collector: they stay");
        }
    }
}

/// The names of the reports owned by the object `uid`, sorted.
async fn reports_of(s: &Stack, uid: &str) -> Vec<String> {
    let all = s
        .reports()
        .list(&ListParams::default())
        .await
        .expect("list reports");
    let mut names: Vec<String> = all
        .items
        .into_iter()
        .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
        .map(|r| r.name_any())
        .collect();
    names.sort();
    names
}

/// Replica A claims the run, sees the asset offline and stalls right
/// before writing it down (SIGSTOP); its lock expires; replica B takes
/// over with a larger token, finds the asset online and a high risk,
/// notifies and finishes. A wakes up with its stale context: Redis refuses
/// its ticket write (`STALE_TOKEN`), and the API server's CEL rule refuses
/// its status write. The recorded state is B's, notified once.
async fn stalled_executor(s: Stack) {
    let (name, asset) = ("zombie-01", "zombie-01.dc1.example.com");
    s.stubs.inventory.set_online(asset, false);
    s.create(&scan(name).high_risk().build()).await;
    let drill = format!("stop-before-write=return({asset}:ASSET_OFFLINE)");
    let a = s.operator("op-a", |c| c.env("FAILPOINTS", drill));
    a.wait_stopped(s.patience()).await;
    let claimed = s
        .wait(name, "claimed by A", |o| {
            o.status
                .as_ref()
                .is_some_and(|st| st.fencing_token.is_some())
        })
        .await;
    let (a_token, a_revision) = (
        status(&claimed).fencing_token.unwrap(),
        status(&claimed).revision.unwrap(),
    );

    s.stubs.inventory.set_online(asset, true);
    let _b = s.operator("op-b", |c| c);
    let done = s.wait(name, "finished by B", status_ended).await;
    let b_status = status(&done).clone();
    assert_eq!(b_status.phase, Some(Status::Finished), "{b_status:#?}");
    assert!(b_status.fencing_token > Some(a_token), "{b_status:#?}");
    assert_eq!(
        b_status.notification.as_ref().map(|n| n.state),
        Some(NotificationState::Sent)
    );

    a.resume();
    until("Redis refused A's stale write", s.patience(), async || {
        s.audit(asset).await.iter().any(|e| {
            e.get("result") == Some("STALE_TOKEN")
                && e.get("to") == Some("ASSET_OFFLINE")
                && e.get("token") == Some(a_token.to_string().as_str())
        })
    })
    .await;
    let stale =
        json!({"phase": "ASSET_OFFLINE", "fencingToken": a_token, "revision": a_revision + 1});
    match s.try_merge_status_as_operator(name, stale).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{e:?}");
            assert!(e.message.contains("may not go backwards"), "{}", e.message);
        }
        other => panic!("the API server took A's stale status: {other:?}"),
    }
    let now = s.api().get(name).await.unwrap();
    assert_eq!(status(&now).fencing_token, b_status.fencing_token);
    assert_eq!(status(&now).phase, Some(Status::Finished));
    assert_eq!(s.stubs.sink.effects(), 1, "notified once");
}

/// The metrics port as deployed: TLS (a Secret's certificate), `/metrics`
/// 401 without a token, 403 to a ServiceAccount without the chart's
/// metrics-reader role, 200 to one bound to it, the tokens reviewed by the
/// backend's API server (TokenReview, SubjectAccessReview) with the
/// operator's credentials (on a cluster, the chart's ClusterRole for them).
async fn metrics_behind_rbac(s: Stack) {
    if !s.backend.binds_metrics_reader() {
        let docs = metrics_kit::reader_role("assetscan-e2e", &s.namespace);
        metrics_kit::create_cluster_scoped(&s.admin, &docs).await;
    }
    let (reader, outsider) = metrics_kit::tokens(&s.admin, &s.namespace).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key, ca) = metrics_kit::tls_files(dir.path());
    let flags: [std::ffi::OsString; 4] = [
        "--metrics-tls-cert-file".into(),
        cert.into(),
        "--metrics-tls-key-file".into(),
        key.into(),
    ];
    let op = s.operator("op-metrics", |c| c.secured_metrics().args(flags));
    let port = op.port();
    let https = metrics_kit::https_client(([127, 0, 0, 1], port).into(), Some(&ca));
    op.wait_for("/readyz answers 200 over https", s.patience(), async || {
        let answer = metrics_kit::https_get(&https, port, "/readyz", None)
            .await
            .ok()?;
        (answer.0 == 200).then_some(())
    })
    .await;
    metrics_kit::check_answers(&https, port, &reader, &outsider).await;
}

/// One operator for two teams, as the chart's cluster-wide install runs it
/// (a ClusterRole the backend's authorizer checks for both namespaces): the
/// scenario's namespace and a second one hold AssetScans of one `assetId`,
/// with the configuration a new install gets (`redis.identityBridge: auto`,
/// which a Redis without 0.1.0's keys decides off). Token sequences are
/// independent, a run holding one namespace's lock does not delay the
/// other's, each has its own audit history, and deleting one's AssetScans
/// leaves every key and status of the other's as it was
/// (`controller_kit::tenants`, as `tests/tenancy.rs` runs it in process).
async fn two_namespaces_one_asset_id(mut s: Stack) {
    s.edit_config(|text| {
        assert!(text.contains("identityBridge: true"), "{text}");
        text.replacen("identityBridge: true", "identityBridge: auto", 1)
    });
    assert_eq!(s.config.store().identity_bridge, IdentityBridge::Auto);
    let install = s.cluster_wide().await;
    let _op = s.operator_of_all(&install, "op-tenants");
    let tenants = TwoTenants {
        a: Tenant::new(&s.admin, &s.namespace),
        b: Tenant::new(&s.admin, &install.second),
        redis: &s.redis,
        stubs: &s.stubs,
        store: s.store().await,
        patience: s.patience(),
    };
    share_no_lock_token_or_history(&tenants).await;
}

/// The truth of a finding on the API server: osv-scanner's real SBOM of a
/// Debian 9 image (Syft 0.73, CycloneDX XML) scanned by one operator for
/// two namespaces, one `assetId`. `libssl1.1` is asked about as the source
/// package its advisories name, `openssl`, and the OpenSSL record the OSV
/// stub serves there is found in both. The first namespace's
/// FindingException accepts it: there the finding is suppressed, recorded
/// with the exception, and raises no high risk; the second namespace, which
/// decided nothing, sees the high risk. The exception and the status and
/// report fields are the CRDs' own, so the API server's schema admits them.
async fn findings_and_triage_per_namespace(mut s: Stack) {
    // The image's SBOM is 0.5 MB, past the kit's source cap.
    s.edit_config(|text| {
        let cap = format!("maxBodyBytes: {SBOM_MAX_BODY_BYTES}");
        assert!(text.contains(&cap), "{text}");
        text.replacen("identityBridge: true", "identityBridge: false", 1)
            .replacen(&cap, "maxBodyBytes: 4194304", 1)
    });
    let install = s.cluster_wide().await;
    let sbom = Fixtures::locate().path("sbom/osv-scanner-postgres-stretch.cdx-1.4.xml");
    s.stubs.sbom.put(
        "images/postgres.cdx.xml",
        std::fs::read(sbom).expect("the fixture"),
    );
    s.stubs
        .osv
        .set_package_vulns("Debian:9", "openssl", &["CVE-2018-5407"]);
    let accepted: FindingException = serde_json::from_value(json!({
        "apiVersion": "assetscan.io/v1alpha1", "kind": "FindingException",
        "metadata": {"name": "openssl-timing"},
        "spec": {"vulnerabilities": ["CVE-2018-5407"], "packages": ["Debian:9/openssl"],
            "state": "Accepted", "justification": "SMT is off on these hosts",
            "owner": "security@team-a.example", "expires": "2099-01-01T00:00:00Z"}
    }))
    .expect("an exception");
    let exceptions: Api<FindingException> = Api::namespaced(s.admin.clone(), &s.namespace);
    exceptions
        .create(&PostParams::default(), &accepted)
        .await
        .expect("the API server admits the exception");
    let _op = s.operator_of_all(&install, "op-triage");
    let namespaces = [s.namespace.clone(), install.second.clone()];
    for namespace in &namespaces {
        let mut obj = s.online(scan("pg").notify(&[]).sbom(
            "artifacts",
            "images/postgres.cdx.xml",
            None,
        ));
        obj.spec.policy.cvss_threshold = 4.0;
        create_in(&Api::namespaced(s.admin.clone(), namespace), &obj).await;
    }
    let mut done = Vec::new();
    for namespace in &namespaces {
        let api: Api<AssetScan> = Api::namespaced(s.admin.clone(), namespace);
        let obj = wait::object(&api, "pg", "the run's end", s.patience(), |o| {
            o.status
                .as_ref()
                .is_some_and(|st| st.phase.is_some_and(|p| p.is_terminal()))
        })
        .await;
        let report_name = (status(&obj).latest_report.clone())
            .unwrap_or_else(|| panic!("a report: {:?}", obj.status));
        let report = Api::<AssetScanReport>::namespaced(s.admin.clone(), namespace)
            .get(&report_name)
            .await
            .expect("the report");
        done.push((obj, report));
    }
    let [(accepted_obj, accepted_report), (other_obj, other_report)] = &done[..] else {
        unreachable!("two namespaces")
    };
    // Both asked under the source package: 135 of the 137 components.
    for (obj, report) in &done {
        let coverage = status(obj).coverage.clone().expect("coverage");
        assert_eq!(
            (coverage.listed, coverage.asked),
            (137, 135),
            "{coverage:?}"
        );
        assert!(report.spec.coverage.is_some());
    }
    let found = other_report.spec.findings.as_ref().expect("findings");
    assert!(
        found
            .items
            .iter()
            .any(|f| f.id == "CVE-2018-5407" && f.package.starts_with("Debian:9/openssl@")),
        "{found:?}"
    );
    assert_eq!(status(other_obj).high_risk, Some(true));
    // The namespace with the exception: suppressed, with the statement.
    assert_eq!(
        status(accepted_obj).high_risk,
        Some(false),
        "{:?}",
        accepted_obj.status
    );
    let triage = accepted_report.spec.triage.as_ref().expect("a triage");
    let suppressed = &triage.suppressed[0];
    assert_eq!(
        (
            suppressed.id.as_str(),
            suppressed.by.as_str(),
            suppressed.state.as_str()
        ),
        (
            "CVE-2018-5407",
            format!("FindingException {}/openssl-timing", s.namespace).as_str(),
            "accepted"
        )
    );
    assert!(other_report.spec.triage.is_none());
    exceptions
        .delete("openssl-timing", &DeleteParams::default())
        .await
        .expect("the exception removed");
}

/// Teams' own channels on the API server, under the chart's cluster-wide
/// RBAC (the backend's authorizer checks that the operator reads each
/// team's Secret by name): each team's NotificationChannel carries its own
/// namespace's alerts with its own Secret, a channel aimed at the cloud
/// metadata service is refused with a condition, and the configured
/// channel opened to the first namespace is refused to the second
/// (`controller_kit::team_channels`, as `tests/team_channels.rs` runs it in
/// process).
async fn team_channels(mut s: Stack) {
    let first = s.namespace.clone();
    s.edit_config(|text| {
        let access = format!("channelAccess: {}\n", channel_access_to(&first));
        team_channels_every_second(&format!("{access}{text}"))
    });
    let install = s.cluster_wide().await;
    let _op = s.operator_of_all(&install, "op-channels");
    let namespaces = [s.namespace.as_str(), install.second.as_str()];
    each_team_alerted_on_its_own_channel(&s.admin, &s.stubs, namespaces, s.patience()).await;
}

/// `text` with team channels built every second, and the egress policy
/// opening 127.0.0.1 (the stubs' address).
fn team_channels_every_second(text: &str) -> String {
    let tcp = "online: {tcp: {timeout: 1s},";
    assert!(text.contains(tcp), "{text}");
    let opened = "online: {tcp: {timeout: 1s, egress: {allow: [127.0.0.1/32]}},";
    format!(
        "teamChannels: {{resyncInterval: 1s}}\n{}",
        text.replacen(tcp, opened, 1)
    )
}

/// The chart's `rbac.secretNamespaces` under the API server's own
/// authorizer: the operator reads the Secrets of the namespace listed (a
/// Role there) and of no other, and a team channel elsewhere says so
/// (`Ready=False`, `SecretForbidden`), never a silent channel. The
/// emulator serves no Roles and authorizes everything (the backend says
/// so): there both channels are ready, and `tests/team_channels.rs`
/// injects the API server's refusal instead.
async fn secret_namespaces(mut s: Stack) {
    let first = s.namespace.clone();
    s.edit_config(team_channels_every_second);
    let listed = format!("rbac.secretNamespaces=[{first:?}]");
    let install = match s.backend.enforces_rbac() {
        true => s.cluster_wide_with(&["--set-json", &listed]).await,
        // The emulator serves no Roles, and authorizes every read.
        false => s.cluster_wide().await,
    };
    let _op = s.operator_of_all(&install, "op-secrets");
    let second = install.second.as_str();
    for namespace in [first.as_str(), second] {
        let keys = [("url", "http://127.0.0.1:9/chat")];
        secret_in(&s.admin, namespace, "chat", &keys).await;
        let spec = json!({"type": "slack", "secretRef": {"name": "chat"}});
        channel_in(&s.admin, namespace, "chat", spec).await;
    }
    let ready = ("Ready", "Ready");
    let (status, _) = channel_condition(&s.admin, (&first, "chat"), ready, s.patience()).await;
    assert_eq!(status, "True");
    if !s.backend.enforces_rbac() {
        let (status, _) = channel_condition(&s.admin, (second, "chat"), ready, s.patience()).await;
        assert_eq!(status, "True", "the emulator authorizes every read");
        return;
    }
    let forbidden = ("Ready", "SecretForbidden");
    let (status, message) =
        channel_condition(&s.admin, (second, "chat"), forbidden, s.patience()).await;
    assert_eq!(status, "False");
    assert!(
        message.starts_with(&format!(
            "the operator may not read Secret {second}/chat (forbidden)"
        )),
        "{message}"
    );
}
