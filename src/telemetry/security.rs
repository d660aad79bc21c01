//! What the operator's own connections lack, as metrics: set at start, so
//! that an unprotected Redis shows on a dashboard and can alert.

use super::registered;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SafeguardLabels {
    pub missing: String,
}

/// What the operator's own connections lack, set at start.
pub struct SecurityMetrics {
    /// 1 for each safeguard the Redis connection lacks (`authentication`,
    /// `tls`), 0 for each it has.
    pub redis_insecure: Family<SafeguardLabels, Gauge>,
}

impl SecurityMetrics {
    pub(super) fn register(r: &mut Registry) -> SecurityMetrics {
        let help = "1 for each safeguard (authentication, tls) the Redis connection lacks";
        SecurityMetrics {
            redis_insecure: registered(r, "redis_insecure", help, Family::default()),
        }
    }

    pub fn set_redis(&self, authenticated: bool, encrypted: bool) {
        for (missing, has) in [("authentication", authenticated), ("tls", encrypted)] {
            let labels = SafeguardLabels {
                missing: missing.to_owned(),
            };
            self.redis_insecure
                .get_or_create(&labels)
                .set(i64::from(!has));
        }
    }
}
