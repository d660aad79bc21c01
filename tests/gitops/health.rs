//! Argo CD's health scripts, on every sample and phase, and their copy in the ConfigMap patch.

use super::*;

#[test]
fn asset_scan_health_of_every_sample() {
    let statuses = check_health_tests("AssetScan");
    let all: BTreeSet<String> = ["Healthy", "Progressing", "Degraded", "Suspended"]
        .map(String::from)
        .into();
    assert_eq!(statuses, all, "a sample for each verdict");
}

#[test]
fn asset_scan_report_health_of_every_sample() {
    let statuses = check_health_tests("AssetScanReport");
    assert_eq!(
        statuses,
        ["Healthy", "Progressing"].map(String::from).into()
    );
}

/// The samples are statuses the operator can write: each one reads into the
/// operator's own types and back without losing or changing a field.
#[test]
fn asset_scan_samples_have_the_operators_status_shape() {
    let dir = customizations().join("AssetScan").join("testdata");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let obj = yaml_file(&path);
        let scan: AssetScan = serde_json::from_value(obj.clone())
            .unwrap_or_else(|e| panic!("{} is not an AssetScan: {e}", path.display()));
        if let Some(status) = obj.get("status") {
            let typed: &AssetScanStatus = scan.status.as_ref().unwrap();
            assert_eq!(
                &serde_json::to_value(typed).unwrap(),
                status,
                "{}: a field the operator does not write",
                path.display()
            );
        }
    }
}

/// An AssetScan at `generation` whose status is what the operator's mirror
/// wrote of `ticket` when it acted on generation `observed`.
fn mirrored(ticket: &Ticket, observed: i64, generation: i64, suspend: bool) -> Value {
    let status = status_from_ticket(
        ticket,
        None,
        Some(observed),
        Timestamp::from_second(1_767_600_000).unwrap(),
        None,
    );
    json!({
        "apiVersion": "assetscan.io/v1alpha1",
        "kind": "AssetScan",
        "metadata": {"name": "web-01", "namespace": "secops", "generation": generation},
        "spec": {"assetId": "web-01", "target": {"inventoryRef": "web-01"}, "suspend": suspend},
        "status": status,
    })
}

/// The script against what `status_from_ticket`, the operator's status
/// mirror, writes for every ticket status: a run under way is Progressing,
/// a FINISHED run Healthy whatever its verdict, a FAILED one Degraded.
#[test]
fn asset_scan_health_follows_the_mirror_for_every_phase() {
    let script = asset_scan_script();
    for phase in Status::ALL {
        // Run ids are `<uid prefix>-g<generation>-s<scan>`.
        let mut ticket = Ticket::new("web-01", "3f2a9c1e-g3-s0", 1_767_600_000_000);
        ticket.status = phase;
        let expected = match phase {
            Status::Finished => "Healthy",
            Status::Failed => "Degraded",
            _ => "Progressing",
        };
        for lua in luas() {
            let verdict = health(lua, &script, &mirrored(&ticket, 3, 3, false));
            assert_eq!(verdict.status, expected, "{phase}: {verdict:?}");
            if expected == "Progressing" {
                assert!(verdict.message.contains(phase.as_str()), "{verdict:?}");
            }
            // The spec changed and the operator has not acted on it yet.
            let stale = health(lua, &script, &mirrored(&ticket, 3, 4, false));
            assert_eq!(
                (stale.status.as_str(), stale.message.as_str()),
                (
                    "Progressing",
                    "waiting for the operator to observe generation 4"
                ),
                "{phase}"
            );
            // Suspended once no run is under way; a run in flight finishes.
            let suspended = health(lua, &script, &mirrored(&ticket, 3, 3, true));
            let want = match phase {
                Status::Failed => "Degraded",
                Status::Finished => "Suspended",
                _ => "Progressing",
            };
            assert_eq!(suspended.status, want, "{phase} suspended");
        }
    }

    // A confirmed high risk describes the asset: the run is still Healthy.
    let mut ticket = Ticket::new("web-01", "3f2a9c1e-g3-s0", 1_767_600_000_000);
    ticket.status = Status::Finished;
    ticket.facts.online = Some(true);
    ticket.facts.risk = Some(RiskFacts {
        high_risk: true,
        reasons: vec!["CVE-2024-3094 CVSS 10.0 >= 7.0".into()],
        confirmed_at: None,
    });
    for lua in luas() {
        let verdict = health(lua, &script, &mirrored(&ticket, 3, 3, false));
        assert_eq!(verdict.status, "Healthy");
        assert_eq!(
            verdict.message,
            "run 3f2a9c1e-g3-s0: scan complete; high risk: CVE-2024-3094 CVSS 10.0 >= 7.0"
        );
    }
}

/// Argo CD's rule: a script never errors, whatever the object holds.
#[test]
fn health_scripts_survive_malformed_objects() {
    let objects = [
        json!({}),
        json!({"metadata": {}, "status": "broken"}),
        json!({"metadata": {"generation": 2}, "spec": {"suspend": "yes"},
               "status": {"phase": 7, "run": 3, "conditions": "none"}}),
        json!({"metadata": {"generation": 2},
               "status": {"phase": "FAILED", "conditions": [5, {"type": "Stalled"}]}}),
        json!({"metadata": {"generation": 2},
               "status": {"phase": "FINISHED", "observedGeneration": 2, "highRisk": true,
                          "notification": {}, "conditions": [{"type": "HighRisk", "status": "True"}]}}),
        json!({"status": {"verdict": 3}}),
    ];
    for lua in luas() {
        for kind in ["AssetScan", "AssetScanReport"] {
            let script = customizations().join(kind).join("health.lua");
            for obj in &objects {
                health(lua, &script, obj);
            }
        }
    }
}

#[test]
fn argocd_cm_patch_carries_the_scripts() {
    let path = root()
        .join("deploy")
        .join("argocd")
        .join("argocd-cm-patch.yaml");
    let key = |kind: &str| format!("resource.customizations.health.assetscan.io_{kind}");
    let kinds = ["AssetScan", "AssetScanReport"];
    if std::env::var_os("UPDATE_ARGOCD_CM").is_some_and(|v| v == "1") {
        let mut text = String::from(
            "# The Argo CD health checks of assetscan.io kinds, for argocd-cm:\n\
             #   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file deploy/argocd/argocd-cm-patch.yaml\n\
             # A copy of resource_customizations/; regenerate with\n\
             #   UPDATE_ARGOCD_CM=1 cargo test --test gitops argocd_cm_patch\n\
             data:\n",
        );
        for kind in kinds {
            text.push_str(&format!("  {}: |\n", key(kind)));
            for line in read(&customizations().join(kind).join("health.lua")).lines() {
                match line {
                    "" => text.push('\n'),
                    _ => text.push_str(&format!("    {line}\n")),
                }
            }
        }
        std::fs::write(&path, text).unwrap();
    }
    let patch = yaml_file(&path);
    let data = patch["data"].as_object().expect("data");
    assert_eq!(data.len(), kinds.len(), "{data:?}");
    for kind in kinds {
        assert_eq!(
            data[&key(kind)].as_str(),
            Some(read(&customizations().join(kind).join("health.lua")).as_str()),
            "{} is behind resource_customizations/{kind}/health.lua: \
             UPDATE_ARGOCD_CM=1 cargo test --test gitops argocd_cm_patch",
            path.display()
        );
    }
}
