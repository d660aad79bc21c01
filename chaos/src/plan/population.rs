//! The AssetScans of a run, and what the API sees done to them: when each
//! is created, which are edited (a new generation) or deleted while their
//! runs are in flight.

use super::{Action, Event, Scale, secs};
use crate::objects::{Channel, Kind, PlannedObject};
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use rand::seq::SliceRandom;

/// The objects, in creation-independent order: four tenths high risk (both
/// channels, or one), two tenths offline, four tenths clean.
pub(super) fn population(rng: &mut Xoshiro256PlusPlus, count: usize) -> Vec<PlannedObject> {
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

/// Creates every object without a time yet (`created_at`, set for the
/// drills' targets) over the first three quarters of the window.
pub(super) fn create_the_rest(
    rng: &mut Xoshiro256PlusPlus,
    created_at: &mut [Option<f64>],
    window: f64,
    events: &mut Vec<Event>,
) {
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
}

/// Spec edits and deletions while runs are in flight, of objects that are
/// no drill's target (`used`), shortly after each is created.
pub(super) fn edits_and_deletions(
    rng: &mut Xoshiro256PlusPlus,
    scale: &Scale,
    used: &[bool],
    created_at: &[Option<f64>],
    events: &mut Vec<Event>,
) {
    let window = scale.window.as_secs_f64();
    let mut candidates: Vec<usize> = (0..used.len()).filter(|o| !used[*o]).collect();
    candidates.shuffle(rng);
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
}
