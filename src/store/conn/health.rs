//! What the replica's own Redis traffic says about Redis: the outcome of the
//! latest command, kept as each one ends. Readiness (`/readyz`) answers
//! from it, so a probe costs no round trip; when the replica has been idle
//! for a while, `probes` sends one PING of its own.

use redis::{ErrorKind, RedisError, ServerErrorKind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The latest outcome: when, and the error if it failed.
#[derive(Clone, Debug)]
struct Outcome {
    at: Instant,
    error: Option<String>,
}

/// Shared by a connection and its clones.
#[derive(Clone, Debug)]
pub struct RedisHealth(Arc<Mutex<Outcome>>);

impl RedisHealth {
    /// Healthy as of now: the connection was just made.
    pub(super) fn connected() -> RedisHealth {
        RedisHealth(Arc::new(Mutex::new(Outcome {
            at: Instant::now(),
            error: None,
        })))
    }

    /// Records a command's result. Only an error that says Redis cannot be
    /// used (no connection, a timeout, a refused login or command, a master
    /// that is read-only, down or loading) counts; an answer such as a
    /// fenced write's refusal means Redis works.
    pub(super) fn record<T>(&self, result: &Result<T, RedisError>) {
        let error = match result {
            Ok(_) => None,
            Err(e) if makes_redis_unusable(e) => Some(e.to_string()),
            Err(_) => None,
        };
        let mut outcome = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *outcome = Outcome {
            at: Instant::now(),
            error,
        };
    }

    /// `Ok` when the latest command succeeded, else its error.
    pub fn latest(&self) -> Result<(), String> {
        match &self.0.lock().unwrap_or_else(PoisonError::into_inner).error {
            None => Ok(()),
            Some(error) => Err(error.clone()),
        }
    }

    /// How long ago the latest command ended.
    pub fn age(&self) -> Duration {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .at
            .elapsed()
    }
}

fn makes_redis_unusable(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::AuthenticationFailed
                | ErrorKind::Server(
                    ServerErrorKind::NoPerm
                        | ServerErrorKind::ReadOnly
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::BusyLoading
                )
        )
}
