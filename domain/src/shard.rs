//! How assets are spread over the operator's replicas.
//!
//! An asset hashes into one of [`BUCKETS`] fixed buckets (FNV-1a of its id:
//! stable across processes, versions and replica counts). Replica `index`
//! of `count` owns the buckets `b` with `b % count == index`. The bucket is
//! recorded on the object once, when it is first seen, so the API server
//! can give each replica only its own objects; changing the number of
//! replicas changes which buckets a replica asks for, never an object.
//!
//! For a count that divides [`BUCKETS`] (1, 2, 4, 8, ...), a replica owns
//! exactly the assets `hash % count == index`, as the operator's earlier
//! versions filtered them: replicas of both versions agree on the owner.

/// The fixed number of buckets. A power of two, so that every replica count
/// that is one divides it evenly; at most 256 replicas.
pub const BUCKETS: u32 = 256;

/// FNV-1a, 64 bits.
pub(crate) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The bucket an asset id hashes into.
pub fn bucket(asset: &str) -> u32 {
    // The remainder is below BUCKETS, so it fits.
    u32::try_from(fnv1a(asset) % u64::from(BUCKETS)).unwrap_or(0)
}

/// A bucket as a label writes it: its decimal number, nothing else.
pub fn parse_bucket(text: &str) -> Option<u32> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    let bucket: u32 = text.parse().ok().filter(|_| canonical)?;
    (bucket < BUCKETS).then_some(bucket)
}

/// A replica's share of the buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

/// A shard that cannot be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("shard count {0} is not between 1 and {BUCKETS}")]
    Count(u32),
    #[error("shard index {index} is not below the shard count {count}")]
    Index { index: u32, count: u32 },
}

impl Shard {
    /// The only shard, owning every bucket.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if count == 0 || count > BUCKETS {
            return Err(ShardError::Count(count));
        }
        if index >= count {
            return Err(ShardError::Index { index, count });
        }
        Ok(Shard { index, count })
    }

    pub fn index(self) -> u32 {
        self.index
    }

    pub fn count(self) -> u32 {
        self.count
    }

    pub fn owns(self, bucket: u32) -> bool {
        bucket % self.count == self.index
    }

    /// The buckets this shard owns, ascending.
    pub fn buckets(self) -> impl Iterator<Item = u32> {
        (0..BUCKETS).filter(move |b| self.owns(*b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_stable_and_spread() {
        // Fixed values: a change here moves every asset to another replica.
        assert_eq!(bucket("web-01"), (fnv1a("web-01") % 256) as u32);
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        let mut counts = [0u32; BUCKETS as usize];
        for n in 0..25_600 {
            counts[bucket(&format!("asset-{n}")) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (50..=150).contains(c)), "{counts:?}");
    }

    #[test]
    fn every_bucket_has_one_owner_whatever_the_count() {
        for count in [1, 2, 3, 4, 7, 16, 256] {
            let shards: Vec<Shard> = (0..count).map(|i| Shard::new(i, count).unwrap()).collect();
            for b in 0..BUCKETS {
                assert_eq!(
                    shards.iter().filter(|s| s.owns(b)).count(),
                    1,
                    "{b} of {count}"
                );
            }
            let owned: usize = shards.iter().map(|s| s.buckets().count()).sum();
            assert_eq!(owned, BUCKETS as usize);
        }
    }

    #[test]
    fn a_count_dividing_the_buckets_agrees_with_the_hash_modulo_the_count() {
        for count in [1, 2, 4, 8] {
            for n in 0..1_000 {
                let asset = format!("asset-{n}");
                let earlier = (fnv1a(&asset) % u64::from(count)) as u32;
                let shard = Shard::new(earlier, count).unwrap();
                assert!(shard.owns(bucket(&asset)), "{asset} of {count}");
            }
        }
    }

    #[test]
    fn only_canonical_bucket_numbers_parse() {
        assert_eq!(parse_bucket("0"), Some(0));
        assert_eq!(parse_bucket("255"), Some(255));
        for bad in ["", "256", "-1", "007", "1e2", " 1", "abc", "99999999999"] {
            assert_eq!(parse_bucket(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn impossible_shards_are_refused() {
        assert_eq!(Shard::new(0, 0), Err(ShardError::Count(0)));
        assert_eq!(Shard::new(0, 257), Err(ShardError::Count(257)));
        assert_eq!(
            Shard::new(2, 2),
            Err(ShardError::Index { index: 2, count: 2 })
        );
        assert_eq!(Shard::ALL.buckets().count(), 256);
    }
}
