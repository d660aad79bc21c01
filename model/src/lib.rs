//! A model of assetscan-operator's fencing protocol, checked with
//! stateright: every interleaving of a few executors, lease expiries,
//! pauses, crashes, a Redis data loss, a spec change and the object's
//! deletion, within bounds. Tests show the defences work in the runs
//! someone thought of; this shows they hold in every run of the model, and
//! that taking one away (a [`Mutant`]) lets a zombie write through.
//!
//! The transition table, the planner and the run decision are the
//! operator's own code, called, not restated. See `docs/model.md`.

pub mod api;
pub mod check;
pub mod mutant;
pub mod operator;
pub mod properties;
pub mod redis;
pub mod state;
mod steps;
pub mod system;
pub mod trace;

pub use check::{Counterexample, Report, Scenario, Size, check, scenarios};
pub use mutant::{Defences, Mutant, UnknownMutant};
pub use system::{Bounds, System};
