//! Rescans spread over their interval (`scanStarts.rescanSpread`). A run's
//! next scan is due `rescanInterval` after it ended, plus the object's own
//! share of the spread: AssetScans whose runs ended together (created
//! together, or resumed together after an outage) are due again at
//! different times, and stay apart in the rounds after.
//!
//! The share is derived from the object's uid alone, never drawn at random:
//! every replica, and every mirror of the same ticket, computes the same
//! `nextScanTime`, so mirroring a ticket again writes nothing.

use super::object_key;
use crate::duration::{self, SPEC_UNITS};
use crate::kubernetes::crd::{AssetScan, AssetScanSpec};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// How long after a run of `obj` ended its next scan is due:
/// `spec.rescanInterval`, plus the object's share of `spread` (a fraction
/// of the interval, 0 to 1). `None` without rescans.
pub fn rescan_after(obj: &AssetScan, spread: f64) -> Option<Duration> {
    let every = rescan_interval(&obj.spec)?;
    let spread = if spread.is_finite() {
        spread.clamp(0.0, 1.0)
    } else {
        0.0
    };
    Some(every + every.mul_f64(spread * share(obj)))
}

/// The object's place in `[0, 1)`: the first 53 bits of the SHA-256 of its
/// uid (of `<namespace>/<name>` for an object not stored yet). Uids are
/// random, so the shares of many objects spread evenly.
fn share(obj: &AssetScan) -> f64 {
    let seed = obj.metadata.uid.clone().unwrap_or_else(|| object_key(obj));
    let digest = Sha256::digest(seed.as_bytes());
    let mut first = [0_u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) >> 11) as f64 / (1_u64 << 53) as f64
}

/// `spec.rescanInterval`, if set and well-formed (the schema's pattern makes
/// a malformed one unreachable for accepted objects).
pub fn rescan_interval(spec: &AssetScanSpec) -> Option<Duration> {
    let text = spec.rescan_interval.as_deref()?;
    duration::parse(text, SPEC_UNITS).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::crd::DURATION_PATTERN;
    use serde_json::json;

    fn object(uid: &str, every: Option<&str>) -> AssetScan {
        let spec: AssetScanSpec = serde_json::from_value(
            json!({"assetId": "web-01", "target": {}, "rescanInterval": every}),
        )
        .expect("spec");
        let mut obj = AssetScan::new("web-01", spec);
        obj.metadata.uid = Some(uid.into());
        obj
    }

    #[test]
    fn each_object_has_its_own_share_of_the_spread_and_keeps_it() {
        let hour = Duration::from_secs(3600);
        let afters: Vec<Duration> = (0..200)
            .map(|n| {
                let obj = object(
                    &format!("9f0c2d4e-{n:04}-4a7b-8c1d-2e3f4a5b6c7d"),
                    Some("1h"),
                );
                let after = rescan_after(&obj, 0.1).expect("rescans");
                assert_eq!(rescan_after(&obj, 0.1), Some(after), "the same every time");
                assert!(after >= hour && after < hour + hour / 10, "{after:?}");
                after
            })
            .collect();
        // Spread over the whole tenth of the interval, not bunched: every
        // one of its ten slices (36 s each) holds some of the 200.
        let slice = |after: &Duration| ((*after - hour).as_secs() / 36) as usize;
        let mut slices = [0; 10];
        afters.iter().for_each(|a| slices[slice(a)] += 1);
        assert!(slices.iter().all(|n| *n >= 5), "{slices:?}");
    }

    #[test]
    fn no_spread_and_no_interval_mean_what_they_say() {
        let obj = object("9f0c2d4e-0001", Some("30m"));
        assert_eq!(rescan_after(&obj, 0.0), Some(Duration::from_secs(1800)));
        assert_eq!(
            rescan_after(&obj, f64::NAN),
            Some(Duration::from_secs(1800))
        );
        assert!(rescan_after(&obj, 1.0) < Some(Duration::from_secs(3600)));
        assert_eq!(rescan_after(&object("9f0c2d4e-0001", None), 0.1), None);
    }

    #[test]
    fn rescan_intervals_parse_like_the_schema_pattern_says() {
        let mut spec = object("9f0c2d4e-0001", None).spec;
        for (text, secs) in [
            ("6h", 6 * 3600),
            ("30m", 1800),
            ("1h30m", 5400),
            ("90s", 90),
        ] {
            spec.rescan_interval = Some(text.into());
            assert_eq!(rescan_interval(&spec), Some(Duration::from_secs(secs)));
        }
        let pattern = regex::Regex::new(DURATION_PATTERN).unwrap();
        for text in [
            "6h", "1h30m", "0s", "", "6", "h", "6x", "1.5h", "-1h", " 6h", "6h ", "6H", "1d",
            "500ms",
        ] {
            spec.rescan_interval = Some(text.into());
            assert_eq!(
                rescan_interval(&spec).is_some(),
                pattern.is_match(text),
                "{text:?}: parser and schema pattern disagree"
            );
        }
    }
}
