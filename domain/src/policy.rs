//! How findings are judged: the thresholds that make a finding high risk,
//! and when threat intelligence is worth asking for.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// CVSS base score from which a finding is high risk, unless a policy says
/// otherwise.
pub const DEFAULT_CVSS_THRESHOLD: f64 = 7.0;

/// EPSS probability from which a finding is high risk, unless a policy says
/// otherwise.
pub const DEFAULT_EPSS_THRESHOLD: f64 = 0.5;

/// High risk = CVSS ≥ `cvss_threshold`, or listed as known exploited, or
/// EPSS ≥ `epss_threshold`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    pub cvss_threshold: f64,
    pub threat_intel: ThreatIntelPolicy,
    pub epss_threshold: f64,
    /// The share of listed packages (percent) a run must have asked about to
    /// be `Ready`; below it, or when it asked about none, the run ends
    /// `CoverageLow` ([`crate::Coverage::is_low`]).
    pub min_coverage: Option<u8>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            cvss_threshold: DEFAULT_CVSS_THRESHOLD,
            threat_intel: ThreatIntelPolicy::default(),
            epss_threshold: DEFAULT_EPSS_THRESHOLD,
            min_coverage: None,
        }
    }
}

// One enum for the resource's `spec.policy.threatIntel` (hence the schema
// derive; its doc comments are the CRD's descriptions), the
// `scan --threat-intel` flag and the pipeline.
/// When to consult threat intelligence (known-exploited catalog, EPSS).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreatIntelPolicy {
    /// When vulnerabilities were found whose CVSS alone does not decide.
    #[default]
    WhenNeeded,
    /// Whenever vulnerabilities were found.
    Always,
    /// Never: judge by CVSS alone.
    Never,
}

/// The name is not one of `WhenNeeded`, `Always`, `Never`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected WhenNeeded, Always or Never")]
pub struct UnknownThreatIntelPolicy(String);

impl FromStr for ThreatIntelPolicy {
    type Err = UnknownThreatIntelPolicy;

    /// The names as the resource spells them.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "WhenNeeded" => Ok(ThreatIntelPolicy::WhenNeeded),
            "Always" => Ok(ThreatIntelPolicy::Always),
            "Never" => Ok(ThreatIntelPolicy::Never),
            other => Err(UnknownThreatIntelPolicy(crate::text::truncate_chars(
                other, 64,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_read_like_the_resource_writes_them() {
        for policy in [
            ThreatIntelPolicy::WhenNeeded,
            ThreatIntelPolicy::Always,
            ThreatIntelPolicy::Never,
        ] {
            let name = serde_json::to_value(policy).unwrap();
            assert_eq!(name.as_str().unwrap().parse(), Ok(policy));
        }
        assert!("always".parse::<ThreatIntelPolicy>().is_err());
    }
}
