//! Proof under faults: a seeded chaos run of several real operator
//! replicas against the Kubernetes API emulator, a real redis-server and
//! the provider stubs, with many faults at once (stalled and killed
//! replicas, a Redis restart that loses every key, API errors, dropped
//! watches, an API server outage, slow and failing providers, spec edits
//! and deletions mid-run), followed by a check of every invariant over what
//! was recorded.
//!
//! - [`plan`]: the schedule, from the seed alone;
//! - [`run`]: carries it out and records the [`history`];
//! - [`check`]: the invariant checker over a recorded history;
//! - [`figures`]: what the run did and found, as printed at its end.

pub mod audit;
pub mod check;
pub mod figures;
pub mod history;
pub mod objects;
pub mod plan;
pub mod proxy;
pub mod replicas;
pub mod run;
pub mod upgrade;
pub mod world;

/// What can stop a chaos run before it has a verdict.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("redis: {context}: {source}")]
    Redis {
        context: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("kubernetes api: {context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("redis-server: {0}")]
    RedisServer(#[from] assetscan_testkit::redis::FixtureError),
    #[error("kubernetes api emulator: {0}")]
    Emulator(#[from] assetscan_testkit::emulator::EmulatorError),
    #[error("a task of the run failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("{what} did not succeed after {attempts} attempts: {last}")]
    GaveUp {
        what: String,
        attempts: u32,
        last: String,
    },
}

/// Unix time in ms: names the replicas' log files in start order, and
/// times the outages on the clock of the audit's `at` fields.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
