//! The bounded chaos run of `make test`: three real operator replicas,
//! thirty AssetScans, and every kind of fault of `make chaos` (pauses,
//! kills and restarts, fault drills, a Redis data loss, an API server
//! outage, API errors and dropped watches, slow and failing providers,
//! spec edits and deletions) in well under a minute and a half. It passes
//! when the checker finds no violation and at least one stale write was
//! rejected, the same verdict as `make chaos`.

use assetscan_chaos::plan::{Plan, Scale};
use assetscan_chaos::run::run;
use std::path::Path;

/// The schedule's seed; `CHAOS_SEED=<seed> CHAOS_SCALE=bounded make chaos`
/// replays it with the timeline printed.
const SEED: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_chaos_run_keeps_every_invariant() {
    let dir = tempfile::Builder::new()
        .prefix("assetscan-chaos-test-")
        .tempdir()
        .expect("work dir");
    let plan = Plan::new(SEED, Scale::bounded());
    let operator = Path::new(env!("CARGO_BIN_EXE_chaos-operator"));
    let outcome = run(&plan, operator, dir.path())
        .await
        .expect("the chaos run completes");
    let figures = &outcome.figures;
    if !figures.passed() || !outcome.stuck.is_empty() {
        let kept = dir.keep();
        panic!(
            "chaos run failed; logs and the recorded history in {}\nnot settled: {:#?}\nviolations: {:#?}\n{figures}",
            kept.display(),
            outcome.stuck,
            outcome.report.violations
        );
    }
    assert!(
        figures.redis_data_losses == 1 && figures.api_outages == 1,
        "{figures}"
    );
    assert!(figures.pauses > 0 && figures.kills > 0, "{figures}");
}
