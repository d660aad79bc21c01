//! Each replica prefers its share. Replicas that are not sharded all watch
//! every object; left alone, each would reconcile each one, and all but
//! one would find its lock held (a GET, a Redis round trip, a label or
//! finalizer patch refused, a start of its bound spent). Instead every
//! object prefers one live replica ([`Members::prefers_me`], rendezvous
//! hashing over the live membership), and the others leave it to that
//! one: no label, finalizer, status or Redis command of theirs.
//!
//! Another replica's object is taken up only:
//! - when that replica leaves the membership: its heartbeat lapses (or it
//!   stopped gracefully), every replica reconciles all its objects again
//!   ([`Members::changed`]), and each of them prefers one of the live ones
//!   (a replica that joins is a change too: the others' shares shrink, and
//!   each books its line of delayed starts again for its own objects);
//! - as a safety net, when its run has been due for `scanStarts.takeoverAfter`
//!   without starting (a replica that heartbeats but does not run it).
//!
//! The per-asset lock and its fence are unchanged: they keep two executors
//! safe while replicas disagree on the membership for a moment (a
//! heartbeat in flight, an old version without preferences during a
//! rolling upgrade).
//!
//! [`Members::prefers_me`]: crate::kubernetes::controller::fleet::members::Members::prefers_me
//! [`Members::changed`]: crate::kubernetes::controller::fleet::members::Members::changed

use super::context::Context;
use super::request::{due_since, run_view};
use crate::kubernetes::controller::fleet::object_key;
use crate::kubernetes::crd::AssetScan;
use assetscan_domain::RunDecision;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use rand::RngExt;
use std::time::Duration;

/// `None` when this replica reconciles `obj` now; else what it answers
/// instead: look again when the object's run would be overdue past the
/// grace period on its preferred replica (a change of the object, or of
/// the membership, brings it back sooner).
pub(super) fn defer<E>(obj: &AssetScan, ctx: &Context<E>) -> Option<Action> {
    if ctx.members.prefers_me(&object_key(obj)) {
        return None;
    }
    // What this replica found of the object before it moved to another
    // replica's share (a delayed start, a lock held) is not its to report.
    ctx.waiting.cleared(obj);
    let grace = ctx.settings.scan_starts.takeover_after;
    let now = Timestamp::now();
    let due = match obj.metadata.deletion_timestamp.as_ref() {
        Some(deleted) => Some(deleted.0),
        None => match run_view(obj).decide(now) {
            RunDecision::Wait(None) | RunDecision::Suspended => {
                return Some(Action::await_change());
            }
            RunDecision::Wait(Some(delay)) => return Some(Action::requeue(delay + grace)),
            RunDecision::Run(_) | RunDecision::UnlessEarlierAlerts { .. } => due_since(obj, now),
        },
    };
    let waited = due.map_or(Duration::ZERO, |since| {
        Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO)
    });
    if due.is_some() && waited >= grace {
        ctx.metrics.reconciled("taken_over_overdue");
        return None;
    }
    ctx.metrics.reconciled("another_replicas_share");
    Some(Action::requeue(grace - waited + jitter()))
}

/// Up to a second, so that the safety net's looks do not all come at once.
fn jitter() -> Duration {
    Duration::from_millis(rand::rng().random_range(0..1000))
}
