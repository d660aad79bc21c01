//! Each object's preferred replica among the live ones, by rendezvous
//! (highest random weight) hashing: every replica scores each live member
//! for the object and the highest score wins. Replicas that see the same
//! membership agree without talking to each other; when a member leaves,
//! only its objects move (each to the member that scored second), and
//! when one joins it takes about `1 / members` of the objects, from each
//! of the others alike.
//!
//! The weight is FNV-1a of the member and the key, mixed by SplitMix64's
//! finalizer (FNV alone leaves similar inputs with similar high bits):
//! fixed arithmetic, so two operator versions side by side agree.

use crate::shard::fnv1a;

/// The member `members` prefer for `key`: the one with the highest
/// weight (ties, which need a 64-bit collision, go to the smaller name).
pub fn preferred<'m>(members: impl IntoIterator<Item = &'m str>, key: &str) -> Option<&'m str> {
    members
        .into_iter()
        .map(|member| (weight(member, key), std::cmp::Reverse(member)))
        .max()
        .map(|(_, std::cmp::Reverse(member))| member)
}

/// The weight of `member` for `key`.
fn weight(member: &str, key: &str) -> u64 {
    let mut h = fnv1a(&format!("{member}\u{0}{key}"));
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn keys() -> impl Iterator<Item = String> {
        (0..3000).map(|i| format!("team-{}/scan-{i}", i % 7))
    }

    #[test]
    fn each_member_gets_about_its_share() {
        let members = ["op-0#1a2b3c4d", "op-1#5e6f7a8b", "op-2#9c0d1e2f"];
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for key in keys() {
            *counts.entry(preferred(members, &key).unwrap()).or_default() += 1;
        }
        for (member, count) in &counts {
            assert!((850..=1150).contains(count), "{member}: {count} of 3000");
        }
        assert_eq!(preferred([], "a/b"), None);
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_objects() {
        let all = ["op-0#1a2b3c4d", "op-1#5e6f7a8b", "op-2#9c0d1e2f"];
        let left = ["op-0#1a2b3c4d", "op-2#9c0d1e2f"];
        for key in keys() {
            let before = preferred(all, &key).unwrap();
            let after = preferred(left, &key).unwrap();
            if before != "op-1#5e6f7a8b" {
                assert_eq!(before, after, "{key} moved");
            }
        }
    }

    #[test]
    fn the_order_of_the_members_does_not_matter() {
        let a = ["x#1", "y#2", "z#3"];
        let b = ["z#3", "x#1", "y#2"];
        for key in keys() {
            assert_eq!(preferred(a, &key), preferred(b, &key));
        }
    }
}
