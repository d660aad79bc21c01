//! Figures from several runs: min / median / max, and latency percentiles.

use std::fmt;
use std::time::Duration;

/// One figure over several runs.
#[derive(Clone, Debug)]
pub struct Spread {
    sorted: Vec<f64>,
}

impl Spread {
    pub fn of(mut samples: Vec<f64>) -> Spread {
        samples.sort_by(f64::total_cmp);
        Spread { sorted: samples }
    }

    pub fn min(&self) -> f64 {
        self.sorted.first().copied().unwrap_or(f64::NAN)
    }

    pub fn median(&self) -> f64 {
        match self.sorted.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => self.sorted[n / 2],
            n => (self.sorted[n / 2 - 1] + self.sorted[n / 2]) / 2.0,
        }
    }

    pub fn max(&self) -> f64 {
        self.sorted.last().copied().unwrap_or(f64::NAN)
    }
}

impl fmt::Display for Spread {
    /// `min / median / max`, with as many decimals as the size calls for.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = if self.max().abs() >= 100.0 { 0 } else { 2 };
        write!(
            f,
            "{:.*} / {:.*} / {:.*}",
            digits,
            self.min(),
            digits,
            self.median(),
            digits,
            self.max()
        )
    }
}

/// Percentile `p` (0..=100) of latencies, in microseconds.
pub fn percentile_us(latencies: &mut [Duration], p: f64) -> f64 {
    if latencies.is_empty() {
        return f64::NAN;
    }
    latencies.sort_unstable();
    let rank = ((p / 100.0) * (latencies.len() - 1) as f64).round() as usize;
    latencies[rank.min(latencies.len() - 1)].as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_and_percentiles() {
        let s = Spread::of(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.min(), s.median(), s.max()), (1.0, 2.5, 10.0));
        let mut l: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile_us(&mut l, 50.0), 51.0);
        assert_eq!(percentile_us(&mut l, 99.0), 99.0);
    }
}
