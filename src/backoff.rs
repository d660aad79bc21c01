//! The operator's one backoff formula, on backon's exponential builder: a
//! run's step retries, the requeue after a failed reconcile and the retries
//! of a status write all wait the same way.
//!
//! The delay starts at `initial`, doubles with each consecutive failure and
//! stops growing at `max`; jitter keeps every delay within [50 %, 100 %] of
//! that value, so that many assets failing at once spread out, and none
//! ever waits longer than `max`.

use backon::{BackoffBuilder, ExponentialBuilder};
use std::time::Duration;

/// Exponential backoff with jitter between `initial` and `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
}

/// Past this many doublings every delay is at its cap anyway.
const MAX_DOUBLINGS: u32 = 64;

impl Backoff {
    pub const fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max }
    }

    /// The delays before the second, third, … attempt.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + use<> {
        let max = self.max;
        // backon's jitter adds up to the whole delay again: starting from
        // half the value keeps the sum within [50 %, 100 %] of it.
        ExponentialBuilder::new()
            .with_min_delay(self.initial / 2)
            .with_max_delay(self.max / 2)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
            .map(move |delay| delay.min(max))
    }

    /// The delay after `failures` consecutive failures (the first is 1).
    pub fn after(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(MAX_DOUBLINGS);
        self.delays().nth(doublings as usize).unwrap_or(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// backon computes in `f32`: allow for its rounding.
    const SLACK: Duration = Duration::from_micros(1);

    #[test]
    fn delays_double_within_their_jitter_and_stop_at_the_cap() {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        for _ in 0..200 {
            for (failures, full) in [
                (1, 100),
                (2, 200),
                (3, 400),
                (4, 800),
                (5, 1000),
                (40, 1000),
            ] {
                let full = Duration::from_millis(full);
                let delay = backoff.after(failures);
                assert!(
                    delay + SLACK >= full / 2 && delay <= full + SLACK,
                    "after {failures}: {delay:?} outside [{:?}, {full:?}]",
                    full / 2
                );
            }
            assert!(backoff.after(u32::MAX) <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn the_jitter_spreads_delays_out() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        let seen: std::collections::BTreeSet<Duration> =
            (0..20).map(|_| backoff.after(3)).collect();
        assert!(seen.len() > 1, "{seen:?}");
    }

    #[test]
    fn an_initial_delay_above_the_cap_is_capped() {
        let backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(1));
        assert!(
            backoff
                .delays()
                .take(5)
                .all(|d| d <= Duration::from_secs(1))
        );
    }
}
