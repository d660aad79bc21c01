//! The end-to-end suite: the lifecycle scenarios (`scenarios.rs`), run by
//! real operator processes, on one of two backends:
//!
//! ```text
//! cargo test --all-features --test e2e                                 # the API emulator (make test)
//! cargo test --all-features --test e2e -- --kubeconfig ~/.kube/config  # a real cluster (make e2e)
//! ```
//!
//! On a cluster the run installs the CRDs when they are absent and the
//! chart's RBAC in a namespace of its own, runs the operator with that
//! RBAC's ServiceAccount token, and removes what it created at the end,
//! whatever happened (`cluster.rs`); a scenario of two namespaces adds a
//! second namespace and the chart's cluster-wide RBAC, removed the same way. Its own options: `--kubeconfig PATH`,
//! `--no-garbage-collector` (a bare API server without
//! kube-controller-manager), and names to filter the scenarios; libtest's
//! flags (`--test-threads=2`, …) are accepted and ignored. It runs its
//! scenarios itself (no libtest harness) so that the cluster is cleaned up
//! after every outcome, and a failure before the scenarios is one line.

mod args;
mod backend;
mod cluster;
#[path = "../controller_kit/mod.rs"]
mod controller_kit;
#[path = "../metrics_kit/mod.rs"]
mod metrics_kit;
mod scenarios;
mod stack;

use args::Args;
use backend::{Backend, GarbageCollector};
use cluster::{Cluster, E2eError};
use futures::{FutureExt, StreamExt};
use scenarios::{SCENARIOS, Scenario};
use stack::Stack;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let args = Args::parse();
    let selected: Vec<(&'static str, Scenario)> = SCENARIOS
        .iter()
        .filter(|(name, _)| args.selects(name))
        .copied()
        .collect();
    if args.listed(selected.iter().map(|(name, _)| *name)) {
        return ExitCode::SUCCESS;
    }
    if args.record.is_some() {
        return failed(
            "--record is the conformance suite's (make conformance): the scenarios record nothing",
        );
    }
    args::runtime().block_on(async {
        match args.kubeconfig {
            None => run_scenarios(&Backend::Emulator, &selected, None).await,
            Some(path) => on_cluster(&path, args.garbage_collector, &selected).await,
        }
    })
}

/// The one line a run that could not go on ends with.
fn failed(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("e2e: FAILED: {why}");
    ExitCode::FAILURE
}

async fn on_cluster(path: &str, gc: bool, selected: &[(&'static str, Scenario)]) -> ExitCode {
    if path.is_empty() {
        return failed(E2eError::NoCluster);
    }
    let mut cluster = match Cluster::connect(&PathBuf::from(path)).await {
        Ok(cluster) => cluster,
        Err(e) => return failed(e),
    };
    println!(
        "e2e: cluster {} (Kubernetes {})",
        cluster.server, cluster.version
    );
    let gc = if gc {
        GarbageCollector::ControllerManager
    } else {
        GarbageCollector::Absent
    };
    let interrupted = || async {
        let _ = tokio::signal::ctrl_c().await;
        "interrupted".to_owned()
    };
    let outcome = tokio::select! {
        prepared = cluster.prepare(gc) => match prepared {
            Ok(prepared) => {
                println!("e2e: namespace {}, the operator runs as the chart's ServiceAccount", prepared.namespace);
                let backend = Backend::Cluster(Arc::new(prepared));
                tokio::select! {
                    code = run_scenarios(&backend, selected, Some(&cluster)) => Ok(code),
                    why = interrupted() => Err(why),
                }
            }
            Err(e) => Err(e.to_string()),
        },
        why = interrupted() => Err(why),
    };
    println!("e2e: cleaning up; what the run created, read back from the cluster:");
    let mut left_behind = false;
    for line in cluster.clean_up().await {
        left_behind |= line.contains("LEFT BEHIND");
        println!("  {line}");
    }
    match outcome {
        Err(why) => failed(why),
        Ok(_) if left_behind => failed("the run left objects behind (listed above)"),
        Ok(code) => code,
    }
}

/// Runs the scenarios on `backend` (on a cluster, one at a time, its
/// namespace emptied after each), prints one line per scenario and a
/// summary; fails when one failed.
async fn run_scenarios(
    backend: &Backend,
    selected: &[(&'static str, Scenario)],
    cluster: Option<&Cluster>,
) -> ExitCode {
    let started = Instant::now();
    let results: Vec<(&str, Result<Duration, String>)> =
        futures::stream::iter(selected.iter().copied())
            .map(|(name, scenario)| async move {
                let result = run_one(backend, name, scenario).await;
                if let (Some(cluster), Backend::Cluster(p)) = (cluster, backend)
                    && let Err(e) = cluster.sweep(&p.namespace).await
                {
                    eprintln!("e2e: emptying {} after {name}: {e}", p.namespace);
                }
                (name, result)
            })
            .buffer_unordered(backend.parallel())
            .collect()
            .await;
    let failures: Vec<&str> = results
        .iter()
        .filter(|(_, r)| r.is_err())
        .map(|(n, _)| *n)
        .collect();
    let summary = format!(
        "{} passed, {} failed on the {} in {:.1}s",
        results.len() - failures.len(),
        failures.len(),
        backend.name(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        println!("e2e: {summary}");
        ExitCode::SUCCESS
    } else {
        failed(format!("{summary}: {}", failures.join(", ")))
    }
}

/// One scenario on a stack of its own: a panic is its failure, and its
/// processes and servers are gone when it returns.
async fn run_one(backend: &Backend, name: &str, scenario: Scenario) -> Result<Duration, String> {
    let started = Instant::now();
    let run = async { scenario(Stack::start(backend).await).await };
    let result = AssertUnwindSafe(run)
        .catch_unwind()
        .await
        .map(|()| started.elapsed())
        .map_err(|panic| {
            panic
                .downcast::<String>()
                .map(|s| *s)
                .or_else(|p| p.downcast::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|_| "a panic".to_owned())
        });
    let took = started.elapsed().as_secs_f64();
    match &result {
        Ok(_) => println!("e2e [{}] {name} ... ok ({took:.1}s)", backend.name()),
        Err(why) => println!(
            "e2e [{}] {name} ... FAILED ({took:.1}s): {why}",
            backend.name()
        ),
    }
    result
}
