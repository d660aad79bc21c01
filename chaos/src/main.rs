//! `make chaos`: one seeded chaos run. Prints the seed first, the timeline
//! of faults, every violation found, and the figures last; exits 0 only
//! when no invariant was violated and at least one stale write was
//! rejected.

use assetscan_chaos::check::{Report, check};
use assetscan_chaos::history::History;
use assetscan_chaos::plan::{Plan, Scale};
use assetscan_chaos::replicas::sibling_operator;
use assetscan_chaos::run::run;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// The seed `make chaos` runs with unless `CHAOS_SEED` says otherwise.
const DEFAULT_SEED: u64 = 20_240_601;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ScaleName {
    /// A few hundred AssetScans, every fault many times.
    Full,
    /// The run inside `make test`.
    Bounded,
}

#[derive(Parser, Debug)]
#[command(
    name = "assetscan-chaos",
    about = "A seeded chaos run of assetscan-operator replicas, checked against its invariants"
)]
struct Args {
    /// Seed of the schedule: the same seed replays the same schedule.
    #[arg(long, env = "CHAOS_SEED", default_value_t = DEFAULT_SEED, value_parser = parse_seed)]
    seed: u64,
    #[arg(long, env = "CHAOS_SCALE", value_enum, default_value_t = ScaleName::Full)]
    scale: ScaleName,
    /// The operator binary (built with fault drills); default: `chaos-operator` beside this program.
    #[arg(long, env = "CHAOS_OPERATOR")]
    operator: Option<PathBuf>,
    /// Check the history a run recorded (its `history.json`) instead of running.
    #[arg(long)]
    recheck: Option<PathBuf>,
}

/// A seed as `CHAOS_SEED` or `--seed` gives it. Set but empty (`CHAOS_SEED=`)
/// is a mistake worth naming: it is not the default seed.
fn parse_seed(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!(
            "the seed is empty (CHAOS_SEED= set to nothing?): give a number, e.g. CHAOS_SEED={DEFAULT_SEED}, or unset CHAOS_SEED for that default"
        ));
    }
    text.parse().map_err(|_| {
        let shown: String = text.chars().take(40).collect();
        format!(
            "the seed {shown:?} is not a whole number from 0 to {}",
            u64::MAX
        )
    })
}

/// Violations printed in full; the rest are counted.
const SHOWN: usize = 50;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.recheck {
        return recheck(path);
    }
    let operator = match args.operator.clone().or_else(sibling_operator) {
        Some(path) if path.exists() => path,
        other => {
            eprintln!(
                "the operator binary {other:?} is missing: build it with `cargo build -p assetscan-chaos --bins` (make chaos does)"
            );
            return ExitCode::FAILURE;
        }
    };
    let scale = match args.scale {
        ScaleName::Full => Scale::full(),
        ScaleName::Bounded => Scale::bounded(),
    };
    let dir = match tempfile::Builder::new()
        .prefix("assetscan-chaos-")
        .tempdir()
    {
        Ok(dir) => dir.keep(),
        Err(e) => {
            eprintln!("cannot create a work directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "chaos run: seed {} ({} scale); replay with CHAOS_SEED={}",
        args.seed, scale.name, args.seed
    );
    println!("logs, plan and recorded history: {}", dir.display());
    let plan = Plan::new(args.seed, scale);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match runtime.block_on(run(&plan, &operator, &dir)) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("chaos run aborted: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !outcome.stuck.is_empty() {
        println!("\nnot settled:");
        for line in &outcome.stuck {
            println!("  {line}");
        }
    }
    if !outcome.report.violations.is_empty() {
        println!(
            "\nviolations by invariant: {:?}",
            outcome.report.by_invariant()
        );
        for v in outcome.report.violations.iter().take(SHOWN) {
            println!("  {v}");
        }
        if outcome.report.violations.len() > SHOWN {
            println!(
                "  … {} more in report.json",
                outcome.report.violations.len() - SHOWN
            );
        }
    }
    println!("\n{}", outcome.figures);
    if outcome.figures.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints the violations of a recorded history; exits 0 when there are none.
fn recheck(path: &std::path::Path) -> ExitCode {
    let history: History = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(history) => history,
        Err(e) => {
            eprintln!("cannot read the history {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    let report = check(&history);
    print_violations(&report);
    print!("{}", report.notification_times);
    println!("stale writes rejected: {}", report.stale_writes_rejected);
    println!("invariant violations: {}", report.violations.len());
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_violations(report: &Report) {
    if report.violations.is_empty() {
        return;
    }
    println!("\nviolations by invariant: {:?}", report.by_invariant());
    for v in report.violations.iter().take(SHOWN) {
        println!("  {v}");
    }
    if report.violations.len() > SHOWN {
        println!(
            "  … {} more in report.json",
            report.violations.len() - SHOWN
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_malformed_seed_is_named() {
        let err = Args::try_parse_from(["assetscan-chaos", "--seed", ""]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("the seed is empty"), "{text}");
        assert!(text.contains("unset CHAOS_SEED"), "{text}");
        let err = parse_seed(&"x".repeat(500)).unwrap_err();
        assert!(err.contains("not a whole number"), "{err}");
        assert!(err.len() < 200, "the quoted input is bounded: {err}");
        assert_eq!(parse_seed(" 7 "), Ok(7));
        let args = Args::try_parse_from(["assetscan-chaos", "--seed", "4"]).unwrap();
        assert_eq!(args.seed, 4);
    }
}
