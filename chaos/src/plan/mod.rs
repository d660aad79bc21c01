//! The seeded schedule of a chaos run: which AssetScans exist, and what
//! happens to them, the replicas, Redis, the API server and the providers,
//! and when. Everything here follows from the seed alone, so `CHAOS_SEED`
//! replays the same schedule (the operating system's interleaving of the
//! processes within it is not replayed).
//!
//! - [`Plan::new`] draws it, in a fixed order of draws from one generator
//!   (changing that order changes every seed's schedule);
//! - [`Scale`]: how big a run is;
//! - `population`: the objects, and their creations, edits and deletions;
//! - `lifetimes`: the replicas' kills and restarts;
//! - `drills`: which replica stops itself before which write;
//! - `faults`: everything else that goes wrong, and the providers' weather.

mod drills;
mod faults;
mod lifetimes;
mod population;
mod scale;

pub use scale::Scale;

use crate::objects::PlannedObject;
use drills::Drills;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A provider stub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stub {
    Inventory,
    Osv,
    Kev,
    Epss,
    Webhook,
    WeCom,
}

impl Stub {
    pub const ALL: [Stub; 6] = [
        Stub::Inventory,
        Stub::Osv,
        Stub::Kev,
        Stub::Epss,
        Stub::Webhook,
        Stub::WeCom,
    ];

    /// The highest latency drawn for it: below every step's timeout.
    fn max_latency_ms(self) -> u64 {
        match self {
            Stub::Osv => 500,
            _ => 250,
        }
    }
}

/// An API server misbehaviour (the emulator's fault injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApiFault {
    /// `409 Conflict` on the next status writes.
    ConflictOnStatus(usize),
    /// `500` on the next writes of AssetScans.
    InternalErrorOnWrite(usize),
    /// `429` with `Retry-After: 1` on the next writes of AssetScans.
    ThrottleWrites(usize),
    /// Every open watch ends cleanly.
    EndWatches,
    /// Every open watch connection is cut.
    AbortWatches,
}

/// A fault drill armed in a replica: it stops itself (SIGSTOP) right before
/// writing `write` for the object's asset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drill {
    pub object: usize,
    pub write: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Create the object; with `isolate`, the other replicas are paused
    /// until that (armed) replica has stopped itself, so the drill fires.
    Create {
        object: usize,
        isolate: Option<usize>,
    },
    Edit {
        object: usize,
    },
    Delete {
        object: usize,
    },
    Pause {
        slot: usize,
        pause: Duration,
    },
    Kill {
        slot: usize,
    },
    Restart {
        slot: usize,
        new_instance: bool,
        drill: Option<Drill>,
    },
    /// Redis is killed (no persistence: every key is gone) and restarted.
    RedisDataLoss {
        down: Duration,
    },
    /// The API server stops answering, then comes back with its data.
    ApiOutage {
        down: Duration,
    },
    Api(ApiFault),
    Latency {
        stub: Stub,
        latency: Duration,
    },
    /// The stub's next `calls` answers are this HTTP status.
    Burst {
        stub: Stub,
        calls: usize,
        status: u16,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub at: Duration,
    pub action: Action,
}

/// The whole schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub seed: u64,
    pub scale: Scale,
    pub objects: Vec<PlannedObject>,
    /// The drill of each replica as first started.
    pub initial_drills: Vec<Option<Drill>>,
    /// In time order.
    pub events: Vec<Event>,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

impl Plan {
    pub fn new(seed: u64, scale: Scale) -> Plan {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let window = scale.window.as_secs_f64();
        let objects = population::population(&mut rng, scale.objects);
        let mut events = Vec::new();
        // The two big faults first: drills keep clear of them.
        let mut busy = faults::big_faults(&mut rng, &scale, &mut events);
        let lifetimes = lifetimes::replica_lifetimes(&mut rng, &scale, &mut events);
        let mut drills = Drills::place(&mut rng, &objects, &lifetimes, window, &mut busy);
        drills.schedule(&mut events);
        let initial_drills = drills.initial(scale.replicas);
        population::create_the_rest(&mut rng, &mut drills.created_at, window, &mut events);
        population::edits_and_deletions(
            &mut rng,
            &scale,
            &drills.used,
            &drills.created_at,
            &mut events,
        );
        faults::pauses(&mut rng, &scale, &drills.times, &mut events);
        faults::api_faults(&mut rng, &scale, &mut events);
        faults::provider_weather(&mut rng, window, &mut events);

        // Sorting moves the restarts: their indices are not used from here.
        events.sort_by_key(|e| e.at);
        Plan {
            seed,
            scale,
            objects,
            initial_drills,
            events,
        }
    }

    /// The instance name of a replica slot's `n`th instance.
    pub fn instance_name(slot: usize, n: usize) -> String {
        match n {
            0 => format!("replica-{slot}"),
            n => format!("replica-{slot}-v{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_decides_the_whole_schedule() {
        let a = Plan::new(7, Scale::bounded());
        assert_eq!(a, Plan::new(7, Scale::bounded()));
        assert_ne!(a.events, Plan::new(8, Scale::bounded()).events);
    }

    #[test]
    fn every_object_is_created_once_and_every_fault_kind_is_there() {
        for (seed, scale) in (0..20)
            .map(|seed| (seed, Scale::bounded()))
            .chain((0..5).map(|seed| (seed, Scale::full())))
        {
            let plan = Plan::new(seed, scale);
            let mut created = vec![0; plan.objects.len()];
            let mut kinds = std::collections::BTreeSet::new();
            for e in &plan.events {
                if let Action::Create { object, .. } = e.action {
                    created[object] += 1;
                }
                kinds.insert(match &e.action {
                    Action::Create { .. } => "create",
                    Action::Edit { .. } => "edit",
                    Action::Delete { .. } => "delete",
                    Action::Pause { .. } => "pause",
                    Action::Kill { .. } => "kill",
                    Action::Restart { .. } => "restart",
                    Action::RedisDataLoss { .. } => "data loss",
                    Action::ApiOutage { .. } => "outage",
                    Action::Api(_) => "api fault",
                    Action::Latency { .. } => "latency",
                    Action::Burst { .. } => "burst",
                });
            }
            assert!(created.iter().all(|n| *n == 1), "seed {seed}: {created:?}");
            let restarts: Vec<bool> = plan
                .events
                .iter()
                .filter_map(|e| match e.action {
                    Action::Restart { new_instance, .. } => Some(new_instance),
                    _ => None,
                })
                .collect();
            assert!(
                restarts.contains(&true) && restarts.contains(&false),
                "seed {seed}: restarts {restarts:?}"
            );
            assert_eq!(kinds.len(), 11, "seed {seed}: {kinds:?}");
            assert!(
                plan.initial_drills.iter().any(Option::is_some),
                "seed {seed}: no drill armed at start"
            );
            assert!(plan.events.windows(2).all(|w| w[0].at <= w[1].at));
        }
    }
}
