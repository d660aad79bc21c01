//! Per-step timeouts and bounded retries with exponential backoff and
//! jitter: the pipeline's section of the configuration file (`steps`), which
//! the chart's values schema is generated from too.

use crate::backoff::Backoff;
use assetscan_domain::ticket::Step;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// Per pipeline step: the bound on one provider call, and the retries.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StepPolicies {
    pub online_check: RetryPolicy,
    pub vuln_query: RetryPolicy,
    pub threat_intel: RetryPolicy,
    pub notify: RetryPolicy,
}

impl StepPolicies {
    pub fn of(&self, step: Step) -> &RetryPolicy {
        match step {
            Step::OnlineCheck => &self.online_check,
            Step::VulnQuery => &self.vuln_query,
            Step::ThreatIntel => &self.threat_intel,
            Step::Notify => &self.notify,
        }
    }

    /// The rules the types cannot state: every step is tried at least once,
    /// and never without a bound.
    pub fn check(&self) -> Result<(), StepSettingsError> {
        for (step, policy) in [
            ("onlineCheck", &self.online_check),
            ("vulnQuery", &self.vuln_query),
            ("threatIntel", &self.threat_intel),
            ("notify", &self.notify),
        ] {
            if policy.max_attempts == 0 {
                return Err(StepSettingsError::NoAttempt { step });
            }
            if policy.timeout.is_zero() {
                return Err(StepSettingsError::NoTimeout { step });
            }
        }
        Ok(())
    }
}

/// A step's policy the pipeline cannot run; names the step's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StepSettingsError {
    /// Zero attempts would fail every run before its first call.
    #[error("steps.{step}.maxAttempts must be at least 1")]
    NoAttempt { step: &'static str },
    /// A zero timeout would fail every call at once.
    #[error("steps.{step}.timeout must be positive")]
    NoTimeout { step: &'static str },
}

/// How one step is retried. Attempts are counted in the ticket, so a
/// takeover continues the count instead of starting over.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Bound on one call of the step (positive).
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub timeout: Duration,
    /// Attempts before the run fails (counted in the ticket); for `notify`,
    /// attempts per pass before the run is deferred.
    #[schemars(range(min = 1))]
    pub max_attempts: u32,
    /// Delay before the second attempt; doubles after each failure, with
    /// jitter.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub initial_backoff: Duration,
    /// Upper bound of the delay; a server's `Retry-After` is honoured up to
    /// it (the lock is held while waiting).
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
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
