//! The one place where an AssetScan becomes the domain's Kubernetes-free
//! types: the pipeline's request (target, packages and policy, channels,
//! the token floor its status records) and the run decision's view of it.

use crate::kubernetes::controller::fleet::spread::rescan_interval;
use crate::kubernetes::crd::{self, AssetScan};
use assetscan_domain::reference::RefError;
use assetscan_domain::run::{Recorded, RunView};
use assetscan_domain::{AssetId, InvalidId, Origin, RESCAN_ANNOTATION, ScanRequest, fence};
use assetscan_domain::{
    Package, PackageError, Policy, RunDecision, SbomRef, SbomRefError, Target, TriageRequest,
};
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// A spec the pipeline cannot run. The CRD's schema and CEL rules make this
/// unreachable for objects the API server accepted; the controller says so
/// on the object rather than retrying forever.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("spec.assetId: {0}")]
    AssetId(#[source] InvalidId),
    #[error("spec.target needs exactly one of host (with ports) or inventoryRef")]
    Target,
    #[error("spec.target.inventoryRef: {0}")]
    InventoryRef(#[source] RefError),
    #[error("spec.{0}")]
    Sbom(#[source] SbomRefError),
    #[error("spec.vex[{index}]: {source}")]
    Vex {
        index: usize,
        #[source]
        source: SbomRefError,
    },
    #[error("spec.software and spec.sbom are both set: give one")]
    SoftwareTwice,
    #[error("spec.software[{index}]: {source}")]
    Package {
        index: usize,
        #[source]
        source: PackageError,
    },
}

/// The pipeline's request for `run` of `obj`, on behalf of `holder`.
pub fn scan_request(obj: &AssetScan, run: &str, holder: String) -> Result<ScanRequest, SpecError> {
    let spec = &obj.spec;
    let software = spec
        .software
        .iter()
        .enumerate()
        .map(|(index, p)| package(p).map_err(|source| SpecError::Package { index, source }))
        .collect::<Result<Vec<_>, _>>()?;
    let sbom = spec.sbom.as_ref().map(sbom_ref).transpose()?;
    if sbom.is_some() && !software.is_empty() {
        return Err(SpecError::SoftwareTwice);
    }
    let vex = (spec.vex.iter().enumerate())
        .map(|(index, v)| {
            SbomRef::new(&v.source, &v.reference, v.digest.as_deref())
                .map_err(|source| SpecError::Vex { index, source })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ScanRequest {
        asset: AssetId::new(spec.asset_id.clone()).map_err(SpecError::AssetId)?,
        run: run.to_owned(),
        target: target(&spec.target)?,
        software,
        sbom,
        policy: policy(&spec.policy),
        channels: spec.notify.clone(),
        token_floor: token_floor(obj),
        holder,
        owner: Some(owner_id(obj)),
        supersedes: None,
        expect_open: true,
        resolves_alert: high_risk_before(obj),
        origin: Some(origin(obj)),
        triage: TriageRequest {
            vex,
            statements: Vec::new(),
        },
    })
}

/// Whether the object's last run ended with a high risk, as its status
/// stands before this run: a clean end of this run resolves that alert.
fn high_risk_before(obj: &AssetScan) -> bool {
    obj.status.as_ref().and_then(|s| s.high_risk) == Some(true)
}

/// The object as the notifications name it.
fn origin(obj: &AssetScan) -> Origin {
    let meta = &obj.metadata;
    Origin {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
    }
}

/// The floor for the next fencing token (`acquire`'s ARGV): the token the
/// status last recorded (see [`fence::floor`]).
pub fn token_floor(obj: &AssetScan) -> u64 {
    fence::floor(obj.status.as_ref().and_then(|s| s.fencing_token))
}

/// The owner of the object's runs in the ticket store.
pub fn owner_id(obj: &AssetScan) -> String {
    assetscan_domain::owner_id(obj.metadata.uid.as_deref())
}

/// What the run decision reads of the object. The rescan annotation's
/// minimum interval is the operator's setting, not the object's: it is
/// zero here, and the reconcile sets it (`apply.rs`).
pub fn run_view(obj: &AssetScan) -> RunView {
    let status = obj.status.as_ref();
    RunView {
        owner: owner_id(obj),
        generation: obj.metadata.generation.unwrap_or(0),
        suspend: obj.spec.suspend,
        rescan_every: rescan_interval(&obj.spec),
        rescan_asked: (obj.metadata.annotations.as_ref())
            .and_then(|a| a.get(RESCAN_ANNOTATION))
            .cloned(),
        rescan_min_interval: Duration::ZERO,
        recorded: Recorded {
            run: status.and_then(|s| s.run.clone()),
            phase: status.and_then(|s| s.phase),
            next_scan: status.and_then(|s| s.next_scan_time.as_ref()).map(|t| t.0),
            handled_rescan: status.and_then(|s| s.last_handled_rescan.clone()),
            ended: status.and_then(|s| s.last_scan_time.as_ref()).map(|t| t.0),
        },
    }
}

/// The run id of scan `scan` of the object's current generation.
pub fn run_id(obj: &AssetScan, scan: u64) -> String {
    run_view(obj).run_id(scan)
}

fn target(target: &crd::Target) -> Result<Target, SpecError> {
    match (&target.host, &target.inventory_ref) {
        (Some(host), None) => Ok(Target::Tcp {
            host: host.clone(),
            ports: target.ports.clone(),
        }),
        (None, Some(id)) => Target::inventory(id).map_err(SpecError::InventoryRef),
        _ => Err(SpecError::Target),
    }
}

fn sbom_ref(sbom: &crd::SbomReference) -> Result<SbomRef, SpecError> {
    SbomRef::new(&sbom.source, &sbom.reference, sbom.digest.as_deref()).map_err(SpecError::Sbom)
}

fn package(package: &crd::Package) -> Result<Package, PackageError> {
    let crd::Package {
        name,
        ecosystem,
        version,
        purl,
    } = package;
    match (purl, ecosystem, name, version) {
        (Some(purl), None, None, None) => Package::purl(purl),
        (None, Some(ecosystem), Some(name), Some(version)) => {
            Package::coordinates(ecosystem, name, version)
        }
        _ => Err(PackageError::Form),
    }
}

fn policy(policy: &crd::Policy) -> Policy {
    Policy {
        cvss_threshold: policy.cvss_threshold,
        threat_intel: policy.threat_intel,
        epss_threshold: policy.epss_threshold,
        min_coverage: policy.min_coverage,
    }
}

/// Since when the object's next run is due and not started, as its status
/// tells: its next scan's time, or its creation when it never ran. A run
/// in progress has started; a run due by a spec change or a rescan request
/// has no recorded time (the fleet's `Waiting` covers those it could not start).
pub(in crate::kubernetes::controller) fn due_since(
    obj: &AssetScan,
    now: Timestamp,
) -> Option<Timestamp> {
    if obj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let next = match run_view(obj).decide(now) {
        RunDecision::Run(run) | RunDecision::UnlessEarlierAlerts { next: run, .. } => run,
        RunDecision::Wait(_) | RunDecision::Suspended => return None,
    };
    let status = obj.status.as_ref();
    let recorded = status.and_then(|s| s.run.as_deref());
    if recorded == Some(next.as_str()) {
        return None;
    }
    match status.and_then(|s| s.next_scan_time.as_ref()) {
        Some(due) if due.0 <= now => Some(due.0),
        _ if recorded.is_none() => obj.metadata.creation_timestamp.as_ref().map(|t| t.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::crd::{AssetScanSpec, AssetScanStatus};
    use assetscan_domain::ThreatIntelPolicy;

    fn spec() -> AssetScanSpec {
        AssetScanSpec {
            asset_id: "web-01".into(),
            target: crd::Target {
                inventory_ref: Some("cmdb-1".into()),
                ..Default::default()
            },
            software: vec![],
            sbom: None,
            vex: vec![],
            policy: crd::Policy::default(),
            notify: vec!["secops".into()],
            rescan_interval: None,
            suspend: false,
            report_history_limit: None,
        }
    }

    fn named(ecosystem: &str, name: &str, version: &str) -> crd::Package {
        crd::Package {
            name: Some(name.into()),
            ecosystem: Some(ecosystem.into()),
            version: Some(version.into()),
            purl: None,
        }
    }

    #[test]
    fn the_spec_becomes_domain_types() {
        let mut spec = spec();
        spec.software = vec![
            named("PyPI", "jinja2", "3.1.4"),
            crd::Package {
                purl: Some("pkg:npm/lodash@4.17.20".into()),
                ..Default::default()
            },
        ];
        spec.policy.threat_intel = ThreatIntelPolicy::Always;
        spec.policy.cvss_threshold = 9.0;
        let req = scan_request(&AssetScan::new("web", spec), "r1", "me".into()).unwrap();
        assert_eq!(req.asset.as_str(), "web-01");
        assert_eq!(
            req.target,
            Target::Inventory {
                id: "cmdb-1".into()
            }
        );
        assert_eq!(
            req.software,
            [
                Package::coordinates("PyPI", "jinja2", "3.1.4").unwrap(),
                Package::purl("pkg:npm/lodash@4.17.20").unwrap(),
            ]
        );
        assert_eq!(
            req.policy,
            Policy {
                cvss_threshold: 9.0,
                threat_intel: ThreatIntelPolicy::Always,
                ..Policy::default()
            }
        );
        assert_eq!(
            (req.channels, req.holder),
            (vec!["secops".into()], "me".into())
        );
    }

    #[test]
    fn what_the_schema_refuses_is_refused_here_too() {
        let mut mixed = spec();
        mixed.software = vec![
            named("PyPI", "a", "1"),
            crd::Package {
                purl: Some("pkg:pypi/jinja2".into()),
                version: Some("3.1.4".into()),
                ..Default::default()
            },
        ];
        let err = scan_request(&AssetScan::new("web", mixed), "r1", "me".into()).unwrap_err();
        assert!(
            matches!(
                err,
                SpecError::Package {
                    index: 1,
                    source: PackageError::Form
                }
            ),
            "{err}"
        );
        let mut both = spec();
        both.target.host = Some("10.0.0.1".into());
        let err = scan_request(&AssetScan::new("web", both), "r1", "me".into()).unwrap_err();
        assert!(matches!(err, SpecError::Target), "{err}");
        let mut bad_id = spec();
        bad_id.asset_id = "a b".into();
        let err = scan_request(&AssetScan::new("web", bad_id), "r1", "me".into()).unwrap_err();
        assert!(matches!(err, SpecError::AssetId(_)), "{err}");
    }

    #[test]
    fn token_floor_is_the_recorded_token_or_zero() {
        let mut scan = AssetScan::new("web-01", spec());
        assert_eq!(token_floor(&scan), 0);
        scan.status = Some(AssetScanStatus {
            fencing_token: Some(7),
            revision: Some(4),
            ..Default::default()
        });
        assert_eq!(token_floor(&scan), 7);
        assert_eq!(
            scan_request(&scan, "r1", "me".into()).unwrap().token_floor,
            7
        );
    }

    #[test]
    fn references_are_refused_by_the_code_as_by_the_schema() {
        use crate::kubernetes::crd::{INVENTORY_REF_PATTERN, SBOM_REF_PATTERN};
        use assetscan_domain::reference::{SEGMENT_PATTERN, segment, segments};
        assert!(INVENTORY_REF_PATTERN.contains(SEGMENT_PATTERN));
        assert_eq!(SBOM_REF_PATTERN.matches(SEGMENT_PATTERN).count(), 2);
        let one = regex::Regex::new(INVENTORY_REF_PATTERN).unwrap();
        let many = regex::Regex::new(SBOM_REF_PATTERN).unwrap();
        for text in [
            "web-01",
            "a/b",
            "images/web/1.4.2.cdx.json",
            "..",
            ".",
            "...",
            "a/../b",
            "a/./b",
            "./a",
            "a/..",
            "/a",
            "a/",
            "a//b",
            "%2e%2e",
            "a%2Fb",
            "a\\b",
            "a b",
            "a?b",
            "a#b",
            "...a",
            "a..",
            "sha256:ab",
            "é",
            "",
        ] {
            assert_eq!(
                one.is_match(text),
                segment(text).is_ok(),
                "{text:?}: inventoryRef"
            );
            assert_eq!(
                many.is_match(text),
                segments(text).is_ok(),
                "{text:?}: sbom.ref"
            );
        }
    }

    #[test]
    fn a_dot_segment_or_a_second_software_list_is_refused() {
        let mut dots = spec();
        dots.target.inventory_ref = Some("..".into());
        let err = scan_request(&AssetScan::new("web", dots), "r1", "me".into()).unwrap_err();
        assert!(matches!(err, SpecError::InventoryRef(_)), "{err}");
        let mut by_ref = spec();
        by_ref.sbom = Some(crd::SbomReference {
            source: "artifacts".into(),
            reference: "web/1.cdx.json".into(),
            digest: None,
        });
        let req = scan_request(&AssetScan::new("web", by_ref.clone()), "r1", "me".into()).unwrap();
        assert_eq!(req.sbom.as_ref().map(|s| s.path()), Some("web/1.cdx.json"));
        by_ref.software = vec![named("PyPI", "a", "1")];
        let err =
            scan_request(&AssetScan::new("web", by_ref.clone()), "r1", "me".into()).unwrap_err();
        assert!(matches!(err, SpecError::SoftwareTwice), "{err}");
        by_ref.software.clear();
        if let Some(sbom) = by_ref.sbom.as_mut() {
            sbom.reference = "web/../../admin".into();
        }
        let err = scan_request(&AssetScan::new("web", by_ref), "r1", "me".into()).unwrap_err();
        assert!(matches!(err, SpecError::Sbom(_)), "{err}");
    }
}
