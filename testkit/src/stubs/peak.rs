//! The peak rate of a request log: the most requests that any window of a
//! given length holds, wherever it starts. What a provider's rate limit
//! sees, and what the operator's start bound promises to keep under.

use std::time::{Duration, Instant};

/// The most of `times` (in any order) that lie within one span shorter
/// than `window` (`[t, t + window)` for any `t`).
pub fn peak(times: &[Instant], window: Duration) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    let mut first = 0;
    let mut most = 0;
    for (last, at) in sorted.iter().enumerate() {
        while at.duration_since(sorted[first]) >= window {
            first += 1;
        }
        most = most.max(last + 1 - first);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_the_fullest_window_wherever_it_starts() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let second = Duration::from_secs(1);
        assert_eq!(peak(&[], second), 0);
        assert_eq!(peak(&[at(0)], second), 1);
        // 0, 900, 1000, 1100, 1950: [900, 1900) holds three.
        let times = [at(1950), at(0), at(1100), at(900), at(1000)];
        assert_eq!(peak(&times, second), 3);
        // A window is shorter than its length: 0 and 1000 are in two.
        assert_eq!(peak(&[at(0), at(1000)], second), 1);
        assert_eq!(peak(&[at(0), at(999)], second), 2);
    }
}
