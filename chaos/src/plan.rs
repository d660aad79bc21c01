//! The seeded schedule of a chaos run: which AssetScans exist, and what
//! happens to them, the replicas, Redis, the API server and the providers,
//! and when. Everything here follows from the seed alone, so `CHAOS_SEED`
//! replays the same schedule (the operating system's interleaving of the
//! processes within it is not replayed).

use crate::objects::{Channel, Kind, PlannedObject};
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How big a run is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    /// `full` or `bounded`.
    pub name: String,
    pub objects: usize,
    pub replicas: usize,
    /// The operator's lock ttl; pauses last 0.5–2.5 times this.
    pub lock_ttl: Duration,
    /// Objects are created, and faults happen, within this window.
    pub window: Duration,
    pub pauses: usize,
    /// SIGKILLs; each replica killed is restarted 1–4 s later.
    pub kills: usize,
    pub edits: usize,
    pub deletions: usize,
    /// Injected API errors and ended or cut watches.
    pub api_faults: usize,
    /// Bounds of the API server outage, in seconds.
    pub outage_secs: (f64, f64),
    /// How long the operators get to converge once the faults stop.
    pub settle: Duration,
}

impl Scale {
    /// `make chaos`: a few hundred objects and every fault many times.
    pub fn full() -> Scale {
        Scale {
            name: "full".into(),
            objects: 240,
            replicas: 3,
            lock_ttl: Duration::from_secs(2),
            window: Duration::from_secs(240),
            pauses: 40,
            kills: 6,
            edits: 24,
            deletions: 20,
            api_faults: 40,
            outage_secs: (5.0, 20.0),
            settle: Duration::from_secs(300),
        }
    }

    /// The run inside `make test`: every kind of fault, fewer of each.
    pub fn bounded() -> Scale {
        Scale {
            name: "bounded".into(),
            objects: 30,
            replicas: 3,
            lock_ttl: Duration::from_secs(2),
            window: Duration::from_secs(45),
            pauses: 6,
            kills: 2,
            edits: 4,
            deletions: 3,
            api_faults: 6,
            outage_secs: (5.0, 7.0),
            settle: Duration::from_secs(40),
        }
    }
}

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
        let ttl = scale.lock_ttl.as_secs_f64();
        let objects = population(&mut rng, scale.objects);
        let mut events = Vec::new();

        // The two big faults first: drills keep clear of them.
        let (loss_at, loss_down) = (
            rng.random_range(window * 0.4..window * 0.6),
            rng.random_range(0.5..3.0),
        );
        let (low, high) = scale.outage_secs;
        let (outage_at, outage_down) = (
            rng.random_range(window * 0.25..window * 0.75),
            rng.random_range(low..high),
        );
        events.push(Event {
            at: secs(loss_at),
            action: Action::RedisDataLoss {
                down: secs(loss_down),
            },
        });
        events.push(Event {
            at: secs(outage_at),
            action: Action::ApiOutage {
                down: secs(outage_down),
            },
        });
        let mut busy = vec![
            (loss_at - 3.0, loss_at + loss_down + 5.0),
            (outage_at - 3.0, outage_at + outage_down + 5.0),
        ];

        // Replica lifetimes: kills at distinct times, each followed by a
        // restart with the same instance name or a new one (both happen).
        let lifetimes = replica_lifetimes(&mut rng, &scale, &mut events);

        // Drill targets: one object per lifetime long enough, created while
        // the armed replica runs (the others paused around it), clear of
        // the big faults and of each other, early enough that the armed
        // replica lives on until its stale write.
        let mut used = vec![false; objects.len()];
        let mut created_at: Vec<Option<f64>> = vec![None; objects.len()];
        let mut drills_by_lifetime = Vec::new();
        let mut drill_times: Vec<(usize, f64)> = Vec::new();
        for life in &lifetimes {
            let (from, to) = (life.from + 3.0, life.to.min(window * 0.9) - 12.0);
            let at = (to > from)
                .then(|| free_time(&mut rng, from..to, &busy))
                .flatten();
            let target = at.and_then(|at| {
                let (object, write) =
                    pick_drill_target(&mut rng, &objects, &used, drill_times.len())?;
                Some((at, object, write))
            });
            let drill = target.map(|(at, object, write)| {
                used[object] = true;
                created_at[object] = Some(at);
                // The whole pipeline may run before a late drill fires.
                let reach = if write == "ASSET_OFFLINE" { 8.0 } else { 15.0 };
                busy.push((at - 4.0, at + reach));
                drill_times.push((life.slot, at));
                Drill {
                    object,
                    write: write.to_owned(),
                }
            });
            drills_by_lifetime.push((life.slot, life.restart_event, drill));
        }
        for (slot, restart_event, drill) in &drills_by_lifetime {
            let Some(drill) = drill else { continue };
            if let Some(at) = created_at[drill.object] {
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
        let initial_drills = (0..scale.replicas)
            .map(|slot| {
                drills_by_lifetime
                    .iter()
                    .find(|(s, restart, _)| *s == slot && restart.is_none())
                    .and_then(|(_, _, drill)| drill.clone())
            })
            .collect();

        // Everything else is created over the first three quarters.
        for (object, at) in created_at.iter_mut().enumerate() {
            if at.is_none() {
                let t = rng.random_range(0.0..window * 0.75);
                *at = Some(t);
                events.push(Event {
                    at: secs(t),
                    action: Action::Create {
                        object,
                        isolate: None,
                    },
                });
            }
        }

        // Spec edits and deletions while runs are in flight.
        let mut candidates: Vec<usize> = (0..objects.len()).filter(|o| !used[*o]).collect();
        candidates.shuffle(&mut rng);
        let edits: Vec<usize> = candidates.iter().copied().take(scale.edits).collect();
        let deletions: Vec<usize> = candidates
            .iter()
            .copied()
            .skip(scale.edits)
            .take(scale.deletions)
            .collect();
        for (list, delay, make) in [
            (
                &edits,
                20.0,
                (|object| Action::Edit { object }) as fn(usize) -> Action,
            ),
            (&deletions, 25.0, |object| Action::Delete { object }),
        ] {
            for &object in list {
                let created = created_at[object].unwrap_or(0.0);
                let at = (created + rng.random_range(0.3..delay)).min(window);
                events.push(Event {
                    at: secs(at),
                    action: make(object),
                });
            }
        }

        // Pauses of any replica, except the armed one around its drill.
        let mut pauses = 0;
        while pauses < scale.pauses {
            let at = rng.random_range(window * 0.05..window);
            let slot = rng.random_range(0..scale.replicas);
            if drill_times
                .iter()
                .any(|(s, d)| *s == slot && (d - 6.0..d + 8.0).contains(&at))
            {
                continue;
            }
            events.push(Event {
                at: secs(at),
                action: Action::Pause {
                    slot,
                    pause: secs(ttl * rng.random_range(0.5..2.5)),
                },
            });
            pauses += 1;
        }
        for _ in 0..scale.api_faults {
            let fault = match rng.random_range(0..5) {
                0 => ApiFault::ConflictOnStatus(rng.random_range(1..5)),
                1 => ApiFault::InternalErrorOnWrite(rng.random_range(1..5)),
                2 => ApiFault::ThrottleWrites(rng.random_range(1..4)),
                3 => ApiFault::EndWatches,
                _ => ApiFault::AbortWatches,
            };
            events.push(Event {
                at: secs(rng.random_range(0.0..window)),
                action: Action::Api(fault),
            });
        }
        provider_weather(&mut rng, window, &mut events);

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

/// The objects, in creation-independent order: four tenths high risk (both
/// channels, or one), two tenths offline, four tenths clean.
fn population(rng: &mut Xoshiro256PlusPlus, count: usize) -> Vec<PlannedObject> {
    let mut kinds: Vec<Kind> = (0..count)
        .map(|i| match i % 10 {
            0..=3 => Kind::HighRisk {
                channels: match i % 4 {
                    0 | 1 => vec![Channel::Webhook, Channel::WeCom],
                    2 => vec![Channel::Webhook],
                    _ => vec![Channel::WeCom],
                },
                log4j: i.is_multiple_of(3),
            },
            4 | 5 => Kind::Offline,
            n => Kind::Clean {
                findings: n % 2 == 0,
            },
        })
        .collect();
    kinds.shuffle(rng);
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| PlannedObject::new(i, kind))
        .collect()
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

/// One process lifetime of a replica slot, in seconds into the window.
struct Lifetime {
    slot: usize,
    from: f64,
    to: f64,
    /// The index in `events` of the restart that began it (none: the first).
    restart_event: Option<usize>,
}

fn replica_lifetimes(
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

/// Random latency of every stub, changed every few seconds, and short
/// bursts of 5xx answers.
fn provider_weather(rng: &mut Xoshiro256PlusPlus, window: f64, events: &mut Vec<Event>) {
    let mut t = 0.0;
    while t < window {
        for stub in Stub::ALL {
            let max = stub.max_latency_ms();
            events.push(Event {
                at: secs(t + rng.random_range(0.0..1.0)),
                action: Action::Latency {
                    stub,
                    latency: Duration::from_millis(rng.random_range(0..=max)),
                },
            });
        }
        t += rng.random_range(2.0..5.0);
    }
    let mut t = rng.random_range(0.0..4.0);
    while t < window {
        let stub = Stub::ALL[rng.random_range(0..Stub::ALL.len())];
        events.push(Event {
            at: secs(t),
            action: Action::Burst {
                stub,
                calls: rng.random_range(2..8),
                status: if rng.random_bool(0.5) { 503 } else { 500 },
            },
        });
        t += rng.random_range(1.5..6.0);
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
