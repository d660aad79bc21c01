//! What can go wrong with a fixture: the program missing, a server not
//! answering, a command refused.

use std::time::Duration;

/// Why a fixture could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("cannot run {program}: {source} (install it: apt-get install -y redis-server)")]
    Spawn {
        program: &'static str,
        source: std::io::Error,
    },
    #[error("redis-server on port {port} did not answer within {timeout:?}; log: {log}")]
    NotReady {
        port: u16,
        timeout: Duration,
        log: String,
    },
    #[error("{what}: {detail}")]
    Command { what: String, detail: String },
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}
