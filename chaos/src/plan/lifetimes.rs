//! The replicas' process lifetimes: kills at distinct times, each followed
//! by a restart with the same instance name or a new one (both happen).

use super::{Action, Event, Scale, secs};
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

/// One process lifetime of a replica slot, in seconds into the window.
pub(super) struct Lifetime {
    pub(super) slot: usize,
    pub(super) from: f64,
    pub(super) to: f64,
    /// The index in `events` of the restart that began it (none: the first).
    pub(super) restart_event: Option<usize>,
}

/// Schedules the kills and restarts into `events`; every lifetime they
/// make, the first ones and the restarted ones.
pub(super) fn replica_lifetimes(
    rng: &mut Xoshiro256PlusPlus,
    scale: &Scale,
    events: &mut Vec<Event>,
) -> Vec<Lifetime> {
    let window = scale.window.as_secs_f64();
    let mut times: Vec<f64> = (0..scale.kills)
        .map(|_| rng.random_range(window * 0.1..window * 0.85))
        .collect();
    times.sort_by(f64::total_cmp);
    let mut lifetimes = Vec::new();
    let mut current: Vec<(f64, Option<usize>)> = vec![(0.0, None); scale.replicas];
    let mut busy_until = vec![0.0_f64; scale.replicas];
    for (restarts, at) in times.into_iter().enumerate() {
        // A replica that runs (again); when every one is down or just
        // back, the kill waits for the first to be up.
        let up: Vec<usize> = (0..scale.replicas)
            .filter(|s| busy_until[*s] <= at)
            .collect();
        let (at, slot) = match up.get(rng.random_range(0..up.len().max(1))) {
            Some(slot) => (at, *slot),
            None => (0..scale.replicas)
                .map(|s| (busy_until[s], s))
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap_or((at, 0)),
        };
        let restart_at = at + rng.random_range(1.0..4.0);
        busy_until[slot] = restart_at + 2.0;
        let (from, restart_event) = current[slot];
        lifetimes.push(Lifetime {
            slot,
            from,
            to: at,
            restart_event,
        });
        events.push(Event {
            at: secs(at),
            action: Action::Kill { slot },
        });
        events.push(Event {
            at: secs(restart_at),
            action: Action::Restart {
                slot,
                // The first restart keeps the instance name, the second
                // takes a new one; then either.
                new_instance: match restarts {
                    0 => false,
                    1 => true,
                    _ => rng.random_bool(0.5),
                },
                drill: None,
            },
        });
        current[slot] = (restart_at, Some(events.len() - 1));
    }
    for (slot, (from, restart_event)) in current.into_iter().enumerate() {
        lifetimes.push(Lifetime {
            slot,
            from,
            to: window,
            restart_event,
        });
    }
    lifetimes
}
