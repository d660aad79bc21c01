//! The end of an upgrade run: the history recorded and checked with the
//! chaos checker's invariants, every object validated under both
//! releases' CRDs, the Lua scripts and the CRD fixtures compared with the
//! previous release, and what was found printed.

use super::release::{file_at, schema_changes, script_changes};
use super::setup::Upgrade;
use super::validate::CrdValidator;
use crate::ChaosError;
use crate::check::{Invariant, check};
use crate::history::{History, ObjectHistory};
use crate::objects::Kind;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where the previous release's CRDs and objects are kept for `make test`.
pub const FIXTURES: &str = "chaos/tests/fixtures/previous-release";

/// Violations printed per check; the rest are counted.
const SHOWN: usize = 5;

/// Whether the run kept every promise.
#[derive(Debug)]
pub struct Verdict {
    pub violations: usize,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.violations == 0
    }
}

pub(super) async fn finish(upgrade: Upgrade) -> Result<Verdict, ChaosError> {
    let (history, ended) = record(upgrade).await?;
    save(&ended.options.dir.join("history.json"), &history)?;
    let report = check(&history);
    summarize(&history, &ended.started, ended.refused);
    println!(
        "stale writes refused by Redis: {}; raw duplicate deliveries: {:?}",
        report.stale_writes_rejected, report.duplicates
    );
    println!("invariants:");
    let counts = report.by_invariant();
    for invariant in Invariant::ALL {
        let n = counts.get(&invariant).copied().unwrap_or(0);
        let shown = if n == 0 {
            "ok".to_owned()
        } else {
            format!("{n} VIOLATED")
        };
        println!("  {:<16} {shown}", format!("{invariant:?}"));
    }
    for v in report.violations.iter().take(SHOWN) {
        println!("    {v}");
    }
    let mut violations = report.violations.len() + ended.refused;
    let changes = schema_changes(&ended.previous_crds, &ended.current_crds);
    println!(
        "crd schema since the previous release: added {:?}, removed {:?}, newly required {:?}",
        changes.added, changes.removed, changes.newly_required
    );
    violations += changes.newly_required.len();
    violations += validate_both(&history, ended.previous_crds, ended.current_crds).await?;
    violations += compare_previous(&ended.options)?;
    println!(
        "\nupgrade test: {} in {:.0} s (history: {})",
        if violations == 0 {
            "PASSED".to_owned()
        } else {
            format!("FAILED, {violations} violations")
        },
        ended.t0.elapsed().as_secs_f64(),
        ended.options.dir.join("history.json").display()
    );
    Ok(Verdict { violations })
}

/// What the end of the run keeps beside the history.
struct Ended {
    options: super::Options,
    t0: std::time::Instant,
    previous_crds: Vec<serde_json::Value>,
    current_crds: Vec<serde_json::Value>,
    refused: usize,
    started: Vec<(String, &'static str)>,
}

/// The objects as stored, then (on a cluster) their deletion, the replicas
/// stopped, the last audit snapshot: the history the checker reads.
async fn record(upgrade: Upgrade) -> Result<(History, Ended), ChaosError> {
    let mut objects = Vec::new();
    for planned in &upgrade.created {
        objects.push(ObjectHistory {
            name: planned.name.clone(),
            asset: planned.asset.clone(),
            kind: planned.kind.clone(),
            deleted: false,
            status_writes: upgrade.cluster.status_writes(&planned.name),
            last: upgrade.cluster.get(&planned.name).await?,
        });
    }
    if upgrade.options.kubeconfig.is_some() {
        let names: Vec<String> = upgrade.created.iter().map(|o| o.name.clone()).collect();
        upgrade.cluster.delete_all(&names).await?;
        upgrade.say(format!(
            "{} AssetScans deleted from the cluster",
            names.len()
        ));
    }
    let Upgrade {
        options,
        t0,
        scale,
        view,
        stubs,
        replicas,
        previous_crds,
        current_crds,
        refused,
        started,
        ..
    } = upgrade;
    let grace = Duration::from_secs(20);
    let processes = tokio::task::block_in_place(|| replicas.terminate_all(grace));
    let history = History {
        objects,
        audit: view.snapshot(0).await?,
        data_losses: Vec::new(),
        deliveries: crate::world::deliveries(&stubs),
        processes,
        leftover_keys: view.ticket_keys().await?,
        timing: crate::world::timing(&scale),
    };
    let ended = Ended {
        options,
        t0,
        previous_crds,
        current_crds,
        refused: refused.len(),
        started,
    };
    Ok((history, ended))
}

/// The runs, the claims each release's replicas took, the alerts.
fn summarize(history: &History, started: &[(String, &'static str)], refused: usize) {
    println!(
        "\nruns: {} AssetScans created, {refused} refused",
        history.objects.len()
    );
    for (release, label) in [
        ("previous", "the previous release"),
        ("this tree's", "this tree"),
    ] {
        let instances: Vec<String> = started
            .iter()
            .filter(|(_, r)| *r == release)
            .map(|(i, _)| format!("{i}#"))
            .collect();
        let claims = history
            .audit
            .iter()
            .filter(|r| r.op() == "acquire" && r.accepted())
            .filter(|r| {
                r.get("holder")
                    .is_some_and(|h| instances.iter().any(|i| h.starts_with(i)))
            })
            .count();
        println!(
            "  claims by {label}'s replicas ({} started): {claims}",
            instances.len()
        );
    }
    let mut phases = BTreeMap::new();
    for object in &history.objects {
        let last = object.last.as_ref();
        let phase = last
            .and_then(|l| l["status"]["phase"].as_str())
            .unwrap_or("none");
        *phases.entry(phase.to_owned()).or_insert(0) += 1;
    }
    println!("  phases at the end: {phases:?}");
    let high_risks = history
        .objects
        .iter()
        .filter(|o| matches!(o.kind, Kind::HighRisk { .. }))
        .count();
    println!(
        "alerts: {} deliveries (webhook and WeCom) for {high_risks} high-risk AssetScans",
        history.deliveries.len()
    );
}

fn save(path: &std::path::Path, value: &impl serde::Serialize) -> Result<(), ChaosError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| ChaosError::Io {
        context: "serialize the history".into(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(path, text).map_err(|source| ChaosError::Io {
        context: format!("write {}", path.display()),
        source,
    })
}

/// Every object's last state under both CRD sets: refused under either,
/// or a field this tree's CRD drops, is a violation; a field the previous
/// CRD drops (new in this tree; a rollback loses it) is listed.
async fn validate_both(
    history: &History,
    previous: Vec<serde_json::Value>,
    current: Vec<serde_json::Value>,
) -> Result<usize, ChaosError> {
    let previous = CrdValidator::start("the previous release's", previous).await?;
    let current = CrdValidator::start("this tree's", current).await?;
    let mut violations = 0;
    let mut dropped_by_previous = std::collections::BTreeSet::new();
    for object in &history.objects {
        let Some(last) = &object.last else { continue };
        for validator in [&previous, &current] {
            let verdict = validator.check(last).await?;
            let pruned_is_loss = std::ptr::eq(validator, &current);
            if let Some(why) = verdict.refused {
                violations += 1;
                let why: String = why.chars().take(160).collect();
                if violations > SHOWN {
                    continue;
                }
                println!(
                    "  CrdBoth          VIOLATED: {} refused under {} CRDs: {why}",
                    object.name, validator.name
                );
            } else if pruned_is_loss && !verdict.pruned.is_empty() {
                violations += 1;
                if violations > SHOWN {
                    continue;
                }
                println!(
                    "  CrdBoth          VIOLATED: {} loses {:?} under {} CRDs",
                    object.name, verdict.pruned, validator.name
                );
            } else {
                dropped_by_previous.extend(verdict.pruned);
            }
        }
    }
    if violations > SHOWN {
        println!("  CrdBoth          … {} more", violations - SHOWN);
    }
    if violations == 0 {
        println!(
            "  CrdBoth          ok ({} objects valid under both releases' CRDs)",
            history.objects.len()
        );
    }
    if !dropped_by_previous.is_empty() {
        println!(
            "  note: fields the previous release's CRD drops (a rollback loses them): {dropped_by_previous:?}"
        );
    }
    Ok(violations)
}

/// The Lua scripts of both releases compared (printed), and the CRD
/// fixtures compared with the previous release's files when the history
/// is there: a fixture that differs is a violation.
fn compare_previous(options: &super::Options) -> Result<usize, ChaosError> {
    let changes =
        script_changes(&options.previous_tree, &options.tree).map_err(|source| ChaosError::Io {
            context: "compare the Lua scripts".into(),
            source,
        })?;
    if changes.none() {
        println!(
            "lua: the scripts are the same in both releases (the side-by-side test of two script versions is chaos/tests/lua_versions.rs)"
        );
    } else {
        println!(
            "lua: changed {:?}, added {:?}, removed {:?}: both versions ran side by side above",
            changes.changed, changes.added, changes.removed
        );
    }
    let fixtures = options.tree.join(FIXTURES).join("crds");
    let mut violations = 0;
    let Ok(entries) = std::fs::read_dir(&fixtures) else {
        println!("fixtures: {} missing", fixtures.display());
        return Ok(1);
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let kept = std::fs::read_to_string(entry.path()).unwrap_or_default();
        match file_at(
            &options.tree,
            &options.previous_commit,
            &format!("crds/{name}"),
        ) {
            Some(released) if released == kept => {
                println!("fixtures: crds/{name} is the previous release's")
            }
            Some(_) => {
                violations += 1;
                println!(
                    "fixtures: VIOLATED: {FIXTURES}/crds/{name} differs from the previous release's crds/{name}"
                );
            }
            None => println!(
                "fixtures: crds/{name}: the previous release's history is not in this clone, not compared"
            ),
        }
    }
    Ok(violations)
}
