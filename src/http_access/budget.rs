//! How many reviews one caller address may cost the API server. A token
//! the cache has no decision for costs a TokenReview (and a
//! SubjectAccessReview when it is known), and anyone who reaches the port
//! can send a new one on every request: without a bound, an outsider makes
//! the operator load the API server at the rate of its own requests. Each
//! address has a token bucket ([`ReviewBudget`]: a burst, then one review
//! per refill interval); a request it finds empty is answered 429 without
//! an API call. A cached decision costs nothing and is never refused.
//!
//! The address is the TCP peer's, never a header a caller writes. IPv6
//! callers are counted per /64, the block one host is usually given, so
//! that a host does not get a new budget with each of its addresses; an
//! IPv4 address mapped into IPv6 counts as the IPv4 one.
//!
//! The map of addresses is bounded ([`ReviewBudget::capacity`]): an address
//! whose bucket is full again is dropped (it would behave exactly as a new
//! one), and when the map is full of busy addresses every further address
//! shares one overflow bucket. Dropping a busy address instead would give
//! it a fresh burst: a flood from many addresses costs at most
//! `capacity + 1` buckets' rate, whatever the number of addresses.
//!
//! Hand-written rather than governor's keyed limiter (a dependency already,
//! for the start bound): its key store grows with every new address
//! between sweeps and has no overflow, and its clock is its own, where the
//! rest of this module takes the `Instant` it is given ([`super::cache`]),
//! which the tests set. A GCRA is one `Instant` per address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Reviews per caller address: `burst` at once, then one per `refill`;
/// at most `capacity` addresses held.
#[derive(Debug, Clone, Copy)]
pub struct ReviewBudget {
    pub burst: u32,
    pub refill: Duration,
    pub capacity: usize,
}

impl Default for ReviewBudget {
    /// Ten new tokens at once, and one a second, per address: more than a
    /// few Prometheus replicas whose tokens rotate need (each is reviewed
    /// once a minute), and an outsider's flood costs the API server one
    /// review a second.
    fn default() -> Self {
        Self {
            burst: 10,
            refill: Duration::from_secs(1),
            capacity: 1024,
        }
    }
}

/// A caller whose budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// How long until its next review.
    pub retry_after: Duration,
}

/// The buckets. Each is the time at which it is full again (a GCRA's
/// "theoretical arrival time"); a time past means full.
#[derive(Debug)]
pub struct Budgets {
    budget: ReviewBudget,
    full_at: HashMap<IpAddr, Instant>,
    /// The bucket of the addresses the map has no room for.
    overflow: Instant,
}

impl Budgets {
    pub fn new(budget: ReviewBudget, now: Instant) -> Self {
        Self {
            budget,
            full_at: HashMap::new(),
            overflow: now,
        }
    }

    /// Takes one review for `caller` at `now`, or says when one is free.
    pub fn take(&mut self, caller: IpAddr, now: Instant) -> Result<(), Exhausted> {
        let key = counted_as(caller);
        let budget = self.budget;
        if !self.full_at.contains_key(&key) && self.full_at.len() >= budget.capacity {
            self.full_at.retain(|_, full_at| *full_at > now);
        }
        let bucket = if self.full_at.len() < budget.capacity || self.full_at.contains_key(&key) {
            self.full_at.entry(key).or_insert(now)
        } else {
            &mut self.overflow
        };
        take_from(bucket, budget, now)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.full_at.len()
    }
}

/// One review from the bucket full at `full_at`: the debt it leaves (time
/// until full) may not pass `burst` refills.
fn take_from(full_at: &mut Instant, budget: ReviewBudget, now: Instant) -> Result<(), Exhausted> {
    let debt = (full_at.saturating_duration_since(now)).saturating_add(budget.refill);
    let limit = budget.refill.saturating_mul(budget.burst);
    if debt > limit {
        return Err(Exhausted {
            retry_after: debt - limit,
        });
    }
    *full_at = now + debt;
    Ok(())
}

/// The key an address is counted under: an IPv4 address, or an IPv6 /64.
fn counted_as(caller: IpAddr) -> IpAddr {
    match caller {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(burst: u32, capacity: usize) -> ReviewBudget {
        ReviewBudget {
            burst,
            refill: Duration::from_secs(1),
            capacity,
        }
    }

    fn addr(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_burst_then_refused_until_refilled() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut budgets = Budgets::new(budget(10, 8), start);
        let caller = addr("192.0.2.1");
        for _ in 0..10 {
            assert_eq!(budgets.take(caller, start), Ok(()));
        }
        let refused = budgets.take(caller, start);
        assert_eq!(
            refused,
            Err(Exhausted {
                retry_after: Duration::from_secs(1)
            })
        );
        assert!(budgets.take(caller, at(999)).is_err(), "not refilled yet");
        assert_eq!(budgets.take(caller, at(1000)), Ok(()), "one refilled");
        assert!(budgets.take(caller, at(1000)).is_err());
        // Idle long enough: the whole burst again, and no more.
        let later = at(60_000);
        for _ in 0..10 {
            assert_eq!(budgets.take(caller, later), Ok(()));
        }
        assert!(budgets.take(caller, later).is_err());
    }

    /// A burst of one per caller, asked in this order: an address is one
    /// caller, an IPv6 /64 is one caller, a mapped IPv4 is the IPv4 one.
    #[test]
    fn each_caller_has_its_own_budget() {
        let now = Instant::now();
        let mut budgets = Budgets::new(budget(1, 8), now);
        for (address, allowed) in [
            ("192.0.2.1", true),
            ("192.0.2.1", false),
            ("192.0.2.2", true),
            ("2001:db8:1:2::1", true),
            ("2001:db8:1:2:ffff::9", false),
            ("2001:db8:1:3::1", true),
            ("198.51.100.7", true),
            ("::ffff:198.51.100.7", false),
        ] {
            let answer = budgets.take(addr(address), now);
            assert_eq!(answer.is_ok(), allowed, "{address}");
        }
    }

    #[test]
    fn many_addresses_hold_at_most_the_capacity_and_share_the_overflow() {
        let now = Instant::now();
        let mut budgets = Budgets::new(budget(2, 4), now);
        for i in 0..4 {
            assert!(budgets.take(addr(&format!("192.0.2.{i}")), now).is_ok());
        }
        // The map is full of busy addresses: the next ones share one bucket.
        for i in 4..100 {
            let answer = budgets.take(addr(&format!("192.0.2.{i}")), now);
            assert_eq!(answer.is_ok(), i < 6, "address {i}");
            assert_eq!(budgets.len(), 4);
        }
        // Their buckets full again, the first ones make room.
        let later = now + Duration::from_secs(2);
        assert!(budgets.take(addr("192.0.2.200"), later).is_ok());
        assert_eq!(budgets.len(), 1, "the idle addresses were dropped");
    }

    #[test]
    fn a_zero_burst_refuses_every_review() {
        let now = Instant::now();
        let mut budgets = Budgets::new(budget(0, 8), now);
        assert!(budgets.take(addr("192.0.2.1"), now).is_err());
    }
}
