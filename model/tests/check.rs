//! The model check, small enough for the test suite: every property holds
//! with every defence on, and each defence taken away yields a
//! counterexample of the property it guards.

use assetscan_model::properties::{
    DELIVERY_RECORDED, NO_ALERT_LEFT, NO_DELETED_TICKET, NO_STALE_WRITE, NOTIFIED_DELIVERED,
    ONE_KEY, STATUS_FORWARD,
};
use assetscan_model::{Counterexample, Defences, Mutant, Size, check, check::Run, scenarios};
use std::process::Command;

/// Strictly breadth first: counterexamples are shortest.
const BFS: Run = Run {
    threads: 1,
    every_property: false,
};

/// The first counterexample over the small scenarios, and the states seen.
fn first_counterexample(defences: Defences) -> (Option<Counterexample>, usize) {
    let mut states = 0;
    for scenario in scenarios(Size::Small) {
        let report = check(scenario.bounds, defences, false, BFS).expect("tables build");
        states += report.unique;
        if let Some(found) = report.counterexamples.into_iter().next() {
            return (Some(found), states);
        }
    }
    (None, states)
}

#[test]
fn every_property_holds_with_every_defence() {
    let (found, states) = first_counterexample(Defences::all());
    assert!(found.is_none(), "{found:#?}");
    // Not a vacuous pass: the scenarios reach hundreds of thousands of states.
    assert!(states > 100_000, "only {states} states");
}

/// The property each mutant must break.
fn guarded_by(mutant: Mutant) -> &'static str {
    match mutant {
        Mutant::NoTokenCheck | Mutant::NoClaimAtAcquire | Mutant::NoFloor => NO_STALE_WRITE,
        Mutant::NoStatusFence => STATUS_FORWARD,
        Mutant::NotifyFirst => DELIVERY_RECORDED,
        Mutant::NoResend => NOTIFIED_DELIVERED,
        Mutant::KeyPerToken => ONE_KEY,
        Mutant::NoTombstone => NO_DELETED_TICKET,
        Mutant::NoSupersede | Mutant::NoClaimPrecondition => NO_ALERT_LEFT,
    }
}

#[test]
fn each_mutant_breaks_the_property_its_defence_guards() {
    for mutant in Mutant::ALL {
        let (found, _) = first_counterexample(Defences::without(mutant));
        let found = found.unwrap_or_else(|| panic!("{mutant}: no counterexample"));
        assert_eq!(found.property, guarded_by(mutant), "{mutant}: {found:#?}");
        assert!(
            found.trace.len() > 2 && found.trace[0].starts_with(" 1. "),
            "{mutant}: {:#?}",
            found.trace
        );
    }
}

#[test]
fn the_zombie_write_needs_a_stall_a_lost_lease_and_a_takeover() {
    let (found, _) = first_counterexample(Defences::without(Mutant::NoClaimAtAcquire));
    let trace = found.expect("a counterexample").trace.join("\n");
    for step in [
        "A pauses",
        "the lock's lease expires (A is paused)",
        "B acquire(g1",
        "A resumes",
        "A advance(g1, token 1, ASSET_OFFLINE) -> ok",
    ] {
        assert!(trace.contains(step), "{step:?} missing from\n{trace}");
    }
}

#[test]
fn an_unknown_mutant_is_refused_with_the_known_ones() {
    let err = "no-such-defence"
        .parse::<Mutant>()
        .expect_err("not a mutant");
    let message = err.to_string();
    for mutant in Mutant::ALL {
        assert!(message.contains(mutant.name()), "{message}");
        assert_eq!(mutant.name().parse::<Mutant>(), Ok(mutant));
    }
}

fn model(mutant: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_assetscan-model"))
        .env("MODEL_MUTANT", mutant)
        .env_remove("MODEL_STRICT")
        .env_remove("MODEL_WORKERS")
        .env_remove("MODEL_FAULTS")
        .output()
        .expect("the model binary runs")
}

#[test]
fn the_binary_refuses_an_unknown_mutant_instead_of_checking_the_clean_model() {
    let out = model("no-such-defence");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no-claim-at-acquire"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("states explored"));
}

#[test]
fn the_binary_fails_with_the_trace_of_a_mutant() {
    let out = model("no-tombstone");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let trace = stdout
        .split_once("counterexample: ")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    assert!(trace.starts_with(NO_DELETED_TICKET), "{stdout}");
    assert!(
        trace.contains("\n   1. ") && trace.contains("\n  end: "),
        "{stdout}"
    );
    assert!(stdout.contains("states explored: ") && stdout.contains("time: "));
}
