//! Waiting on the event that proves a test's point, never on a wall-clock
//! window: a test polls for its condition and goes on the moment it holds.
//! The timeout only turns a hang into a failure with a message; it is
//! generous so that a loaded machine slows a test down without failing it.

use std::time::Duration;

/// How often a condition is checked.
const POLL: Duration = Duration::from_millis(20);

/// Polls `done` until it holds; panics with `what` after `timeout`.
pub async fn until(what: &str, timeout: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}
