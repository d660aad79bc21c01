//! This process's CPU time: user and system, every thread, in microseconds
//! (`getrusage`), for the client's share of a figure beside the server's.

use crate::BenchError;
use nix::sys::resource::{UsageWho, getrusage};

/// CPU time used by this process so far, in microseconds.
pub fn process_us() -> Result<u64, BenchError> {
    let usage = getrusage(UsageWho::RUSAGE_SELF)
        .map_err(|e| BenchError::Outcome(format!("getrusage: {e}")))?;
    let us = |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
    Ok(us(usage.user_time()) + us(usage.system_time()))
}
