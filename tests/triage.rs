//! Triage that sticks, end to end: the real controller against the API
//! emulator, a real redis-server, the OSV stub and the SBOM source over
//! real HTTP. A namespace's FindingException suppresses its own AssetScans'
//! findings (recorded with the exception that did it), not another
//! namespace's, and once it has expired the next run raises them again; a
//! VEX document beside the SBOM suppresses the findings it clears, named
//! by the binaries the SBOM lists.

mod controller_kit;

use assetscan_operator::domain::RESCAN_ANNOTATION;
use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport, FindingException};
use assetscan_testkit::stubs::Fixtures;
use assetscan_testkit::wait;
use controller_kit::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The two findings of [`ScanBuilder::high_risk`]'s packages, by the CVEs
/// their records are about (`UBUNTU-CVE-2024-6387`, `UBUNTU-CVE-2024-3094`).
const HIGH_RISK_CVES: [&str; 2] = ["CVE-2024-6387", "CVE-2024-3094"];

async fn namespace(h: &Harness, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(h.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

fn exceptions(h: &Harness, namespace: &str) -> Api<FindingException> {
    Api::namespaced(h.client.clone(), namespace)
}

async fn report_of(h: &Harness, obj: &AssetScan) -> AssetScanReport {
    let namespace = obj.metadata.namespace.as_deref().unwrap_or_default();
    let name = status(obj).latest_report.clone().expect("a report");
    Api::<AssetScanReport>::namespaced(h.client.clone(), namespace)
        .get(&name)
        .await
        .expect("the report")
}

fn suppressed_by(report: &AssetScanReport) -> Vec<(String, String)> {
    let triage = report.spec.triage.as_ref();
    (triage.iter().flat_map(|t| t.suppressed.iter()))
        .map(|s| (s.id.clone(), s.by.clone()))
        .collect()
}

fn high_risk(obj: &AssetScan) -> Option<bool> {
    status(obj).high_risk
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_suppresses_its_own_namespace_s_findings_until_it_expires() {
    let mut h = Harness::start().await;
    h.watched = None;
    h.config.channel_access =
        assetscan_operator::yaml::from_str("{secops-webhook: {namespaces: [team-a, team-b]}}")
            .unwrap();
    namespace(&h, "team-a").await;
    namespace(&h, "team-b").await;
    // team-a accepts both findings of its asset; team-b, with the same
    // asset id, decided nothing.
    let accepted: FindingException = serde_json::from_value(json!({
        "apiVersion": "assetscan.io/v1alpha1", "kind": "FindingException",
        "metadata": {"name": "openssh-xz"},
        "spec": {"vulnerabilities": HIGH_RISK_CVES, "state": "Accepted",
            "justification": "the hosts are unreachable from outside; replaced in Q3",
            "owner": "security@team-a.example", "expires": "2099-01-01T00:00:00Z"}
    }))
    .unwrap();
    exceptions(&h, "team-a")
        .create(&PostParams::default(), &accepted)
        .await
        .expect("the exception is accepted by the schema");
    let ctl = h.controller("triage").await;
    let team_a: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-a");
    let team_b: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-b");
    for api in [&team_a, &team_b] {
        create_in(api, &h.online(scan("web").high_risk())).await;
    }
    let done_a = wait::object(&team_a, "web", "end", PATIENCE, is_terminal).await;
    let done_b = wait::object(&team_b, "web", "end", PATIENCE, is_terminal).await;

    // team-a: both findings suppressed, with the exception that did it.
    assert_eq!(phase(&done_a), Some(Status::Finished));
    assert_eq!(high_risk(&done_a), Some(false), "{:?}", done_a.status);
    let summary = status(&done_a).vulnerabilities.clone().expect("a summary");
    assert_eq!((summary.total, summary.suppressed), (0, Some(2)));
    let by = suppressed_by(&report_of(&h, &done_a).await);
    assert_eq!(by.len(), 2, "{by:?}");
    assert!(
        by.iter()
            .all(|(_, by)| by == "FindingException team-a/openssh-xz"),
        "{by:?}"
    );
    let ticket = h.mirrored_ticket(&done_a).await;
    let triage = (ticket.facts.vulnerabilities.as_ref())
        .and_then(|v| v.triage.clone())
        .expect("the ticket's triage");
    assert_eq!(
        triage.suppressed[0].triage.owner.as_deref(),
        Some("security@team-a.example")
    );
    // team-b: the same findings alert; team-a's exception is not its own.
    assert_eq!(high_risk(&done_b), Some(true));
    assert!(suppressed_by(&report_of(&h, &done_b).await).is_empty());
    let origins: Vec<Value> = (h.stubs.sink.deliveries().iter())
        .map(|d| d.json()["origin"]["namespace"].clone())
        .collect();
    assert_eq!(origins, [json!("team-b")]);
    ctl.stop().await;

    // The acceptance expires: the next run raises the findings again and
    // records that the exception no longer applied.
    exceptions(&h, "team-a")
        .patch(
            "openssh-xz",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"expires": "2020-01-01T00:00:00Z"}})),
        )
        .await
        .expect("patched");
    let ctl = h.controller("triage-after").await;
    team_a
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {RESCAN_ANNOTATION: "1"}}})),
        )
        .await
        .expect("rescan asked");
    let again = wait::object(&team_a, "web", "the rescan's end", PATIENCE, |o| {
        is_terminal(o) && status(o).run.as_deref().is_some_and(|r| r.ends_with("-s1"))
    })
    .await;
    assert_eq!(high_risk(&again), Some(true), "{:?}", again.status);
    let report = report_of(&h, &again).await;
    let triage = report.spec.triage.expect("the expiry is recorded");
    assert_eq!(triage.expired, ["FindingException team-a/openssh-xz"]);
    assert!(triage.suppressed.is_empty());
    let delivered_a = (h.stubs.sink.deliveries().iter())
        .filter(|d| d.json()["origin"]["namespace"] == "team-a")
        .count();
    assert_eq!(delivered_a, 1);
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vex_document_beside_the_sbom_suppresses_the_findings_it_clears() {
    let h = Harness::start().await;
    let sbom = Fixtures::locate().path("sbom/osv-scanner-alpine-3.17.cdx-1.4.xml");
    h.stubs
        .sbom
        .put("images/alpine.cdx.xml", std::fs::read(sbom).unwrap());
    // OpenVEX's own example (go-vex-alpine-openssl.openvex-0.2.0.json), its
    // fourth statement kept and derived for this image: the CVE of the
    // fixture record the OSV stub serves for Alpine's openssl, and the
    // versions of the SBOM's libssl3 and libcrypto3. The statement names the
    // binaries; the finding is of their origin, openssl.
    let example = Fixtures::locate().path("sbom/vex/go-vex-alpine-openssl.openvex-0.2.0.json");
    let mut vex: Value = serde_json::from_slice(&std::fs::read(example).unwrap()).unwrap();
    let mut statement = vex["statements"][3].clone();
    statement["vulnerability"]["name"] = json!("CVE-2018-5407");
    statement["products"][0]["subcomponents"] = json!([
        {"@id": "pkg:apk/alpine/libssl3@3.0.8-r0"},
        {"@id": "pkg:apk/alpine/libcrypto3@3.0.8-r0"}
    ]);
    vex["statements"] = json!([statement]);
    h.stubs
        .sbom
        .put("images/alpine.vex.json", serde_json::to_vec(&vex).unwrap());
    h.stubs
        .osv
        .set_package_vulns("Alpine:v3.17", "openssl", &["CVE-2018-5407"]);
    let ctl = h.controller("vex").await;
    // CVE-2018-5407 scores 4.7: judged from 4.0, it is a high risk.
    for (name, vex) in [("bare", false), ("with-vex", true)] {
        let mut obj = h.online(scan(name).sbom("artifacts", "images/alpine.cdx.xml", None));
        obj.spec.policy.cvss_threshold = 4.0;
        if vex {
            obj.spec.vex = vec![assetscan_operator::kubernetes::crd::SbomReference {
                source: "artifacts".into(),
                reference: "images/alpine.vex.json".into(),
                digest: None,
            }];
        }
        h.create(&obj).await;
    }
    let bare = h.wait_terminal("bare", PATIENCE).await;
    let cleared = h.wait_terminal("with-vex", PATIENCE).await;
    assert_eq!(high_risk(&bare), Some(true), "{:?}", bare.status);
    assert_eq!(high_risk(&cleared), Some(false), "{:?}", cleared.status);
    let report = report_of(&h, &cleared).await;
    let triage = report.spec.triage.expect("a triage");
    assert_eq!(triage.statements, 1);
    let suppressed = &triage.suppressed[0];
    assert_eq!(
        (
            suppressed.id.as_str(),
            suppressed.package.as_str(),
            suppressed.state.as_str()
        ),
        (
            "CVE-2018-5407",
            "Alpine:v3.17/openssl@3.0.8-r0",
            "notAffected"
        )
    );
    assert_eq!(suppressed.by, "VEX artifacts/images/alpine.vex.json #1");
    assert_eq!(h.stubs.sbom.calls_of("images/alpine.vex.json"), 1);
    ctl.stop().await;
}
