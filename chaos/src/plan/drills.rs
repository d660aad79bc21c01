//! The fault drills: per replica lifetime long enough, one object whose
//! creation the armed replica meets alone (the others paused around it), and
//! the write it stops itself before. Drills keep clear of the big faults and
//! of each other, and come early enough that the armed replica lives on
//! until its stale write.

use super::lifetimes::Lifetime;
use super::{Action, Drill, Event, secs};
use crate::objects::{Kind, PlannedObject};
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

/// Where the drills landed.
pub(super) struct Drills {
    /// The drills' target objects: edits and deletions keep off them.
    pub(super) used: Vec<bool>,
    /// When each target object is created; `None` for every other object.
    pub(super) created_at: Vec<Option<f64>>,
    /// `(slot, when)` of each drill: pauses keep off the armed replica then.
    pub(super) times: Vec<(usize, f64)>,
    /// Per lifetime: its slot, the restart event that began it, its drill.
    by_lifetime: Vec<(usize, Option<usize>, Option<Drill>)>,
}

impl Drills {
    /// A drill for each of `lifetimes` that has room for one, outside the
    /// `busy` intervals, each of which it then adds to them.
    pub(super) fn place(
        rng: &mut Xoshiro256PlusPlus,
        objects: &[PlannedObject],
        lifetimes: &[Lifetime],
        window: f64,
        busy: &mut Vec<(f64, f64)>,
    ) -> Drills {
        let mut drills = Drills {
            used: vec![false; objects.len()],
            created_at: vec![None; objects.len()],
            times: Vec::new(),
            by_lifetime: Vec::new(),
        };
        for life in lifetimes {
            let (from, to) = (life.from + 3.0, life.to.min(window * 0.9) - 12.0);
            let at = (to > from)
                .then(|| free_time(rng, from..to, busy))
                .flatten();
            let target = at.and_then(|at| {
                let (object, write) =
                    pick_drill_target(rng, objects, &drills.used, drills.times.len())?;
                Some((at, object, write))
            });
            let drill = target.map(|(at, object, write)| {
                drills.used[object] = true;
                drills.created_at[object] = Some(at);
                // The whole pipeline may run before a late drill fires.
                let reach = if write == "ASSET_OFFLINE" { 8.0 } else { 15.0 };
                busy.push((at - 4.0, at + reach));
                drills.times.push((life.slot, at));
                Drill {
                    object,
                    write: write.to_owned(),
                }
            });
            drills
                .by_lifetime
                .push((life.slot, life.restart_event, drill));
        }
        drills
    }

    /// Schedules the creation of each drill's target with its replica
    /// isolated, and arms the drill in the restart that begins its lifetime
    /// (an index into `events`, so before they are sorted).
    pub(super) fn schedule(&self, events: &mut Vec<Event>) {
        for (slot, restart_event, drill) in &self.by_lifetime {
            let Some(drill) = drill else { continue };
            if let Some(at) = self.created_at[drill.object] {
                events.push(Event {
                    at: secs(at),
                    action: Action::Create {
                        object: drill.object,
                        isolate: Some(*slot),
                    },
                });
            }
            if let Some(index) = restart_event
                && let Some(Event {
                    action: Action::Restart { drill: armed, .. },
                    ..
                }) = events.get_mut(*index)
            {
                *armed = Some(drill.clone());
            }
        }
    }

    /// The drill of each of the `replicas` as first started.
    pub(super) fn initial(&self, replicas: usize) -> Vec<Option<Drill>> {
        (0..replicas)
            .map(|slot| {
                self.by_lifetime
                    .iter()
                    .find(|(s, restart, _)| *s == slot && restart.is_none())
                    .and_then(|(_, _, drill)| drill.clone())
            })
            .collect()
    }
}

/// A time in `range` outside every `busy` interval, if one is found.
fn free_time(
    rng: &mut Xoshiro256PlusPlus,
    range: std::ops::Range<f64>,
    busy: &[(f64, f64)],
) -> Option<f64> {
    (0..50)
        .map(|_| rng.random_range(range.clone()))
        .find(|t| busy.iter().all(|(from, to)| !(from..to).contains(&t)))
}

/// An unused offline or high-risk object for the `n`th drill, and the write
/// to stop before: every other drill the demo's stale `ASSET_OFFLINE` (one
/// provider call in: it fires even on a slow machine), in between a verdict
/// or the record of a notification already sent (whose takeover re-sends
/// it).
fn pick_drill_target(
    rng: &mut Xoshiro256PlusPlus,
    objects: &[PlannedObject],
    used: &[bool],
    n: usize,
) -> Option<(usize, &'static str)> {
    let want_offline = n.is_multiple_of(2);
    let fits = |o: &PlannedObject| match o.kind {
        Kind::Offline => want_offline,
        Kind::HighRisk { .. } => !want_offline,
        Kind::Clean { .. } => false,
    };
    let free: Vec<usize> = (0..objects.len())
        .filter(|&i| !used[i] && fits(&objects[i]))
        .collect();
    let object = *free.get(rng.random_range(0..free.len().max(1)))?;
    let write = match (&objects[object].kind, n % 4) {
        (Kind::Offline, _) => "ASSET_OFFLINE",
        (_, 1) => "NOTIFIED",
        _ => "HIGH_RISK_FOUND",
    };
    Some((object, write))
}
