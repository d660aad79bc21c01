//! `make model`: checks the model with every defence, or with the one that
//! `MODEL_MUTANT` names taken away, in each scenario. Exits 0 when every
//! property holds, 1 at the first counterexample, 2 when it cannot run.
//!
//! `MODEL_STRICT=1` holds the design to what it does not promise and
//! reports every property broken (`docs/model.md`, "Findings");
//! `MODEL_WORKERS` and `MODEL_FAULTS` change the bounds.

use assetscan_model::check::{Run, Size, scenarios};
use assetscan_model::{Defences, Mutant, Report, check};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(message) => {
            eprintln!("model: {message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let defences = match std::env::var("MODEL_MUTANT") {
        Ok(name) if !name.is_empty() => {
            Defences::without(name.parse::<Mutant>().map_err(|e| e.to_string())?)
        }
        _ => Defences::all(),
    };
    let workers = number("MODEL_WORKERS")?;
    let faults = number("MODEL_FAULTS")?;
    let strict = number("MODEL_STRICT")?.is_some_and(|n| n > 0);
    // A clean run uses both cores; a run expected to fail runs strictly
    // breadth first so that its counterexamples are shortest.
    let run = Run {
        threads: if defences.mutant().is_some() || strict {
            1
        } else {
            2
        },
        every_property: strict,
    };
    let what = defences
        .mutant()
        .map_or("all".to_owned(), |m| format!("all but {m}"));
    let mut held = true;
    for mut scenario in scenarios(Size::Full) {
        let b = &mut scenario.bounds;
        b.workers = workers.unwrap_or(b.workers);
        b.faults = faults.unwrap_or(b.faults);
        let b = scenario.bounds;
        println!(
            "scenario {}: {} executors, {} pauses or crashes, data loss {}, a spec change, deletion; defences: {what}{}",
            scenario.name,
            b.workers,
            b.faults,
            if b.data_loss { "once" } else { "never" },
            if strict { "; strict" } else { "" },
        );
        let report = check(b, defences, strict, run).map_err(|e| e.to_string())?;
        held &= print(&report);
        if !held && !strict {
            break;
        }
    }
    Ok(if held {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A small number from the environment, if set.
fn number(name: &str) -> Result<Option<u8>, String> {
    match std::env::var(name) {
        Ok(text) if !text.is_empty() => text.parse().map(Some).map_err(|_| {
            let shown: String = text.chars().take(16).collect();
            format!("{name} must be a number from 0 to 255, not {shown:?}")
        }),
        _ => Ok(None),
    }
}

/// Prints the report; whether every property held.
fn print(report: &Report) -> bool {
    println!("states explored: {}", report.states);
    println!("unique states: {}", report.unique);
    println!("max depth: {}", report.depth);
    println!("time: {:.1}s", report.elapsed.as_secs_f64());
    if report.counterexamples.is_empty() {
        println!("every property holds");
    }
    for found in &report.counterexamples {
        println!("counterexample: {}", found.property);
        for line in &found.trace {
            println!("  {line}");
        }
    }
    report.counterexamples.is_empty()
}
