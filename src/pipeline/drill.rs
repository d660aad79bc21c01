//! Fault drills: deterministic stalls for demonstrations and chaos runs.
//!
//! Only with the `failpoints` feature; release builds have none. At run time,
//! `FAILPOINTS='stop-before-write=return(<asset>:<STATUS>)'` makes the process
//! stop itself with SIGSTOP right before it writes `STATUS` for `asset`,
//! after the provider call that justified the write. Resumed by SIGCONT, it
//! goes on with its now stale context: exactly the zombie the fencing token
//! exists for.

use crate::ticket::Status;

/// Stops the process here if the drill is armed for this write.
pub(super) fn stop_before_write(asset: &str, to: Status) {
    if armed_for().is_some_and(|target| target == format!("{asset}:{to}")) {
        #[cfg(feature = "failpoints")]
        {
            tracing::warn!(asset, status = %to, "fault drill: stopping before the write (SIGSTOP)");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        }
    }
}

/// The drill's `return(...)` argument, when armed.
fn armed_for() -> Option<String> {
    fail::fail_point!("stop-before-write", |arg| arg);
    None
}
