//! Fair shares of one rate among namespaces: the lines of delayed callers
//! that the start bound (`kubernetes::controller::fleet::starts`) keeps, one per
//! namespace ([`FairLines`]), and the turns of the callers that wait for a
//! provider's pacing (`providers::pace`, [`FairTurns`]).
//!
//! A caller refused by a bucket is given a slot, a time to try again. Each
//! namespace has its own line of slots, and while `n` namespaces have
//! callers waiting, each line moves on by `n` intervals per slot given, from
//! the bucket's next free start on. A namespace that sends ten thousand
//! callers books its own line far ahead; another namespace's few get slots
//! from the next start on, about every `n`-th one, instead of queueing
//! behind the ten thousand. A slot is not a reservation: whoever tries when
//! a start is free takes it, and the other gets a later slot in its own
//! line.

use governor::clock::Reference;
use governor::nanos::Nanos;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// One line of slots per namespace, for a bucket whose starts are
/// `spacing` apart once its burst is spent.
#[derive(Debug)]
pub struct FairLines<I> {
    spacing: Duration,
    /// Where each namespace's line ends: the slot its next caller gets,
    /// unless the bucket's next start is later. Only lines that end after
    /// the last call are kept.
    ends: Mutex<HashMap<String, I>>,
}

impl<I: Reference> FairLines<I> {
    pub fn new(spacing: Duration) -> FairLines<I> {
        FairLines {
            spacing,
            ends: Mutex::new(HashMap::new()),
        }
    }

    /// The slot of `namespace`'s next caller, refused at `now` by a bucket
    /// whose next start is `next_start`; its line moves on by one interval
    /// per namespace waiting.
    pub fn slot(&self, namespace: &str, now: I, next_start: I) -> I {
        let mut ends = self.ends();
        ends.retain(|_, end| *end > now);
        let sharing = ends.len() + usize::from(!ends.contains_key(namespace));
        let slot = (ends.get(namespace)).map_or(next_start, |end| (*end).max(next_start));
        let turn = (self.spacing).saturating_mul(u32::try_from(sharing).unwrap_or(u32::MAX));
        ends.insert(namespace.to_owned(), slot + Nanos::from(turn));
        slot
    }

    /// Whether `namespace` has callers waiting at `now`: its line ends
    /// later.
    pub fn waiting(&self, namespace: &str, now: I) -> bool {
        self.ends().get(namespace).is_some_and(|end| *end > now)
    }

    /// Forgets every line's bookings: the next callers get slots from the
    /// bucket's next free start on, as if none had waited before them.
    pub fn clear(&self) {
        self.ends().clear();
    }

    fn ends(&self) -> MutexGuard<'_, HashMap<String, I>> {
        self.ends.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Turns among callers that wait, in fair order across namespaces (start
/// time fair queuing): a caller's tag is one more than the later of the
/// last tag served and its namespace's last tag, and the caller with the
/// lowest tag goes next. A namespace with a thousand callers waiting holds
/// tags far ahead; another's first caller is next but one.
#[derive(Debug, Default)]
pub struct FairTurns {
    state: Mutex<Turns>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct Turns {
    /// (tag, arrival) of every caller waiting.
    waiting: BTreeSet<(u64, u64)>,
    /// The last tag each namespace was given, while ahead of `served`.
    last: HashMap<String, u64>,
    /// The highest tag whose caller has gone.
    served: u64,
    arrivals: u64,
}

/// A caller's place among the [`FairTurns`]; leaving (dropping it) lets the
/// next one go.
#[derive(Debug)]
pub struct Turn<'a> {
    turns: &'a FairTurns,
    key: (u64, u64),
}

impl FairTurns {
    /// A place for a caller of `namespace`.
    pub fn enter(&self, namespace: &str) -> Turn<'_> {
        let mut state = self.state();
        let served = state.served;
        state.last.retain(|_, tag| *tag > served);
        let tag = state
            .last
            .get(namespace)
            .copied()
            .unwrap_or(served)
            .max(served)
            + 1;
        state.last.insert(namespace.to_owned(), tag);
        state.arrivals += 1;
        let key = (tag, state.arrivals);
        state.waiting.insert(key);
        Turn { turns: self, key }
    }

    fn state(&self) -> MutexGuard<'_, Turns> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Turn<'_> {
    /// Whether no caller waiting has a lower tag.
    pub fn is_next(&self) -> bool {
        self.turns.state().waiting.first() == Some(&self.key)
    }

    /// Completes when some caller leaves, once enabled: pin and
    /// `enable()` it before checking [`Turn::is_next`], so that a departure
    /// in between is not missed.
    pub fn left(&self) -> tokio::sync::futures::Notified<'_> {
        self.turns.changed.notified()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut state = self.turns.state();
        state.waiting.remove(&self.key);
        state.served = state.served.max(self.key.0);
        drop(state);
        self.turns.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::{Clock, FakeRelativeClock};

    #[test]
    fn callers_go_in_turns_across_namespaces() {
        let turns = FairTurns::default();
        let mut waiting: Vec<(&str, Turn<'_>)> = ["a", "a", "a", "b", "b"]
            .into_iter()
            .map(|ns| (ns, turns.enter(ns)))
            .collect();
        let mut order = Vec::new();
        while !waiting.is_empty() {
            let next = waiting.iter().position(|(_, t)| t.is_next()).unwrap();
            assert_eq!(waiting.iter().filter(|(_, t)| t.is_next()).count(), 1);
            order.push(waiting.remove(next).0);
        }
        assert_eq!(order, ["a", "b", "a", "b", "a"]);
        // All served: a newcomer goes at once.
        assert!(turns.enter("c").is_next());
    }

    #[test]
    fn each_namespace_waiting_takes_its_turn() {
        let clock = FakeRelativeClock::default();
        let lines = FairLines::new(Duration::from_millis(100));
        let now = clock.now();
        let ms =
            |slot: <FakeRelativeClock as Clock>::Instant| Duration::from(slot.duration_since(now));
        let at = |d: u64| now + Nanos::from(Duration::from_millis(d));
        // Alone, `a`'s callers get every interval.
        let a: Vec<_> = (0..3).map(|_| ms(lines.slot("a", now, at(100)))).collect();
        assert_eq!(a, [100, 200, 300].map(Duration::from_millis));
        // `b` arrives: its first caller gets the next start, and the lines
        // of both move on by two intervals from now on.
        assert_eq!(
            ms(lines.slot("b", now, at(100))),
            Duration::from_millis(100)
        );
        assert_eq!(
            ms(lines.slot("b", now, at(100))),
            Duration::from_millis(300)
        );
        assert_eq!(
            ms(lines.slot("a", now, at(100))),
            Duration::from_millis(400)
        );
        // Lines that ran out are forgotten: alone again, one interval.
        clock.advance(Duration::from_secs(10));
        let later = clock.now();
        let first = lines.slot("a", later, later);
        assert_eq!(
            lines.slot("a", later, later),
            first + Nanos::from(Duration::from_millis(100))
        );
    }
}
