//! The per-replica bound on how many runs start per second
//! (`scanStarts.perSecond`, `scanStarts.burst`): a token bucket that every
//! reconcile about to claim or continue a run passes first, so that a first
//! round of many AssetScans, or a restart with every run to resume, reaches
//! the providers and the API server at a bounded rate, whatever the number
//! of objects.
//!
//! The bucket is a GCRA, the algorithm of [governor] (whose clocks it
//! runs on, so that it is testable on a fake one): exact, no second sees
//! more than `burst + perSecond` starts. It is written here because it
//! does one thing governor's does not: it keeps part of its burst back
//! for namespaces that have no line of delayed starts ([`Bucket::take`]).
//! A reconcile that finds no start left is not kept waiting in its
//! reconcile slot: it requeues, without an API call or a Redis command, for
//! a slot of its own in a line of delayed starts, one start interval apart.
//! Told merely "the next start is due in 50 ms", thousands of delayed
//! objects would all come back then, and again, each time; with a slot of
//! its own, each comes back about once, when a start is free for it.
//!
//! The line is one per namespace, and shared fairly ([`FairLines`]): a
//! namespace's few new AssetScans are not queued behind another
//! namespace's mass creation. And a namespace with a line takes its starts
//! from a quarter of the burst only ([`reserve`]): the rest is kept for the
//! namespaces that have none, so that a team's few new AssetScans start at
//! once even while another team's thousands keep the bound busy. The
//! backlog loses nothing of the rate: it takes each start as it refills,
//! and its quarter is the slack its callers need, who come back at their
//! slots a little late (jitter, a busy replica) while the bucket refills.
//!
//! Each replica has two gates of this bound: one for runs, and one for
//! labelling new objects with their shard bucket, the start of their first
//! run (`reconcile::place`), so that new objects reach the runs' gate in
//! fair turns across namespaces, not in order of creation.
//!
//! A start is spent only on a run that starts: a reconcile that took one
//! and recorded no claim (it found the asset's lock held by another
//! executor, the run ended by another, its claim refused, Redis failing)
//! gives it back ([`StartGate::give_back`]), and the next reconcile takes
//! it before the bucket's. A start given back is
//! kept one start interval at most: no second sees more than
//! `burst + perSecond + 1` runs start.

use crate::fair::FairLines;
use crate::kubernetes::controller::settings::ScanStartsSection;
use crate::telemetry::GateCounters;
use governor::clock::{Clock, DefaultClock, Reference};
use governor::nanos::Nanos;
use rand::RngExt;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Whether a run may start now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Start it: one start is taken.
    Now,
    /// Look again after this long (the object's place in the line of
    /// delayed starts, and a little jitter).
    After(Duration),
}

/// A token bucket as GCRA keeps it: the theoretical arrival time of the
/// next start (`tat`), which runs ahead of the clock by one start interval
/// per start taken, and may run at most `burst` intervals ahead.
struct Bucket<C: Clock> {
    clock: C,
    /// One start interval: `1 / perSecond`.
    spacing: Nanos,
    /// `burst`.
    burst: u64,
    tat: Mutex<C::Instant>,
}

impl<C: Clock> Bucket<C> {
    /// A full bucket.
    fn new(clock: C, spacing: Duration, burst: u32) -> Bucket<C> {
        let tat = Mutex::new(clock.now());
        Bucket {
            clock,
            spacing: Nanos::from(spacing),
            burst: u64::from(burst.max(1)),
            tat,
        }
    }

    /// Takes a start if `keep` more are left after it.
    fn take(&self, keep: u32) -> bool {
        let now = self.clock.now();
        let mut tat = self.tat.lock().unwrap_or_else(|e| e.into_inner());
        let next = (*tat).max(now) + self.spacing;
        if next <= now + self.allowance(keep) {
            *tat = next;
            return true;
        }
        false
    }

    /// When a caller that leaves `keep` starts can take one next.
    fn next_start(&self, keep: u32) -> C::Instant {
        let now = self.clock.now();
        let tat = *self.tat.lock().unwrap_or_else(|e| e.into_inner());
        let next = tat.max(now) + self.spacing;
        now + next.duration_since(now + self.allowance(keep))
    }

    /// Time between two starts once the burst is spent: `1 / perSecond`.
    fn spacing(&self) -> Duration {
        Duration::from(self.spacing)
    }

    /// How far ahead of the clock a caller that leaves `keep` starts may
    /// push the theoretical arrival time.
    fn allowance(&self, keep: u32) -> Nanos {
        self.spacing * self.burst.saturating_sub(u64::from(keep))
    }
}

/// The start bound of one replica, shared by all its reconciles.
pub struct StartGate<C: Clock = DefaultClock> {
    bucket: Bucket<C>,
    /// The starts of the burst a namespace with a line leaves to those
    /// without one ([`reserve`]).
    kept_back: u32,
    /// The lines of delayed starts, one per namespace.
    lines: FairLines<C::Instant>,
    /// When each start given back and not taken again was given back.
    returned: Mutex<VecDeque<C::Instant>>,
    counters: GateCounters,
}

impl StartGate {
    /// The bound `bound` on the real clock, counted in `counters`.
    pub fn new(bound: &ScanStartsSection, counters: &GateCounters) -> StartGate {
        StartGate::with_clock(bound, counters, DefaultClock::default())
    }
}

impl<C: Clock> StartGate<C> {
    fn with_clock(bound: &ScanStartsSection, counters: &GateCounters, clock: C) -> StartGate<C> {
        let quota = bound.quota();
        StartGate {
            bucket: Bucket::new(clock, quota.replenish_interval(), quota.burst_size().get()),
            kept_back: reserve(quota.burst_size().get()),
            lines: FairLines::new(quota.replenish_interval()),
            returned: Mutex::new(VecDeque::new()),
            counters: counters.clone(),
        }
    }

    /// Takes a start if one is left; else gives the delay until this
    /// caller's slot in its namespace's line of delayed starts, and keeps
    /// that slot for it (the line moves on by one start interval for each
    /// namespace with delayed starts).
    pub fn admit(&self, namespace: &str) -> Admission {
        let now = self.bucket.clock.now();
        if self.take_returned(now) {
            self.counters.taken.inc();
            return Admission::Now;
        }
        let keep = if self.lines.waiting(namespace, now) {
            self.kept_back
        } else {
            0
        };
        if self.bucket.take(keep) {
            self.counters.taken.inc();
            return Admission::Now;
        }
        self.counters.delayed.inc();
        // When it comes back, its namespace has a line: its slot is no
        // sooner than a start it may take then.
        let next_start = self.bucket.next_start(self.kept_back);
        let slot = self.lines.slot(namespace, now, next_start);
        Admission::After(Duration::from(slot.duration_since(now)) + self.jitter())
    }

    /// Books the lines of delayed starts again from now: the callers that
    /// wait are about to come back at once (the membership changed) and
    /// each takes a new slot. Slots booked for objects that moved to
    /// another replica's share would otherwise leave gaps in this replica's
    /// line, each a start interval in which none of its own objects start.
    /// The bucket is not touched: the rate stays bounded.
    pub fn rebook(&self) {
        self.lines.clear();
    }

    /// Gives back a start taken by a reconcile that started no run (it
    /// found the lock held, or the run ended): the next caller takes it.
    pub fn give_back(&self) {
        let now = self.bucket.clock.now();
        self.returned().push_back(now);
        self.counters.returned.inc();
    }

    /// Takes a start given back less than one start interval ago, if any;
    /// older ones are dropped (the bucket has refilled since).
    fn take_returned(&self, now: C::Instant) -> bool {
        let mut returned = self.returned();
        while let Some(&at) = returned.front() {
            returned.pop_front();
            if Duration::from(now.duration_since(at)) <= self.bucket.spacing() {
                return true;
            }
        }
        false
    }

    fn returned(&self) -> MutexGuard<'_, VecDeque<C::Instant>> {
        self.returned.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up to a quarter of the start interval: callers whose slots are
    /// adjacent do not come back at the same instant, and none comes back
    /// before its slot or after the next one's.
    fn jitter(&self) -> Duration {
        let quarter = u64::try_from(self.bucket.spacing().as_nanos() / 4).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=quarter))
    }
}

/// The starts of a burst of `burst` that a namespace with a line leaves to
/// the namespaces without one: all but a quarter of it, and all but two at
/// least, so that its own line has the slack to take each start as the
/// bucket refills: a line that finds the bucket full has lost a refill.
fn reserve(burst: u32) -> u32 {
    burst.saturating_sub((burst / 4).max(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Metrics;
    use governor::clock::FakeRelativeClock;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    fn gate(per_second: u32, burst: u32) -> (StartGate<FakeRelativeClock>, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (gate_on(&clock, per_second, burst), clock)
    }

    fn gate_on(
        clock: &FakeRelativeClock,
        per_second: u32,
        burst: u32,
    ) -> StartGate<FakeRelativeClock> {
        let bound = ScanStartsSection {
            per_second,
            burst,
            ..ScanStartsSection::default()
        };
        StartGate::with_clock(&bound, &Metrics::new().starts.runs, clock.clone())
    }

    fn delay(admission: Admission) -> Duration {
        match admission {
            Admission::After(delay) => delay,
            Admission::Now => panic!("started; a delay was expected"),
        }
    }

    #[test]
    fn a_burst_starts_at_once_then_each_delayed_start_gets_its_own_slot() {
        let (gate, clock) = gate(5, 3);
        for _ in 0..3 {
            assert_eq!(gate.admit("a"), Admission::Now);
        }
        // 5 per second: slots 200 ms apart, each with at most 50 ms jitter,
        // from the second interval on: a namespace with a line leaves one
        // start (all but two of the burst of 3) to namespaces without one.
        let slots: Vec<Duration> = (0..4).map(|_| delay(gate.admit("a"))).collect();
        for (k, slot) in slots.iter().enumerate() {
            let due = Duration::from_millis(200 * (k as u64 + 2));
            assert!(
                *slot >= due && *slot <= due + Duration::from_millis(50),
                "slot {k}: {slot:?}, due {due:?}"
            );
        }
        // Each delayed caller that comes back at its slot starts.
        let mut at = Duration::ZERO;
        for slot in slots {
            clock.advance(slot - at);
            at = slot;
            assert_eq!(gate.admit("a"), Admission::Now, "at {at:?}");
        }
        assert_eq!(gate.counters.taken.get(), 7);
        assert_eq!(gate.counters.delayed.get(), 4);
    }

    /// Many objects at once, each reconcile doing what `apply` does with
    /// the answer (start, or look again after the delay): all start, no
    /// second sees more than `burst + perSecond` starts, and each delayed
    /// object comes back about once, not at every start interval.
    #[test]
    fn a_storm_starts_at_the_bound_and_each_delayed_object_looks_again_about_once() {
        let (per_second, burst, objects) = (20, 5, 300);
        let (gate, clock) = gate(per_second, burst);
        let mut due: BinaryHeap<Reverse<(Duration, usize)>> =
            (0..objects).map(|o| Reverse((Duration::ZERO, o))).collect();
        let (mut now, mut starts, mut looks) = (Duration::ZERO, Vec::new(), 0);
        while let Some(Reverse((at, object))) = due.pop() {
            clock.advance(at - now);
            now = at;
            looks += 1;
            match gate.admit("a") {
                Admission::Now => starts.push(now),
                Admission::After(delay) => due.push(Reverse((now + delay, object))),
            }
        }
        assert_eq!(starts.len(), objects);
        let peak = starts
            .iter()
            .map(|t| {
                starts
                    .iter()
                    .filter(|s| **s >= *t && **s - *t < Duration::from_secs(1))
                    .count()
            })
            .max();
        assert!(peak <= Some((burst + per_second) as usize), "peak {peak:?}");
        let took = starts.last().copied().unwrap_or_default();
        let paced =
            Duration::from_millis(1000 * (objects as u64 - burst as u64) / per_second as u64);
        assert!(
            took >= paced - Duration::from_millis(50),
            "all started after {took:?}"
        );
        assert!(
            took <= paced + Duration::from_secs(1),
            "all started after {took:?}"
        );
        assert!(
            looks <= 2 * objects + objects / 10,
            "{looks} looks for {objects} objects"
        );
    }

    /// What an object waits for in [`mass_then_few`].
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Stage {
        Label,
        Start,
        /// A start once more, for a run continued (after a conflict, a
        /// retry): the start gate sees more than the labels let through.
        Continue,
    }

    /// Namespace `a`'s `mass` AssetScans due at once, namespace `b`'s `few`
    /// at `b_arrives`, each reconcile doing what `apply` does with the
    /// answer: when each started, and in which namespace. With `labels`,
    /// each object passes that gate first, as `place` does with a new
    /// object, and reaches the start gate once labelled; and every fifth of
    /// `a`'s runs takes a start once more, 100 ms after its first.
    fn mass_then_few(
        (gate, clock): (StartGate<FakeRelativeClock>, FakeRelativeClock),
        labels: Option<&StartGate<FakeRelativeClock>>,
        (mass, few): (usize, usize),
        b_arrives: Duration,
    ) -> Vec<(Duration, &'static str)> {
        let first = if labels.is_some() {
            Stage::Label
        } else {
            Stage::Start
        };
        let mut due: BinaryHeap<Reverse<(Duration, Stage, usize)>> = (0..mass)
            .map(|o| Reverse((Duration::ZERO, first, o)))
            .chain((mass..mass + few).map(|o| Reverse((b_arrives, first, o))))
            .collect();
        let (mut now, mut starts) = (Duration::ZERO, Vec::new());
        while let Some(Reverse((at, stage, object))) = due.pop() {
            clock.advance(at - now);
            now = at;
            let namespace = if object < mass { "a" } else { "b" };
            let admission = match labels {
                Some(labels) if stage == Stage::Label => labels.admit(namespace),
                _ => gate.admit(namespace),
            };
            let next = match (admission, stage) {
                (Admission::After(delay), _) => Some((now + delay, stage)),
                (Admission::Now, Stage::Label) => Some((now, Stage::Start)),
                (Admission::Now, Stage::Start) => {
                    starts.push((now, namespace));
                    let again = labels.is_some() && namespace == "a" && object % 5 == 0;
                    again.then(|| (now + Duration::from_millis(100), Stage::Continue))
                }
                (Admission::Now, Stage::Continue) => None,
            };
            if let Some((at, stage)) = next {
                due.push(Reverse((at, stage, object)));
            }
        }
        starts
    }

    /// The last of `starts` came no later than `slack` after `taken` starts
    /// take at the bound, the first `burst` of them at once: nobody was
    /// starved.
    fn assert_paced(
        starts: &[(Duration, &str)],
        taken: u64,
        (per_second, burst): (u32, u32),
        slack: Duration,
    ) {
        let last = starts.iter().map(|(at, _)| *at).max().unwrap();
        let paced =
            Duration::from_millis(1000 * (taken - u64::from(burst)) / u64::from(per_second));
        assert!(
            last <= paced + slack,
            "the last start at {last:?}, paced {paced:?}"
        );
    }

    /// When namespace `b`'s AssetScans started.
    fn starts_of_b(starts: &[(Duration, &str)]) -> Vec<Duration> {
        (starts.iter())
            .filter(|(_, ns)| *ns == "b")
            .map(|(at, _)| *at)
            .collect()
    }

    /// Namespace `a` creates 600 AssetScans at once; 5 s later namespace
    /// `b` creates 10. `b`'s wait for its starts is bounded by its own
    /// count and the number of namespaces sharing the bound, not by `a`'s
    /// backlog (about 25 s at that moment): all of `b`'s start within 6 s.
    /// `a` is not starved either: every object starts, at the bound.
    #[test]
    fn a_namespace_with_few_objects_does_not_queue_behind_a_mass_creation() {
        let (per_second, burst) = (20, 5);
        let b_arrives = Duration::from_secs(5);
        let starts = mass_then_few(gate(per_second, burst), None, (600, 10), b_arrives);
        assert_eq!(starts.len(), 610);
        let b_done = (starts.iter())
            .filter(|(_, ns)| *ns == "b")
            .map(|(at, _)| *at)
            .max()
            .unwrap();
        // `--nocapture` shows the figure (docs/tenancy.md).
        println!(
            "namespace b's 10 starts: the last {:?} after b arrived",
            b_done - b_arrives
        );
        assert!(
            b_done - b_arrives <= Duration::from_secs(6),
            "b's last start {:?} after it arrived",
            b_done - b_arrives
        );
        assert_paced(&starts, 610, (per_second, burst), Duration::from_secs(1));
    }

    /// While namespace `a`'s 1 000 keep the bound busy, namespace `b`'s
    /// first 15 AssetScans (three quarters of the burst) start the moment
    /// they come: `a`'s backlog has left that much of the burst. The bound
    /// holds all along, and `a` loses only the time those take to refill.
    #[test]
    fn a_namespace_without_a_line_starts_at_once_beside_a_backlog() {
        let (per_second, burst) = (20, 20);
        let b_arrives = Duration::from_secs(5);
        let starts = mass_then_few(gate(per_second, burst), None, (1000, 15), b_arrives);
        assert_eq!(
            starts_of_b(&starts),
            vec![b_arrives; 15],
            "b's 15 started as they came"
        );
        let peak = (starts.iter())
            .map(|(t, _)| {
                (starts.iter())
                    .filter(|(s, _)| *s >= *t && *s - *t < Duration::from_secs(1))
                    .count()
            })
            .max();
        assert!(peak <= Some((burst + per_second) as usize), "peak {peak:?}");
        assert_paced(&starts, 1015, (per_second, burst), Duration::from_secs(2));
    }

    /// The same with every object new: labelled first, at the same pace
    /// (`place`), and some of `a`'s runs taking a second start. Each gate
    /// keeps three quarters of its burst from `a`'s line: at the label gate
    /// `a`'s objects wait for them, so that they reach the start gate no
    /// faster than it refills, and `b`'s 15 find them kept at both gates and
    /// start the moment they come.
    #[test]
    fn a_namespace_without_a_line_starts_at_once_beside_a_backlog_of_new_objects() {
        let (per_second, burst) = (20, 20);
        let b_arrives = Duration::from_secs(5);
        let (gate, clock) = gate(per_second, burst);
        let labels = gate_on(&clock, per_second, burst);
        let starts = mass_then_few((gate, clock), Some(&labels), (1000, 15), b_arrives);
        assert_eq!(starts.len(), 1015);
        assert_eq!(
            starts_of_b(&starts),
            vec![b_arrives; 15],
            "b's 15 started as they came"
        );
        assert_paced(&starts, 1215, (per_second, burst), Duration::from_secs(2));
    }

    #[test]
    fn a_start_given_back_is_taken_again_within_one_start_interval() {
        let (gate, clock) = gate(10, 1);
        assert_eq!(gate.admit("a"), Admission::Now);
        gate.give_back();
        // The bucket is empty; the start given back is not.
        assert_eq!(gate.admit("a"), Admission::Now);
        delay(gate.admit("a"));
        // One given back and not taken within the 100 ms interval is gone.
        clock.advance(Duration::from_millis(100));
        assert_eq!(gate.admit("a"), Admission::Now);
        gate.give_back();
        clock.advance(Duration::from_millis(101));
        assert_eq!(gate.admit("a"), Admission::Now, "the bucket's own");
        delay(gate.admit("a"));
        assert_eq!(gate.counters.returned.get(), 2);
    }

    #[test]
    fn the_line_is_forgotten_after_a_quiet_spell() {
        let (gate, clock) = gate(10, 2);
        assert_eq!(gate.admit("a"), Admission::Now);
        assert_eq!(gate.admit("a"), Admission::Now);
        let first = delay(gate.admit("a"));
        let second = delay(gate.admit("a"));
        assert!(second > first);
        clock.advance(Duration::from_secs(10));
        // The slots handed out are long past, the bucket full again.
        assert_eq!(gate.admit("a"), Admission::Now);
        assert_eq!(gate.admit("a"), Admission::Now);
        // Its slot: once two starts are left (the one it takes, and the
        // one its namespace, which has a line now, leaves), 200 ms.
        let again = delay(gate.admit("a"));
        assert!(again <= Duration::from_millis(225), "{again:?}");
    }
}
