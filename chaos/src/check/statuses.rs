//! The AssetScans as the API server stored them: convergence, deletion,
//! the status fence, the status as a mirror of accepted ticket writes, the
//! verdict, and finished runs that must not run again after a data loss.

use super::{Claims, Invariant, Violation};
use crate::history::{AssetIdentity, History, ObjectHistory, StatusWrite, is_settled, is_terminal};
use crate::objects::Kind;
use serde_json::Value;
use std::collections::BTreeMap;

pub(super) fn check(history: &History, claims: &Claims, out: &mut Vec<Violation>) {
    for object in &history.objects {
        let mut violation = |invariant, detail: String| {
            out.push(Violation {
                invariant,
                subject: format!("AssetScan {}", object.name),
                detail,
            });
        };
        if object.deleted {
            deleted(object, history, &mut violation);
        } else {
            converged(object, &mut violation);
            verdict(object, &mut violation);
        }
        fence(object, &mut violation);
        mirror(object, claims, &mut violation);
        no_rerun_after_loss(object, history, claims, &mut violation);
    }
}

fn last_status(object: &ObjectHistory) -> Option<&Value> {
    object.last.as_ref()?.get("status")
}

fn phase(object: &ObjectHistory) -> Option<&str> {
    last_status(object)?.get("phase")?.as_str()
}

fn converged(object: &ObjectHistory, violation: &mut impl FnMut(Invariant, String)) {
    match &object.last {
        None => violation(Invariant::Converged, "gone, though never deleted".into()),
        Some(last) if !is_settled(last) => violation(
            Invariant::Converged,
            format!(
                "not settled: generation {}, status {}",
                last["metadata"]["generation"], last["status"]
            ),
        ),
        Some(_) => {}
    }
}

fn deleted(
    object: &ObjectHistory,
    history: &History,
    violation: &mut impl FnMut(Invariant, String),
) {
    if object.last.is_some() {
        violation(
            Invariant::DeletedGone,
            format!("still stored after its deletion, phase {:?}", phase(object)),
        );
    }
    // Under the identity bridge's layout, shared by every namespace's
    // AssetScan of the assetId, a key is counted for each of them.
    let identities = object.identities();
    let left: Vec<&String> = history
        .leftover_keys
        .iter()
        .filter(|k| AssetIdentity::of_key(k).is_some_and(|(i, _)| identities.contains(&i)))
        .collect();
    if !left.is_empty() {
        violation(
            Invariant::DeletedGone,
            format!("its tickets stay in Redis: {left:?}"),
        );
    }
}

fn fence(object: &ObjectHistory, violation: &mut impl FnMut(Invariant, String)) {
    for pair in object.status_writes.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let went_back = match (a.fence(), b.fence()) {
            (Some(before), after) => after.is_none_or(|after| after < before),
            (None, _) => false,
        };
        let generation_back = match (a.observed_generation(), b.observed_generation()) {
            (Some(before), after) => after.is_none_or(|after| after < before),
            (None, _) => false,
        };
        if went_back || generation_back {
            violation(
                Invariant::StatusFence,
                format!(
                    "status went backwards at resourceVersion {}: (token, revision) {:?} -> {:?}, observedGeneration {:?} -> {:?}",
                    b.resource_version,
                    a.fence(),
                    b.fence(),
                    a.observed_generation(),
                    b.observed_generation()
                ),
            );
        }
    }
}

fn mirror(object: &ObjectHistory, claims: &Claims, violation: &mut impl FnMut(Invariant, String)) {
    for write in &object.status_writes {
        let (Some((token, revision)), Some(run), Some(phase)) =
            (write.fence(), write.str("run"), write.str("phase"))
        else {
            continue;
        };
        let accepted = u64::try_from(token)
            .ok()
            .zip(u64::try_from(revision).ok())
            .is_some_and(|(t, r)| claims.accepted(&object.identities(), run, t, r, phase));
        if !accepted {
            violation(
                Invariant::StatusMirror,
                format!(
                    "status {phase} of run {run} under (token {token}, revision {revision}) at resourceVersion {} mirrors no write Redis accepted",
                    write.resource_version
                ),
            );
        }
    }
}

fn verdict(object: &ObjectHistory, violation: &mut impl FnMut(Invariant, String)) {
    if phase(object) != Some("FINISHED") {
        return;
    }
    let status = last_status(object).cloned().unwrap_or_default();
    let high_risk = status.get("highRisk").and_then(Value::as_bool);
    let true_verdict = match object.kind {
        Kind::HighRisk { .. } => high_risk == Some(true),
        Kind::Clean { .. } => high_risk == Some(false),
        Kind::Offline => high_risk.is_none() && status.get("vulnerabilities").is_none(),
    };
    if !true_verdict {
        violation(
            Invariant::Verdict,
            format!(
                "a {:?} asset FINISHED with highRisk {high_risk:?}, vulnerabilities {}",
                object.kind,
                status.get("vulnerabilities").cloned().unwrap_or_default()
            ),
        );
    }
}

/// A run whose end the status recorded before Redis lost its data is not
/// claimed again afterwards: the status, not Redis, is the durable record.
fn no_rerun_after_loss(
    object: &ObjectHistory,
    history: &History,
    claims: &Claims,
    violation: &mut impl FnMut(Invariant, String),
) {
    for loss in &history.data_losses {
        // The first record of each run's end stored before the loss.
        let mut ended: BTreeMap<&str, &StatusWrite> = BTreeMap::new();
        for write in object
            .status_writes
            .iter()
            .filter(|w| w.resource_version < loss.api_resource_version)
            .filter(|w| is_terminal(w.str("phase")))
        {
            if let Some(run) = write.str("run") {
                ended.entry(run).or_insert(write);
            }
        }
        for (run, write) in ended {
            if claims
                .epochs_of(&object.identities(), run)
                .iter()
                .any(|epoch| *epoch > loss.epoch)
            {
                violation(
                    Invariant::Terminal,
                    format!(
                        "run {run} ended {:?} at resourceVersion {}, before the data loss, and was claimed again after it",
                        write.str("phase"),
                        write.resource_version
                    ),
                );
            }
        }
    }
}
