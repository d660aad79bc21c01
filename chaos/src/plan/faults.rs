//! The faults spread over the window, apart from the kills and the drills:
//! the Redis data loss and the API server outage, pauses of replicas, API
//! errors and dropped watches, and the providers' weather.

use super::{Action, ApiFault, Event, Scale, Stub, secs};
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use std::time::Duration;

/// Schedules the Redis data loss and the API server outage; the intervals
/// around them that drills must keep clear of, in seconds.
pub(super) fn big_faults(
    rng: &mut Xoshiro256PlusPlus,
    scale: &Scale,
    events: &mut Vec<Event>,
) -> Vec<(f64, f64)> {
    let window = scale.window.as_secs_f64();
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
    vec![
        (loss_at - 3.0, loss_at + loss_down + 5.0),
        (outage_at - 3.0, outage_at + outage_down + 5.0),
    ]
}

/// Pauses of any replica, except the armed one around its drill
/// (`drill_times`: slot and time of each).
pub(super) fn pauses(
    rng: &mut Xoshiro256PlusPlus,
    scale: &Scale,
    drill_times: &[(usize, f64)],
    events: &mut Vec<Event>,
) {
    let window = scale.window.as_secs_f64();
    let ttl = scale.lock_ttl.as_secs_f64();
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
}

/// API errors on writes, and watches ended or cut, at any time.
pub(super) fn api_faults(rng: &mut Xoshiro256PlusPlus, scale: &Scale, events: &mut Vec<Event>) {
    let window = scale.window.as_secs_f64();
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
}

/// Random latency of every stub, changed every few seconds, and short
/// bursts of 5xx answers.
pub(super) fn provider_weather(rng: &mut Xoshiro256PlusPlus, window: f64, events: &mut Vec<Event>) {
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
