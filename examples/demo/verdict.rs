//! The end state: shown as `kubectl get assetscans` would, and checked. The
//! demo passes only when the scenario ended as promised (the takeover
//! finished under a larger token, the stale write was rejected and never
//! recorded, each notification went out once) and every other example
//! reached its expected verdict.

use crate::{NAMESPACE, OFFLINE, SCENARIO};
use anyhow::{Context as _, Result, ensure};
use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanStatus};
use assetscan_operator::store::AuditEntry;
use assetscan_testkit::stubs::ProviderStubs;
use std::path::Path;
use std::process::Command;

/// `kubectl get assetscans` through the emulator, or the same columns
/// printed here when kubectl is not installed.
pub fn print_table(scans: &[AssetScan], kubeconfig: &Path) {
    println!("\n$ kubectl get assetscans");
    let kubectl = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "assetscans", "-n", NAMESPACE])
        .output();
    if let Ok(out) = kubectl
        && out.status.success()
    {
        print!("{}", String::from_utf8_lossy(&out.stdout));
        return;
    }
    println!(
        "{:<16} {:<36} {:<12} {:<10} {:<9} {:>5}",
        "NAME", "ASSET", "PHASE", "HIGH-RISK", "NOTIFIED", "TOKEN"
    );
    for s in scans {
        let st = s.status.clone().unwrap_or_default();
        println!(
            "{:<16} {:<36} {:<12} {:<10} {:<9} {:>5}",
            s.metadata.name.clone().unwrap_or_default(),
            s.spec.asset_id,
            st.phase.map(|p| p.to_string()).unwrap_or_default(),
            st.high_risk.map(|h| h.to_string()).unwrap_or_default(),
            st.notification
                .as_ref()
                .and_then(|n| serde_json::to_value(n.state).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            st.fencing_token.map(|t| t.to_string()).unwrap_or_default(),
        );
    }
}

/// The final state, checked. Returns what was verified.
pub fn verify(
    scans: &[AssetScan],
    audit: &[AuditEntry],
    stubs: &ProviderStubs,
) -> Result<Vec<String>> {
    let mut checked = Vec::new();
    let scenario = scans
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some(SCENARIO))
        .context("web-01 is gone")?;
    let status = scenario.status.clone().unwrap_or_default();
    verify_takeover(&status, audit, &mut checked)?;
    verify_notifications(status, stubs, &mut checked)?;
    verify_every_scan(scans, &mut checked)?;
    Ok(checked)
}

/// web-01 finished with high risk under a token above replica-a's, whose
/// stale ASSET_OFFLINE was rejected, and never recorded.
fn verify_takeover(
    status: &AssetScanStatus,
    audit: &[AuditEntry],
    checked: &mut Vec<String>,
) -> Result<()> {
    ensure!(
        status.phase == Some(Status::Finished),
        "web-01 phase is {:?}",
        status.phase
    );
    ensure!(
        status.high_risk == Some(true),
        "web-01 is not marked high risk"
    );
    let stale: Vec<&AuditEntry> = audit
        .iter()
        .filter(|e| e.get("result") == Some("STALE_TOKEN"))
        .collect();
    ensure!(
        stale.len() == 1,
        "expected one rejected write, found {}",
        stale.len()
    );
    let rejected = stale[0];
    ensure!(
        rejected.get("to") == Some("ASSET_OFFLINE"),
        "the rejected write is not ASSET_OFFLINE"
    );
    let a_token = rejected.token().context("rejected write without token")?;
    let b_token = status.fencing_token.unwrap_or_default() as u64;
    ensure!(
        b_token > a_token,
        "final token {b_token} not above the stale {a_token}"
    );
    checked.push(format!("web-01 FINISHED with high risk under token {b_token}; replica-a's ASSET_OFFLINE with token {a_token} was rejected"));
    ensure!(
        !audit
            .iter()
            .any(|e| e.op() == "advance" && e.accepted() && e.get("to") == Some("ASSET_OFFLINE")),
        "an ASSET_OFFLINE write was accepted"
    );
    checked.push("no ASSET_OFFLINE was ever recorded for web-01".into());
    Ok(())
}

/// web-01's notification reached the webhook under the key its status
/// records, and billing-api's WeCom alert went out once.
fn verify_notifications(
    status: AssetScanStatus,
    stubs: &ProviderStubs,
    checked: &mut Vec<String>,
) -> Result<()> {
    let notified = status.notification.context("web-01 has no notification")?;
    let deliveries = stubs.sink.deliveries();
    let for_web01 = deliveries
        .iter()
        .filter(|d| d.header("idempotency-key") == Some(notified.idempotency_key.as_str()))
        .count();
    ensure!(
        for_web01 >= 1,
        "the webhook sink never got web-01's notification"
    );
    checked.push(format!(
        "web-01's notification reached the webhook ({for_web01} delivery, key {})",
        notified.idempotency_key
    ));
    ensure!(
        stubs.wecom.messages().len() == 1,
        "billing-api's WeCom alert count is {}",
        stubs.wecom.messages().len()
    );
    checked.push("billing-api's WeCom alert was sent once".into());
    Ok(())
}

/// Every AssetScan FINISHED; only the offline asset without a verdict.
fn verify_every_scan(scans: &[AssetScan], checked: &mut Vec<String>) -> Result<()> {
    for s in scans {
        let phase = s.status.as_ref().and_then(|st| st.phase);
        let name = s.metadata.name.clone().unwrap_or_default();
        ensure!(phase == Some(Status::Finished), "{name} ended {phase:?}");
        let offline = s
            .status
            .as_ref()
            .is_some_and(|st| st.high_risk.is_none() && st.vulnerabilities.is_none());
        ensure!(
            offline == OFFLINE.contains(&s.spec.target.inventory_ref.as_deref().unwrap_or("")),
            "{name}: unexpected verdict"
        );
    }
    checked.push(format!(
        "all {} AssetScans FINISHED; the offline asset was never queried for vulnerabilities",
        scans.len()
    ));
    Ok(())
}
