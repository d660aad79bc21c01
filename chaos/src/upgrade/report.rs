//! The end of an upgrade run: the history recorded (before the clean-up,
//! so that the retirements the deletions cause are no part of it) and
//! checked with the strict checker, every object validated under both
//! releases' CRDs, the AssetScans and the run's namespaces deleted, the
//! Lua scripts and the CRD fixtures compared with the previous release,
//! and what was found printed.

use super::release::{file_at, schema_changes, script_changes};
use super::scans::NAMESPACES;
use super::setup::Upgrade;
use super::validate::CrdValidator;
use crate::ChaosError;
use crate::check::{Invariant, Report, check_strict};
use crate::history::{History, ObjectHistory};
use crate::objects::Kind;
use assetscan_testkit::stubs::Delivery;
use assetscan_testkit::stubs::sink::Scheme;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Where the previous release's CRDs and objects are kept for `make test`.
pub const FIXTURES: &str = "chaos/tests/fixtures/releases";

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
    let recorded = record(&upgrade).await?;
    let validated = validate_both(&upgrade, &recorded.history).await?;
    let mut violations = clean_up(&upgrade).await?;
    let Upgrade {
        options,
        t0,
        replicas,
        previous,
        current,
        refused,
        started,
        ..
    } = upgrade;
    let grace = Duration::from_secs(20);
    let mut history = recorded.history;
    history.processes = tokio::task::block_in_place(|| replicas.terminate_all(grace));
    save(&options.dir.join("history.json"), &history)?;
    let report = check_strict(&history);
    summarize(&history, &started, refused.len());
    violations += alerts(&history, &report, &recorded.schemes, &recorded.refusals);
    println!(
        "stale writes refused by Redis: {}; raw duplicate deliveries: {:?}",
        report.stale_writes_rejected, report.duplicates
    );
    println!("invariants:");
    let counts = report.by_invariant();
    for invariant in Invariant::STRICT {
        let n = counts.get(&invariant).copied().unwrap_or(0);
        let shown = if n == 0 {
            "ok".to_owned()
        } else {
            format!("{n} VIOLATED")
        };
        println!("  {:<20} {shown}", format!("{invariant:?}"));
    }
    for v in report.violations.iter().take(SHOWN) {
        println!("    {v}");
    }
    if report.violations.len() > SHOWN {
        println!("    … {} more", report.violations.len() - SHOWN);
    }
    violations += report.violations.len() + refused.len();
    for line in &validated.lines {
        println!("{line}");
    }
    violations += validated.violations;
    let changes = schema_changes(&previous.crds, &current.crds);
    println!(
        "crd schema since the previous release: added {:?}, removed {:?}, newly required {:?}",
        changes.added, changes.removed, changes.newly_required
    );
    violations += changes.newly_required.len();
    violations += compare_previous(&options)?;
    println!(
        "\nupgrade test: {} in {:.0} s (history: {})",
        if violations == 0 {
            "PASSED".to_owned()
        } else {
            format!("FAILED, {violations} violations")
        },
        t0.elapsed().as_secs_f64(),
        options.dir.join("history.json").display()
    );
    Ok(Verdict { violations })
}

/// What the run recorded before its clean-up.
struct Recorded {
    /// Without the processes: they are recorded when the replicas stop,
    /// after the clean-up, which needs them for the finalizers.
    history: History,
    /// The scheme that verified each webhook delivery the receiver
    /// accepted.
    schemes: Vec<Scheme>,
    /// The webhook deliveries the receiver refused.
    refusals: Vec<Delivery>,
}

/// The objects as stored, the audit streams, the deliveries and the
/// tickets left: the history the checker reads, taken while everything the
/// run created is still there. Each object is named `<namespace>/<name>`.
async fn record(upgrade: &Upgrade) -> Result<Recorded, ChaosError> {
    let mut objects = Vec::new();
    for scan in &upgrade.created {
        objects.push(ObjectHistory {
            name: scan.id(),
            namespace: scan.namespace.to_owned(),
            asset: scan.object.asset.clone(),
            kind: scan.object.kind.clone(),
            deleted: false,
            status_writes: upgrade.cluster.status_writes(scan),
            last: upgrade.cluster.get(scan).await?,
        });
    }
    let history = History {
        objects,
        audit: upgrade.view.snapshot(0).await?,
        data_losses: Vec::new(),
        deliveries: crate::world::deliveries(&upgrade.stubs),
        processes: Vec::new(),
        leftover_keys: upgrade.view.ticket_keys().await?,
        timing: crate::world::timing(&upgrade.scale),
    };
    Ok(Recorded {
        history,
        schemes: (upgrade.stubs.sink.deliveries_by_scheme().into_iter())
            .map(|(_, scheme)| scheme)
            .collect(),
        refusals: upgrade.stubs.sink.refusals(),
    })
}

/// Deletes the run's AssetScans (with the replicas still running, for
/// their finalizers) and the namespaces it created. Printed apart from the
/// checks; an AssetScan still stored a minute later, or an error, is a
/// violation.
async fn clean_up(upgrade: &Upgrade) -> Result<usize, ChaosError> {
    let deleted = async {
        let left = upgrade.cluster.delete_all(&upgrade.created).await?;
        if left.is_empty() {
            upgrade
                .cluster
                .delete_namespaces(&upgrade.namespaces_created)
                .await?;
        }
        Ok::<_, ChaosError>(left)
    };
    let failures = match deleted.await {
        Ok(left) if left.is_empty() => {
            upgrade.say(format!(
                "clean-up: {} AssetScans deleted, namespaces {:?} deleted",
                upgrade.created.len(),
                upgrade.namespaces_created
            ));
            0
        }
        Ok(left) => {
            upgrade.say(format!(
                "clean-up FAILED: {} of {} AssetScans still stored a minute after their deletion (e.g. {}); namespaces {:?} kept",
                left.len(),
                upgrade.created.len(),
                left[0],
                upgrade.namespaces_created
            ));
            left.len()
        }
        Err(e) => {
            upgrade.say(format!("clean-up FAILED: {e}"));
            1
        }
    };
    Ok(failures)
}

/// The runs, the claims each release's replicas took, and every run that
/// ended FAILED with its last error.
fn summarize(history: &History, started: &[(String, &'static str)], refused: usize) {
    println!(
        "\nruns: {} AssetScans created in {}, {refused} refused by the API server",
        history.objects.len(),
        NAMESPACES.join(" and ")
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
    let status = |o: &ObjectHistory| o.last.as_ref().map(|l| l["status"].clone());
    let mut phases = BTreeMap::new();
    for object in &history.objects {
        let phase = status(object)
            .and_then(|s| s["phase"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "none".into());
        *phases.entry(phase).or_insert(0) += 1;
    }
    println!("  phases at the end: {phases:?}");
    for object in &history.objects {
        let Some(status) = status(object).filter(|s| s["phase"] == "FAILED") else {
            continue;
        };
        println!(
            "  FAILED: {} ({:?}): lastError {}",
            object.name, object.kind, status["lastError"]
        );
    }
}

/// The alerts: high-risk runs and those whose alert was accepted on every
/// channel, the webhook deliveries by the scheme that verified them, and
/// those the receiver refused; each refusal is a violation (returned).
fn alerts(history: &History, report: &Report, schemes: &[Scheme], refusals: &[Delivery]) -> usize {
    let high_risks: Vec<&ObjectHistory> = history
        .objects
        .iter()
        .filter(|o| matches!(o.kind, Kind::HighRisk { .. }))
        .collect();
    let lost: BTreeSet<&str> = report
        .violations
        .iter()
        .filter(|v| v.invariant == Invariant::EveryAlertDelivered)
        .map(|v| v.subject.as_str())
        .collect();
    let delivered = high_risks
        .iter()
        .filter(|o| !lost.contains(format!("AssetScan {}", o.name).as_str()))
        .count();
    println!(
        "alerts: {} high-risk runs, {delivered} of them delivered on every channel",
        high_risks.len()
    );
    let mut by_scheme = BTreeMap::new();
    for scheme in schemes {
        *by_scheme.entry(*scheme).or_insert(0) += 1;
    }
    println!(
        "  webhook deliveries accepted: {} (Standard Webhooks signature: {}, 0.1.0's X-AssetScan-Signature: {}); WeCom messages: {}",
        schemes.len(),
        by_scheme.get(&Scheme::Standard).unwrap_or(&0),
        by_scheme.get(&Scheme::Legacy).unwrap_or(&0),
        history.deliveries.len() - schemes.len()
    );
    println!(
        "  webhook deliveries refused by the receiver: {}",
        refusals.len()
    );
    for refusal in refusals.iter().take(SHOWN) {
        let signed: Vec<&str> = ["webhook-signature", "x-assetscan-signature"]
            .into_iter()
            .filter(|h| refusal.header(h).is_some())
            .collect();
        println!(
            "    VIOLATED: ticket {} signed with {signed:?}",
            refusal.json()["ticket_id"]
        );
    }
    if refusals.len() > SHOWN {
        println!("    … {} more", refusals.len() - SHOWN);
    }
    refusals.len()
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

/// What the validation under both CRD sets found, and its lines to print.
struct Validated {
    violations: usize,
    lines: Vec<String>,
}

/// Every object's last state under both CRD sets: refused under either,
/// or a field this tree's CRD drops, is a violation; a field the previous
/// CRD drops (new in this tree; a rollback loses it) is listed. On a
/// cluster, its API server answers (each set applied in turn, this tree's
/// last, and every object sent by dry run); else an emulator per set.
async fn validate_both(upgrade: &Upgrade, history: &History) -> Result<Validated, ChaosError> {
    let mut violations = 0;
    let mut lines = Vec::new();
    let mut dropped_by_previous = BTreeSet::new();
    for (name, crds, pruned_is_loss) in [
        ("the previous release's", &upgrade.previous.crds, false),
        ("this tree's", &upgrade.current.crds, true),
    ] {
        let validator = match upgrade.options.kubeconfig {
            Some(_) => {
                upgrade.cluster.apply_crds(crds).await?;
                CrdValidator::dry_run(name, upgrade.cluster.client())
            }
            None => CrdValidator::start(name, crds.clone()).await?,
        };
        for object in &history.objects {
            let Some(last) = &object.last else { continue };
            let verdict = validator.check(last).await?;
            if let Some(why) = verdict.refused {
                violations += 1;
                let why: String = why.chars().take(160).collect();
                if violations > SHOWN {
                    continue;
                }
                lines.push(format!(
                    "  CrdBoth              VIOLATED: {} refused under {} CRDs: {why}",
                    object.name, validator.name
                ));
            } else if pruned_is_loss && !verdict.pruned.is_empty() {
                violations += 1;
                if violations > SHOWN {
                    continue;
                }
                lines.push(format!(
                    "  CrdBoth              VIOLATED: {} loses {:?} under {} CRDs",
                    object.name, verdict.pruned, validator.name
                ));
            } else {
                dropped_by_previous.extend(verdict.pruned);
            }
        }
    }
    if violations > SHOWN {
        lines.push(format!(
            "  CrdBoth              … {} more",
            violations - SHOWN
        ));
    }
    let server = match upgrade.options.kubeconfig {
        Some(_) => "the cluster's API server, by dry run",
        None => "an API emulator per release",
    };
    if violations == 0 {
        lines.push(format!(
            "  CrdBoth              ok ({} objects valid under both releases' CRDs, on {server})",
            history.objects.len()
        ));
    }
    if !dropped_by_previous.is_empty() {
        lines.push(format!(
            "  note: fields the previous release's CRD drops (a rollback loses them): {dropped_by_previous:?}"
        ));
    }
    Ok(Validated { violations, lines })
}

/// The Lua scripts of both releases compared (printed), and the CRD
/// fixtures compared with the previous release's files when the history
/// is there: a fixture that differs is a violation.
fn compare_previous(options: &super::Options) -> Result<usize, ChaosError> {
    let changes =
        script_changes(&options.previous.tree, &options.current.tree).map_err(|source| {
            ChaosError::Io {
                context: "compare the Lua scripts".into(),
                source,
            }
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
    let version = options.previous_version;
    let fixtures = (options.current.tree)
        .join(FIXTURES)
        .join(version.to_string())
        .join("crds");
    let mut violations = 0;
    let Ok(entries) = std::fs::read_dir(&fixtures) else {
        println!(
            "fixtures: VIOLATED: {} missing: release {version}'s CRDs are not kept (docs/upgrading.md, 'Cutting a release')",
            fixtures.display()
        );
        return Ok(1);
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let kept = std::fs::read_to_string(entry.path()).unwrap_or_default();
        match file_at(
            &options.current.tree,
            &options.previous_commit,
            &format!("crds/{name}"),
        ) {
            Some(released) if released == kept => {
                println!("fixtures: crds/{name} is the previous release's")
            }
            Some(_) => {
                violations += 1;
                println!(
                    "fixtures: VIOLATED: {FIXTURES}/{version}/crds/{name} differs from the previous release's crds/{name}"
                );
            }
            None => println!(
                "fixtures: crds/{name}: the previous release's history is not in this clone, not compared"
            ),
        }
    }
    Ok(violations)
}
