//! What the receivers got: one idempotency key per run and channel, a
//! recorded `sent` for every high risk with each of its channels reached,
//! no alert for anything else, and a cause for every raw duplicate.

use super::{Claims, DuplicateCause, Invariant, Violation};
use crate::history::{Delivery, History, ObjectHistory};
use crate::objects::{Channel, Kind};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

pub(super) fn check(
    history: &History,
    claims: &Claims,
    out: &mut Vec<Violation>,
) -> BTreeMap<DuplicateCause, usize> {
    one_key_per_run(&history.deliveries, out);
    for object in &history.objects {
        notified(object, &history.deliveries, claims, out);
    }
    duplicates(&history.deliveries, claims, out)
}

fn describe(d: &Delivery) -> String {
    format!(
        "{} delivery of ticket {:?} (key {:?}, token {:?})",
        d.channel.name(),
        d.ticket,
        d.key,
        d.token
    )
}

/// The key a receiver would deduplicate on: the header where there is
/// one, the ticket id in the text otherwise.
fn effective_key(d: &Delivery) -> Option<&str> {
    match d.channel {
        Channel::Webhook => d.key.as_deref(),
        Channel::WeCom => d.ticket.as_deref(),
    }
}

fn one_key_per_run(deliveries: &[Delivery], out: &mut Vec<Violation>) {
    let mut keys: BTreeMap<(Channel, &str), BTreeSet<Option<&str>>> = BTreeMap::new();
    for d in deliveries {
        let Some(ticket) = d.ticket.as_deref() else {
            out.push(Violation {
                invariant: Invariant::OneKeyPerRun,
                subject: describe(d),
                detail: "names no ticket".into(),
            });
            continue;
        };
        if effective_key(d) != Some(ticket) {
            out.push(Violation {
                invariant: Invariant::OneKeyPerRun,
                subject: describe(d),
                detail: "its idempotency key is not its ticket id".into(),
            });
        }
        keys.entry((d.channel, ticket))
            .or_default()
            .insert(effective_key(d));
    }
    for ((channel, ticket), keys) in keys.into_iter().filter(|(_, k)| k.len() > 1) {
        out.push(Violation {
            invariant: Invariant::OneKeyPerRun,
            subject: format!("ticket {ticket} on {}", channel.name()),
            detail: format!("{} distinct keys: {keys:?}", keys.len()),
        });
    }
}

/// Whether `d` is about a run of `object`: one of its assetId that Redis
/// recorded under the object's namespace, or under 0.1.0's layout (shared
/// by every namespace's object of the assetId) for a run the object's
/// status named (a ticket id names no namespace). One Redis never recorded
/// is counted for every object of the assetId (its sender is reported
/// apart, in [`duplicates`]).
fn is_of(d: &Delivery, object: &ObjectHistory, claims: &Claims) -> bool {
    let Some((asset, run)) = d.asset_run() else {
        return false;
    };
    if asset != object.asset {
        return false;
    }
    let recorded = claims.identities_of(asset, run);
    let [namespaced, legacy] = object.identities();
    recorded.is_empty()
        || recorded.contains(&namespaced)
        || (recorded.contains(&legacy) && object.ran(run))
}

fn notified(
    object: &ObjectHistory,
    deliveries: &[Delivery],
    claims: &Claims,
    out: &mut Vec<Violation>,
) {
    let mut violation = |detail: String| {
        out.push(Violation {
            invariant: Invariant::Notified,
            subject: format!("AssetScan {}", object.name),
            detail,
        });
    };
    let mine: Vec<&Delivery> = deliveries
        .iter()
        .filter(|d| is_of(d, object, claims))
        .collect();
    let Kind::HighRisk { .. } = object.kind else {
        if !mine.is_empty() {
            violation(format!(
                "a {:?} asset was alerted: {}",
                object.kind,
                describe(mine[0])
            ));
        }
        return;
    };
    let status = object.last.as_ref().and_then(|o| o.get("status"));
    let phase = status.and_then(|s| s.get("phase")).and_then(Value::as_str);
    if object.deleted || phase != Some("FINISHED") {
        return;
    }
    let field = |name: &str| status.and_then(|s| s.pointer(name)).and_then(Value::as_str);
    let key = field("/notification/idempotencyKey");
    if field("/notification/state") != Some("sent") || key.is_none() || key != field("/ticketId") {
        violation(format!(
            "a high risk FINISHED without a sent notification under its ticket id: notification {:?}, ticketId {:?}",
            status.and_then(|s| s.get("notification")),
            field("/ticketId")
        ));
        return;
    }
    let channels = object.channels();
    for channel in [Channel::Webhook, Channel::WeCom] {
        let listed = channels.iter().any(|c| c == channel.name());
        let reached = mine
            .iter()
            .any(|d| d.channel == channel && effective_key(d) == key);
        let any = mine.iter().find(|d| d.channel == channel);
        if listed && !reached {
            violation(format!("{} never got key {key:?}", channel.name()));
        }
        if let (false, Some(d)) = (listed, any) {
            violation(format!(
                "{} is not in spec.notify but got {}",
                channel.name(),
                describe(d)
            ));
        }
    }
}

/// [`Invariant::EveryAlertDelivered`]: each high-risk AssetScan, deleted
/// or not, FINISHED with an accepted delivery under its ticket id on each
/// channel its `spec.notify` lists; nothing skipped, so that a run a
/// receiver's refusal failed counts.
pub(super) fn every_alert_delivered(history: &History, out: &mut Vec<Violation>) {
    for object in &history.objects {
        let Kind::HighRisk { .. } = object.kind else {
            continue;
        };
        let mut violation = |detail: String| {
            out.push(Violation {
                invariant: Invariant::EveryAlertDelivered,
                subject: format!("AssetScan {}", object.name),
                detail,
            });
        };
        let Some(status) = object.last.as_ref().map(|o| &o["status"]) else {
            violation("gone before its end was recorded".into());
            continue;
        };
        match status["phase"].as_str() {
            Some("FINISHED") => {}
            Some("FAILED") => {
                violation(format!("ended FAILED: lastError {}", status["lastError"]));
                continue;
            }
            phase => {
                violation(format!("never ended: phase {phase:?}"));
                continue;
            }
        }
        let ticket = status["ticketId"].as_str();
        let channels = object.channels();
        for channel in [Channel::Webhook, Channel::WeCom] {
            if !channels.iter().any(|c| c == channel.name()) {
                continue;
            }
            let accepted = history.deliveries.iter().any(|d| {
                d.channel == channel && d.ticket.as_deref() == ticket && effective_key(d) == ticket
            });
            if ticket.is_none() || !accepted {
                violation(format!(
                    "FINISHED without an accepted {} delivery under its ticket id {ticket:?}",
                    channel.name()
                ));
            }
        }
    }
}

/// Every delivery comes from an executor that held the run at
/// `NOTIFYING` (the key is recorded before anything is sent). Every
/// delivery after the first of a key on a channel needs a cause: another
/// executor held the run at `NOTIFYING` in the same Redis epoch (a
/// takeover after the previous one sent, then crashed or stalled before
/// recording the receipt; or its call completed after it lost the lock),
/// or in another epoch (Redis lost the ticket and the run started again).
/// A repeat under the same token has none.
fn duplicates(
    deliveries: &[Delivery],
    claims: &Claims,
    out: &mut Vec<Violation>,
) -> BTreeMap<DuplicateCause, usize> {
    let mut causes = BTreeMap::new();
    let mut seen: BTreeMap<(Channel, &str), Vec<u64>> = BTreeMap::new();
    for d in deliveries {
        let (Some(key), Some((asset, run))) = (effective_key(d), d.asset_run()) else {
            continue;
        };
        let Some(token) = d.token else {
            out.push(Violation {
                invariant: Invariant::Notified,
                subject: describe(d),
                detail: "carries no fencing token".into(),
            });
            continue;
        };
        let at = claims.identities_of(asset, run);
        if !claims.held_at(&at, run, token, "NOTIFYING") {
            out.push(Violation {
                invariant: Invariant::Notified,
                subject: describe(d),
                detail: format!(
                    "token {token} never held the run at NOTIFYING: sent before the key was recorded"
                ),
            });
        }
        let earlier = seen.entry((d.channel, key)).or_default();
        let before = earlier.clone();
        earlier.push(token);
        if before.is_empty() {
            continue;
        }
        if before.contains(&token) {
            out.push(Violation {
                invariant: Invariant::Duplicates,
                subject: describe(d),
                detail: format!(
                    "sent again under the same token; earlier deliveries of this key on this channel under tokens {before:?}"
                ),
            });
            continue;
        }
        let epoch = |t: u64| claims.claim_epoch(&at, run, t);
        // A sender that never claimed the run was reported above.
        let Some(mine) = epoch(token) else {
            continue;
        };
        let cause = if before.iter().any(|t| epoch(*t).is_some_and(|e| e != mine)) {
            DuplicateCause::RedisDataLoss
        } else {
            DuplicateCause::TakeoverAtNotifying
        };
        *causes.entry(cause).or_insert(0) += 1;
    }
    causes
}
