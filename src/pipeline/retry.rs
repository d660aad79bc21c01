//! Per-step timeouts and bounded retries with exponential backoff and jitter.

use crate::backoff::Backoff;
use serde::Deserialize;
use std::time::Duration;

/// How one step is retried. Attempts are counted in the ticket, so a
/// takeover continues the count instead of starting over.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Bound on one call of the step.
    #[serde(deserialize_with = "crate::duration::config")]
    pub timeout: Duration,
    /// Attempts before the run fails (≥ 1).
    pub max_attempts: u32,
    /// Delay before the second attempt; doubles after each failure.
    #[serde(deserialize_with = "crate::duration::config")]
    pub initial_backoff: Duration,
    /// Upper bound of the delay.
    #[serde(deserialize_with = "crate::duration::config")]
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            timeout: Duration::from_secs(10),
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// Delay after failed attempt `attempt` (1-based): the operator's
    /// [`Backoff`] from `initial_backoff` to `max_backoff`. A server's
    /// `Retry-After` is honoured when longer, up to `max_backoff`: the lock
    /// is held while waiting, so no server may hold it for hours.
    pub fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let delay = Backoff::new(self.initial_backoff, self.max_backoff).after(attempt);
        retry_after.map_or(delay, |after| delay.max(after.min(self.max_backoff)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let p = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            ..RetryPolicy::default()
        };
        // The backoff computes in `f32`: allow for its rounding.
        let within = |d: Duration, low: u64, high: u64| {
            let slack = Duration::from_micros(1);
            d + slack >= Duration::from_millis(low) && d <= Duration::from_millis(high) + slack
        };
        for _ in 0..50 {
            assert!(within(p.backoff(1, None), 50, 100));
            assert!(within(p.backoff(3, None), 200, 400));
            assert!(p.backoff(30, None) <= Duration::from_millis(1000));
            let asked = p.backoff(1, Some(Duration::from_millis(700)));
            assert!(asked >= Duration::from_millis(700) && asked <= Duration::from_millis(1000));
            assert_eq!(
                p.backoff(1, Some(Duration::from_secs(86_400))),
                Duration::from_millis(1000)
            );
        }
    }
}
