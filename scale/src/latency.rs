//! Detection-to-notification latency (`assetscan_detection_to_notification_seconds`,
//! from the tickets' own timestamps): each replica's histogram, scraped
//! before it stops, merged over channels and replicas, and its quantiles
//! read the way Prometheus' `histogram_quantile` reads them.

use std::collections::BTreeMap;

const METRIC: &str = "assetscan_detection_to_notification_seconds_bucket";

/// Cumulative counts by upper bound (`le`), merged.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    buckets: BTreeMap<u64, f64>,
    infinite: f64,
}

/// An upper bound as an ordered key (nanoseconds).
fn key(le: f64) -> u64 {
    (le * 1e9).round() as u64
}

impl Latency {
    /// Adds the buckets of one scrape (every channel's).
    pub fn add_scrape(&mut self, exposition: &str) {
        for line in exposition.lines() {
            let Some(rest) = line.strip_prefix(METRIC) else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once(' ') else {
                continue;
            };
            let Some(le) = labels
                .split("le=\"")
                .nth(1)
                .and_then(|l| l.split('"').next())
            else {
                continue;
            };
            let Ok(count) = value.trim().parse::<f64>() else {
                continue;
            };
            match le {
                "+Inf" => self.infinite += count,
                bound => {
                    if let Ok(bound) = bound.parse::<f64>() {
                        *self.buckets.entry(key(bound)).or_default() += count;
                    }
                }
            }
        }
    }

    pub fn count(&self) -> f64 {
        self.infinite
    }

    /// The `q` quantile in seconds, interpolated within its bucket; `None`
    /// without observations. Past the last finite bound, that bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.infinite <= 0.0 {
            return None;
        }
        let rank = q * self.infinite;
        let mut lower = (0.0, 0.0);
        for (&bound, &cumulative) in &self.buckets {
            let upper = bound as f64 / 1e9;
            if cumulative >= rank {
                let (low_bound, low_count) = lower;
                let share = (rank - low_count) / (cumulative - low_count).max(f64::EPSILON);
                return Some(low_bound + (upper - low_bound) * share);
            }
            lower = (upper, cumulative);
        }
        Some(lower.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_channels_and_reads_quantiles_like_histogram_quantile() {
        let scrape = "\
assetscan_detection_to_notification_seconds_bucket{channel=\"a\",le=\"0.1\"} 50\n\
assetscan_detection_to_notification_seconds_bucket{channel=\"a\",le=\"0.25\"} 90\n\
assetscan_detection_to_notification_seconds_bucket{channel=\"a\",le=\"+Inf\"} 100\n\
assetscan_detection_to_notification_seconds_count{channel=\"a\"} 100\n";
        let mut latency = Latency::default();
        latency.add_scrape(scrape);
        latency.add_scrape(scrape);
        assert_eq!(latency.count(), 200.0);
        // Rank 100 of 200 is the 0.1 bucket's last: its bound.
        assert!((latency.quantile(0.5).unwrap() - 0.1).abs() < 1e-9);
        // Rank 170: 70 of the 80 between 0.1 and 0.25.
        let p85 = latency.quantile(0.85).unwrap();
        assert!((p85 - (0.1 + 0.15 * 70.0 / 80.0)).abs() < 1e-9, "{p85}");
        // Past the last finite bound: that bound.
        assert!((latency.quantile(0.99).unwrap() - 0.25).abs() < 1e-9);
        assert_eq!(Latency::default().quantile(0.5), None);
    }
}
