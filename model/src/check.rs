//! Runs the checker breadth first, so that a counterexample found is a
//! shortest one, and tells what it found.

use crate::mutant::Defences;
use crate::operator::{TableError, Tables};
use crate::state::State;
use crate::system::{Action, Bounds, System};
use crate::trace;
use stateright::{Checker, HasDiscoveries, Model};
use std::time::{Duration, Instant};

/// A named set of bounds. Two scenarios split the faults so that each
/// finishes in seconds: pauses and crashes without a data loss, and a data
/// loss with one pause or crash around it.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub bounds: Bounds,
}

/// How far to look: `make model`'s size, or the test suite's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Full,
    Small,
}

pub fn scenarios(size: Size) -> [Scenario; 2] {
    let faults_workers = match size {
        Size::Full => 3,
        Size::Small => 2,
    };
    let bounds = |workers, faults, data_loss| Bounds {
        workers,
        faults,
        data_loss,
        spec_change: true,
        deletion: true,
    };
    [
        Scenario {
            name: "faults",
            bounds: bounds(faults_workers, 2, false),
        },
        Scenario {
            name: "data loss",
            bounds: bounds(2, 1, true),
        },
    ]
}

/// A property broken, and the path that breaks it.
#[derive(Clone, Debug)]
pub struct Counterexample {
    pub property: &'static str,
    /// One action per line, then the last state.
    pub trace: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub states: usize,
    pub unique: usize,
    pub depth: usize,
    pub elapsed: Duration,
    /// Shortest first. Only the first one found unless the check was
    /// asked for every broken property.
    pub counterexamples: Vec<Counterexample>,
}

/// How to run the checker.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    /// More than one is faster, but only one keeps the search strictly
    /// breadth first (and so each counterexample shortest).
    pub threads: usize,
    /// Look for a counterexample of every property, not only the first.
    pub every_property: bool,
}

/// Checks every property in every state within `bounds`.
pub fn check(
    bounds: Bounds,
    defences: Defences,
    strict: bool,
    run: Run,
) -> Result<Report, TableError> {
    let system = System {
        bounds,
        defences,
        tables: Tables::build()?,
        strict,
        focus: None,
    };
    let started = Instant::now();
    let finish = if run.every_property {
        HasDiscoveries::AllFailures
    } else {
        HasDiscoveries::AnyFailures
    };
    let checker = system
        .clone()
        .checker()
        .threads(run.threads.max(1))
        .finish_when(finish)
        .spawn_bfs()
        .join();
    let elapsed = started.elapsed();
    let mut found: Vec<(&'static str, Path)> = system
        .properties()
        .iter()
        .filter(|p| checker.discovery(p.name).is_some())
        .filter_map(|p| shortest(&system, p.name).map(|path| (p.name, path)))
        .collect();
    found.sort_by_key(|(_, path)| path.len());
    let counterexamples = found
        .into_iter()
        .map(|(property, path)| Counterexample {
            property,
            trace: trace::tell(&system, &path),
        })
        .collect();
    Ok(Report {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed,
        counterexamples,
    })
}

type Path = Vec<(State, Option<Action>)>;

/// A shortest path to a state breaking `property`. The checker records the
/// last of the violating states it met in its current batch, not the
/// first, and a broken step property stays broken in every later state: so
/// the path is cut where the property first fails, and the search is run
/// again below that depth until nothing shorter is found.
fn shortest(system: &System, property: &'static str) -> Option<Path> {
    let focused = System {
        focus: Some(property),
        ..system.clone()
    };
    let condition = focused.properties().first()?.condition;
    let mut best: Option<Path> = None;
    loop {
        let mut builder = focused
            .clone()
            .checker()
            .finish_when(HasDiscoveries::AnyFailures);
        if let Some(path) = &best {
            // Skips states at this depth or deeper: only shorter paths.
            builder = builder.target_max_depth(path.len());
        }
        let found = builder.spawn_bfs().join().discovery(property);
        let Some(path) = found else { return best };
        let mut path = path.into_vec();
        if let Some(first) = path.iter().position(|(s, _)| !condition(&focused, s)) {
            path.truncate(first + 1);
        }
        if let Some(last) = path.last_mut() {
            last.1 = None;
        }
        if best.as_ref().is_some_and(|b| b.len() <= path.len()) {
            return best;
        }
        best = Some(path);
    }
}
