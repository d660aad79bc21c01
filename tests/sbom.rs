//! Software by reference, end to end: the real controller against the API
//! emulator, a real redis-server, and an SBOM source over real HTTP serving
//! the public SBOM documents of `testkit/fixtures/sbom` (CycloneDX 1.6 and
//! 1.4 from Syft, GraalVM and the CycloneDX examples; SPDX 2.3 from the SPDX
//! examples). Each way an SBOM cannot be used (missing, oversized, cut
//! short, another digest, a slow source, an unknown source) ends the run
//! with its own condition reason, keeps the previous report and both
//! tickets.

mod controller_kit;

use assetscan_operator::domain::ticket::{Status, Ticket};
use assetscan_operator::domain::{AssetId, RESCAN_ANNOTATION, SbomProblem};
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport};
use assetscan_testkit::stubs::Fixtures;
use assetscan_testkit::stubs::SBOM_MAX_BODY_BYTES;
use controller_kit::*;
use kube::Api;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// A fixture of `sbom/`, byte for byte.
fn fixture(name: &str) -> Vec<u8> {
    let path = Fixtures::locate().path(&format!("sbom/{name}"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn reports(h: &Harness) -> Api<AssetScanReport> {
    Api::namespaced(h.client.clone(), NAMESPACE)
}

async fn ticket(h: &Harness, obj: &AssetScan, run: &str) -> Ticket {
    h.store()
        .await
        .get_ticket(&AssetId::new(obj.spec.asset_id.clone()).unwrap(), run)
        .await
        .expect("get ticket")
        .unwrap_or_else(|| {
            panic!(
                "{}: no ticket for run {run}",
                obj.metadata.name.as_deref().unwrap_or("?")
            )
        })
}

fn reason(obj: &AssetScan, type_: ConditionType) -> String {
    let status = obj.status.as_ref().expect("status");
    type_
        .find(&status.conditions)
        .expect("condition")
        .reason
        .clone()
}

/// The four documents, each on its own AssetScan: read once per run, their
/// purls become the packages the vulnerability query is asked about, and the
/// ticket and the report say which SBOM (source, ref, digest, counts) was
/// scanned. A rescan reads the document again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_sboms_are_read_over_http_and_recorded_with_the_run() {
    let h = Harness::start().await;
    // (name, fixture, ref, pinned?, packages, skipped, unsupported)
    let cases = [
        (
            "syft-go",
            "syft-go-module.cdx-1.6.json",
            "images/web/syft.cdx.json",
            false,
            1,
            0,
            0,
        ),
        (
            "graalvm",
            "graalvm-micronaut.cdx-1.6.json",
            "apps/micronaut.cdx.json",
            true,
            // The subject, a Maven artifact, is asked about too.
            3,
            1,
            0,
        ),
        (
            "laravel",
            "laravel-7.12.0.cdx-1.4.json",
            "apps/laravel/7.12.0.cdx.json",
            false,
            63,
            0,
            0,
        ),
        (
            "k8s-spdx",
            "k8s-bom-example11.spdx-2.3.json",
            "k8s/example11.spdx.json",
            true,
            // The deb has no `distro`: not asked, of an unknown release.
            3,
            0,
            1,
        ),
    ];
    // The stub does not evaluate versions: any tokio is affected.
    h.stubs
        .osv
        .set_package_vulns("crates.io", "tokio", &["GHSA-34jh-p97f-mpxf"]);
    let ctl = h.controller("ctl-a").await;
    for (name, file, reference, pinned, ..) in cases {
        let body = fixture(file);
        let pin = pinned.then(|| digest(&body));
        h.stubs.sbom.put(reference, body);
        let built = scan(name)
            .notify(&[])
            .sbom("artifacts", reference, pin.as_deref());
        h.create(&h.online(built)).await;
    }
    for (name, file, reference, _, packages, skipped, unsupported) in cases {
        let obj = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(
            phase(&obj),
            Some(Status::Finished),
            "{name}: {:?}",
            obj.status
        );
        let t = h.mirrored_ticket(&obj).await;
        let sbom = t
            .facts
            .sbom
            .clone()
            .unwrap_or_else(|| panic!("{name}: no sbom fact"));
        let expected_digest = digest(&fixture(file));
        assert_eq!(
            (
                sbom.source.as_str(),
                sbom.reference.as_str(),
                sbom.digest.as_ref().map(|d| d.to_string())
            ),
            ("artifacts", reference, Some(expected_digest.clone())),
            "{name}"
        );
        assert_eq!(
            (sbom.packages, sbom.skipped, sbom.unsupported),
            (packages, skipped, unsupported),
            "{name}"
        );
        assert_eq!(sbom.problem, None, "{name}");
        let report_name = status(&obj).latest_report.clone().expect("a report");
        let report = reports(&h).get(&report_name).await.unwrap();
        let listed = report.spec.sbom.expect("the report names its SBOM");
        assert_eq!(
            (
                listed.reference.as_str(),
                listed.digest.as_deref(),
                listed.packages
            ),
            (reference, Some(expected_digest.as_str()), packages),
            "{name}"
        );
        assert_eq!(h.stubs.sbom.calls_of(reference), 1, "{name}: read once");
    }
    let spdx = h.wait_terminal("k8s-spdx", PATIENCE).await;
    let found = h
        .mirrored_ticket(&spdx)
        .await
        .facts
        .vulnerabilities
        .unwrap();
    assert!(
        found
            .findings
            .iter()
            .any(|f| f.package == "crates.io/tokio@1.19.2"),
        "the SPDX purl reached the vulnerability query: {found:?}"
    );

    // A rescan reads the document again.
    h.annotate("syft-go", json!({ RESCAN_ANNOTATION: "1" }))
        .await;
    h.wait("syft-go", "rescanned", PATIENCE, |o| {
        o.status.as_ref().is_some_and(|s| {
            s.run.as_deref().is_some_and(|r| r.ends_with("-s1"))
                && s.phase == Some(Status::Finished)
        })
    })
    .await;
    assert_eq!(h.stubs.sbom.calls_of("images/web/syft.cdx.json"), 2);
    ctl.stop().await;
}

/// Each bad SBOM on its own AssetScan that first scanned a good one: the
/// edited spec's run fails with the problem's condition reason, writes no
/// report (the last scan's report stays the latest and exists), and both
/// runs' tickets are in the store, the failed one saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sbom_that_cannot_be_used_fails_the_run_and_loses_nothing() {
    let h = Harness::start().await;
    let good = fixture("syft-go-module.cdx-1.6.json");
    h.stubs.sbom.put("good.cdx.json", good.clone());
    // Derived from the Laravel fixture: padded past the source's cap with
    // spaces (still valid JSON), and cut in half.
    let laravel = fixture("laravel-7.12.0.cdx-1.4.json");
    let mut big = laravel.clone();
    big.resize(SBOM_MAX_BODY_BYTES + 1, b' ');
    h.stubs.sbom.put("big.cdx.json", big);
    h.stubs
        .sbom
        .put("cut.cdx.json", laravel[..laravel.len() / 2].to_vec());
    h.stubs.sbom.put("slow.cdx.json", good.clone());
    h.stubs.sbom.delay("slow.cdx.json", Duration::from_secs(3));
    let other_digest = digest(b"another document");
    // (name, source, ref, digest, problem)
    let cases = [
        (
            "missing",
            "artifacts",
            "missing.cdx.json",
            None,
            SbomProblem::NotFound,
        ),
        (
            "oversized",
            "artifacts",
            "big.cdx.json",
            None,
            SbomProblem::TooLarge,
        ),
        (
            "truncated",
            "artifacts",
            "cut.cdx.json",
            None,
            SbomProblem::Malformed,
        ),
        (
            "mismatch",
            "artifacts",
            "good.cdx.json",
            Some(other_digest.as_str()),
            SbomProblem::DigestMismatch,
        ),
        (
            "slow",
            "artifacts",
            "slow.cdx.json",
            None,
            SbomProblem::Unavailable,
        ),
        (
            "nowhere",
            "nowhere",
            "good.cdx.json",
            None,
            SbomProblem::SourceUnknown,
        ),
    ];
    let ctl = h.controller("ctl-a").await;
    for (name, ..) in cases {
        let built = scan(name)
            .notify(&[])
            .sbom("artifacts", "good.cdx.json", None);
        h.create(&h.online(built)).await;
    }
    let mut first = Vec::new();
    for (name, ..) in cases {
        let obj = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(phase(&obj), Some(Status::Finished), "{name}");
        let s = status(&obj);
        first.push((
            s.run.clone().unwrap(),
            s.latest_report.clone().expect("a report"),
        ));
    }
    for (name, source, reference, pin, _) in cases {
        h.merge(
            name,
            json!({"spec": {"sbom": {"source": source, "ref": reference, "digest": pin}}}),
        )
        .await;
    }
    for ((name, _, _, _, problem), (first_run, first_report)) in cases.into_iter().zip(first) {
        let obj = h.wait_terminal(name, PATIENCE).await;
        let s = status(&obj);
        assert_eq!(s.phase, Some(Status::Failed), "{name}");
        for type_ in [ConditionType::Ready, ConditionType::Stalled] {
            assert_eq!(reason(&obj, type_), problem.reason(), "{name}: {type_:?}");
        }
        assert_eq!(
            s.latest_report.as_deref(),
            Some(first_report.as_str()),
            "{name}: the last scan's report stays"
        );
        reports(&h)
            .get(&first_report)
            .await
            .unwrap_or_else(|e| panic!("{name}: report gone: {e}"));
        let failed = h.mirrored_ticket(&obj).await;
        assert_eq!(failed.status, Status::Failed, "{name}");
        assert_eq!(
            failed.facts.sbom.as_ref().and_then(|f| f.problem),
            Some(problem),
            "{name}"
        );
        let error = failed.last_error.expect("the failure is recorded");
        let message = s
            .conditions
            .iter()
            .map(|c| c.message.as_str())
            .collect::<Vec<_>>()
            .join(" | ");
        assert!(message.contains(&error.message), "{name}: {message}");
        assert_eq!(
            ticket(&h, &obj, &first_run).await.status,
            Status::Finished,
            "{name}: the first run's ticket stays"
        );
    }
    let slow = h.wait_terminal("slow", PATIENCE).await;
    let attempts = h.mirrored_ticket(&slow).await.last_error.unwrap().attempt;
    assert!(
        attempts > 1,
        "a slow source is asked again before the run gives up: {attempts}"
    );
    ctl.stop().await;
}

/// A source that redirects is not followed: the document must come from the
/// configured base URL. The redirect's target is never asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_refused() {
    use assetscan_operator::domain::SbomRef;
    use assetscan_operator::providers::sbom::{SbomSourceConfig, SbomSources};
    use assetscan_testkit::stubs::{Fault, SbomStub};
    use std::collections::BTreeMap;
    assetscan_operator::providers::install_crypto_provider();
    let stub = SbomStub::start().await.unwrap();
    stub.put("elsewhere.cdx.json", fixture("syft-go-module.cdx-1.6.json"));
    let location = format!("{}/elsewhere.cdx.json", stub.base_url());
    stub.faults().fail_next(
        1,
        Fault::Reply {
            status: 302,
            headers: vec![("location".into(), location)],
            body: Vec::new(),
        },
    );
    let config: BTreeMap<String, SbomSourceConfig> = assetscan_operator::yaml::from_str(&format!(
        "{{artifacts: {{baseUrl: '{}'}}}}",
        stub.base_url()
    ))
    .unwrap();
    let sources = SbomSources::from_config(&config).unwrap();
    let sbom = SbomRef::new("artifacts", "web.cdx.json", None).unwrap();
    let err = sources.read(&sbom).await.unwrap_err();
    assert_eq!(err.problem(), SbomProblem::Unavailable, "{err}");
    assert!(err.to_string().contains("302"), "{err}");
    assert_eq!(
        stub.document_calls(),
        1,
        "one request, answered with the redirect"
    );
    assert_eq!(stub.calls_of("elsewhere.cdx.json"), 0, "not followed");
}

/// The watch cache holds what reconcile needs, never a software list: an
/// AssetScan listing 500 packages (the schema's limit) costs a replica's
/// cache no more than one listing 5, though it is stored some 30 KB larger;
/// its run still scans all 500 (read from the object as stored when the run
/// starts), and its status writes are no larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_software_list_costs_the_cache_nothing() {
    use assetscan_operator::kubernetes::crd::Package;
    let h = Harness::start().await;
    let listing = |n: usize| {
        let mut built = scan(&format!("list-{n:03}"))
            .notify(&[])
            .high_risk()
            .build();
        let filler = (built.spec.software.len()..n).map(|i| Package {
            name: Some(format!("filler-package-{i:03}")),
            ecosystem: Some("PyPI".into()),
            version: Some("1.0.0".into()),
            purl: None,
        });
        built.spec.software.extend(filler);
        assert_eq!(built.spec.software.len(), n);
        built
    };
    let ctl = h.controller("ctl-a").await;
    for n in [5, 500] {
        let built = listing(n);
        h.stubs.inventory.set_online(&built.spec.asset_id, true);
        h.create(&built).await;
    }
    let mut stored = Vec::new();
    for n in [5, 500] {
        let obj = h.wait_terminal(&format!("list-{n:03}"), PATIENCE).await;
        assert_eq!(phase(&obj), Some(Status::Finished));
        // The run scanned the list it did not find in the cache.
        assert!(
            status(&obj).high_risk == Some(true),
            "list-{n:03}: {:?}",
            obj.status
        );
        stored.push(serde_json::to_vec(&obj).unwrap().len());
    }
    let cached = until_some("both cached as finished", PATIENCE, async || {
        let objects = ctl.ctx.cached();
        let bytes = |name: &str| {
            objects
                .iter()
                .find(|o| o.metadata.name.as_deref() == Some(name) && is_terminal(o))
                .map(|o| serde_json::to_vec(&**o).unwrap().len())
        };
        Some((bytes("list-005")?, bytes("list-500")?))
    })
    .await;
    let writes = |name: &str| {
        h.status_writes(name)
            .iter()
            .map(|s| serde_json::to_vec(s).unwrap().len())
            .max()
            .unwrap()
    };
    let (writes_5, writes_500) = (writes("list-005"), writes("list-500"));
    println!(
        "bytes per object: stored {} (5 packages) vs {} (500); cached {} vs {}; largest status write {writes_5} vs {writes_500}",
        stored[0], stored[1], cached.0, cached.1
    );
    assert!(
        stored[1] > stored[0] + 20_000,
        "the stored objects differ: {stored:?}"
    );
    assert!(cached.1 <= cached.0 + 16, "the cache does not: {cached:?}");
    assert!(
        writes_500 <= writes_5 + 16,
        "nor the status writes: {writes_5} vs {writes_500}"
    );
    ctl.stop().await;
}
