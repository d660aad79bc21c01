//! Fault drills: deterministic stalls for demonstrations and chaos runs.
//!
//! Only with the `failpoints` feature; release builds have none. At run time,
//! `FAILPOINTS='stop-before-write=return(<asset>:<WRITE>)'` makes the process
//! stop itself with SIGSTOP right before it makes that write for `asset`:
//! - a ticket status (`ASSET_OFFLINE`, …): after the provider call that
//!   justified the write;
//! - `ACQUIRE`: after the object was read, before its run is acquired;
//! - `RETIRE`: in the deletion's cleanup, after the runs were listed,
//!   before they are retired.
//!
//! Resumed by SIGCONT, it goes on with its now stale context: exactly the
//! zombie the fencing token and the tombstone exist for.

/// Stops the process here if the drill is armed for this write.
pub(crate) fn stop_before(asset: &str, write: &str) {
    if armed_for().is_some_and(|target| target == format!("{asset}:{write}")) {
        #[cfg(feature = "failpoints")]
        {
            tracing::warn!(
                asset,
                write,
                "fault drill: stopping before the write (SIGSTOP)"
            );
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
        }
    }
}

/// The drill's `return(...)` argument, when armed.
fn armed_for() -> Option<String> {
    fail::fail_point!("stop-before-write", |arg| arg);
    None
}
