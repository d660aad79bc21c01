//! One reconcile of an object that is not being deleted: decide from the
//! newest copy of it, take a start of the replica's start bound for a run
//! (or look again later), drive the run through the pipeline (or say on the
//! object why none goes on), and settle the pipeline's outcome.

use super::context::{Context, Error};
use super::deferral::deferred_rescan;
use super::notify_wait::backoff_left;
use super::outcome::settle;
use super::request::run_view;
use super::request::scan_request;
use crate::kubernetes::controller::cache::{DELIVERY_WAIT, Latest};
use crate::kubernetes::controller::fleet::members::replica_of;
use crate::kubernetes::controller::fleet::object_key;
use crate::kubernetes::controller::fleet::shard::Placement;
use crate::kubernetes::controller::fleet::spread::rescan_after;
use crate::kubernetes::controller::fleet::starts::Admission;
use crate::kubernetes::controller::status::halt::{Halt, Refused};
use crate::kubernetes::controller::status::mirror::StatusMirror;
use crate::kubernetes::controller::status::report::report_name;
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::{Effects, Outcome};
use crate::ports::{StoreFailure, Tickets};
use assetscan_domain::AssetId;
use assetscan_domain::RunDecision;
use assetscan_domain::RunView;
use assetscan_domain::ScanRequest;
use assetscan_domain::TriageRequest;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use tracing::debug;

/// What a reconcile acts on, or its answer already.
enum Decision {
    /// This copy of the object, what to do with it, and whether a start of
    /// the replica's start bound was taken for it.
    Act(Arc<AssetScan>, RunDecision, Start),
    /// Nothing to act on now.
    Answer(Action),
}

/// Reconciles a live object: decides what to do from its newest copy, does
/// it, and says on the object why no run goes on when one cannot.
pub(super) async fn apply<E: Effects + 'static>(
    cached: &AssetScan,
    ctx: &Context<E>,
    api: &Api<AssetScan>,
) -> Result<Action, Error> {
    let (fresh, decision, start) = match decide_fresh(cached, ctx, api).await? {
        Decision::Act(obj, decision, start) => (obj, decision, start),
        Decision::Answer(action) => return Ok(action),
    };
    let obj = fresh.as_ref();
    // Said on the object only by a reconcile that starts no run: a run's
    // claim ends the deferral in its own write.
    let deferral =
        (!calls_providers(&decision)).then(|| deferred_rescan(&view_of(obj, ctx), &decision));
    let refused = ctx.channels.refused(obj).await?;
    let rescan = rescan_after(obj, ctx.settings.scan_starts.rescan_spread);
    let mirror = StatusMirror::new(api.clone(), obj, &ctx.recorder, &ctx.metrics, rescan)
        .progress_every(ctx.settings.progress_every)
        .records(&ctx.settings.reports, &ctx.settings.events)
        .grace_to_write_end(ctx.store.tickets.lock_ttl())
        .remembered_in(ctx.cache());
    let result = act(obj, decision, ctx, &mirror, rescan, &refused).await;
    if start == Start::Taken && !mirror.claimed() {
        // No run started: the lock was held, the run had ended, the claim
        // was refused, or Redis failed. The start goes to the next one.
        ctx.starts.give_back();
    }
    if result.is_ok() {
        mirror.shard_label(Placement::of(obj).invalid()).await;
        mirror.channels(&refused).await;
        if let Some(deferred) = deferral {
            mirror.rescan_deferred(deferred.as_ref()).await;
        }
    }
    if let Err(err) = &result {
        // An infrastructure failure: `Stalled=True`, `Ready=False`.
        let stalled = Halt::Stalled {
            reason: err.reason(),
            message: err.to_string(),
        };
        mirror.halt(&stalled).await;
    }
    result
}

/// What to do with the object, decided from its newest copy.
async fn decide_fresh<E: Effects + 'static>(
    cached: &AssetScan,
    ctx: &Context<E>,
    api: &Api<AssetScan>,
) -> Result<Decision, Error> {
    // Decide from the newest cached copy, unless it misses a status write
    // of this process: then the delivery of that write triggers the next
    // reconcile. A decision to wait or to stay suspended is taken from the
    // cache alone: its writes are conditional on the copy's resourceVersion,
    // so a copy that misses another replica's write costs a refused write,
    // never a wrong status.
    let (fresh, read) = match ctx.cache().latest(cached) {
        Latest::Cached(obj) => (Some(obj), false),
        Latest::OwnWriteUndelivered => {
            ctx.metrics.reconciled("cache_behind");
            return Ok(Decision::Answer(Action::requeue(DELIVERY_WAIT)));
        }
        Latest::Unknown => (read_stored(cached, ctx, api).await?, true),
    };
    let Some(mut fresh) = fresh else {
        return Ok(Decision::Answer(Action::await_change()));
    };
    let mut view = view_of(&fresh, ctx);
    let mut decision = view.decide(Timestamp::now());
    let mut start = Start::NotTaken;
    if let Some(wait) = notify_backoff_left(&fresh, &view, &decision, ctx) {
        ctx.metrics.reconciled("notify_backoff");
        return Ok(Decision::Answer(Action::requeue(wait)));
    }
    if calls_providers(&decision) {
        // A run is about to be claimed or continued: it needs a start of
        // this replica's start bound, unless only its notification is left.
        // Without one, look again later, before any read, write or Redis
        // command.
        let exempt = !needs_a_start(&view, &decision);
        if !exempt {
            match take_a_start(ctx, &fresh) {
                Ok(took) => start = took,
                Err(wait) => return Ok(Decision::Answer(wait)),
            }
        }
        if !read {
            // Decide again from the object as stored. After Redis lost its
            // data, the stored status is the only record that a run ended
            // or that the object is gone, and a cached copy older than it
            // would claim that run again (or recreate a deleted object's
            // ticket). One GET per run started.
            let Some(stored) = read_stored(cached, ctx, api).await? else {
                return Ok(Decision::Answer(Action::await_change()));
            };
            fresh = stored;
            view = view_of(&fresh, ctx);
            decision = view.decide(Timestamp::now());
            // The cached copy showed an alert, the stored object another
            // run to drive: that one takes its start.
            if exempt && needs_a_start(&view, &decision) {
                match take_a_start(ctx, &fresh) {
                    Ok(took) => start = took,
                    Err(wait) => return Ok(Decision::Answer(wait)),
                }
            }
        }
    }
    if fresh.meta().deletion_timestamp.is_some() {
        // The finalizer's cleanup runs on the next reconcile.
        return Ok(Decision::Answer(Action::requeue(Duration::from_millis(
            100,
        ))));
    }
    Ok(Decision::Act(fresh, decision, start))
}

/// Whether a reconcile took a start of the replica's start bound (given
/// back when no run was claimed after all).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    Taken,
    NotTaken,
}

/// How long `decision` on `obj` waits for its next notify pass, the last
/// one having failed ([`backoff_left`]).
fn notify_backoff_left<E: Effects + 'static>(
    obj: &AssetScan,
    view: &RunView,
    decision: &RunDecision,
    ctx: &Context<E>,
) -> Option<Duration> {
    let backoff = ctx.pipeline.steps().notify.max_backoff;
    backoff_left(obj, view, decision, backoff, Timestamp::now())
}

/// What the run decision reads of `obj`, with the operator's minimum
/// interval between rescans the annotation asks for.
fn view_of<E: Effects + 'static>(obj: &AssetScan, ctx: &Context<E>) -> RunView {
    RunView {
        rescan_min_interval: ctx.settings.scan_starts.rescan_min_interval,
        ..run_view(obj)
    }
}

/// Takes one of the replica's starts for `obj`; without one left, the
/// answer that requeues it for its slot in the line of delayed starts.
fn take_a_start<E: Effects + 'static>(ctx: &Context<E>, obj: &AssetScan) -> Result<Start, Action> {
    match ctx.starts.admit(&obj.namespace().unwrap_or_default()) {
        Admission::Now => Ok(Start::Taken),
        Admission::After(delay) => {
            ctx.waiting.blocked(obj);
            Err(Action::requeue(delay))
        }
    }
}

/// Whether carrying `decision` out takes one of the replica's starts: a
/// run to claim or continue does, except a confirmed high risk's, whose
/// notification is all that is left. That one never waits behind a line of
/// new scans (its channels have a pace of their own), so how soon a high
/// risk goes out does not depend on how many AssetScans wait to start.
fn needs_a_start(view: &RunView, decision: &RunDecision) -> bool {
    calls_providers(decision) && !view.continues_an_alert(decision)
}

/// Whether `decision` drives a run, which calls the providers: a new run
/// or one to continue (resumed after a restart, a takeover, a deferred
/// notification).
fn calls_providers(decision: &RunDecision) -> bool {
    matches!(
        decision,
        RunDecision::Run(_) | RunDecision::UnlessEarlierAlerts { .. }
    )
}

/// Carries `decision` out on `obj`; a run that ended is looked at again
/// `rescan` later; the `refused` channels are left out of its run. Every
/// error is the ticket store's (or the API server's) and stalls the object.
async fn act<E: Effects + 'static>(
    obj: &AssetScan,
    decision: RunDecision,
    ctx: &Context<E>,
    mirror: &StatusMirror<'_>,
    rescan: Option<Duration>,
    refused: &Refused,
) -> Result<Action, Error> {
    let (run, supersedes) = match decision {
        RunDecision::Run(run) => (run, None),
        RunDecision::UnlessEarlierAlerts { earlier, next } => (next, Some(earlier)),
        RunDecision::Wait(delay) => {
            ctx.metrics.reconciled("up_to_date");
            ctx.forget(obj);
            ctx.waiting.cleared(obj);
            write_missing_report(obj, &*ctx.store.tickets, mirror).await?;
            return Ok(delay.map_or_else(Action::await_change, Action::requeue));
        }
        RunDecision::Suspended => {
            ctx.metrics.reconciled("suspended");
            ctx.forget(obj);
            ctx.waiting.cleared(obj);
            mirror.halt(&Halt::Suspended).await;
            return Ok(Action::await_change());
        }
    };
    let request = match scan_request(obj, &run, ctx.holder(obj)) {
        Ok(mut request) => {
            request.channels.retain(|c| !refused.contains(c));
            ScanRequest {
                supersedes,
                ..request
            }
        }
        Err(err) => {
            mirror.halt(&Halt::InvalidSpec(err.to_string())).await;
            return Ok(Action::await_change());
        }
    };
    let request = ScanRequest {
        triage: TriageRequest {
            statements: ctx.exceptions.statements(obj).await?,
            ..request.triage
        },
        ..request
    };
    ctx.redis_ready_after_failure(obj).await?;
    let outcome = run_pipeline(request, ctx, mirror).await?;
    ctx.forget(obj);
    // Not started: another executor holds the lock (for as long as it
    // lives, and its lock's ttl after). Overdue once that one is gone.
    if let Outcome::Locked { holder, .. } = &outcome {
        ctx.waiting.held_by(obj, replica_of(holder));
    } else {
        ctx.waiting.cleared(obj);
    }
    let key = object_key(obj);
    let settled = settle(&outcome, rescan);
    let then = settled.carry_out(&key, &ctx.metrics, mirror).await;
    // The end of a run another executor ended is its to write: look again
    // when that is overdue, unless its write comes first.
    Ok(mirror.end_awaited_for().map_or(then, Action::requeue))
}

/// Runs `request`. An earlier run found alerting goes first, in the same
/// reconcile.
async fn run_pipeline<E: Effects + 'static>(
    mut request: ScanRequest,
    ctx: &Context<E>,
    mirror: &StatusMirror<'_>,
) -> Result<Outcome, StoreFailure> {
    let outcome = ctx.pipeline.run(&request, mirror, &ctx.shutdown).await?;
    if let Outcome::EarlierRunAlerting = outcome
        && let Some(earlier) = request.supersedes.take()
    {
        // The earlier generation's run confirmed a risk the status may not
        // show yet (the executor that found it may have died before
        // mirroring it): it notifies before the new run starts.
        request.run = earlier;
        return ctx.pipeline.run(&request, mirror, &ctx.shutdown).await;
    }
    Ok(outcome)
}

/// The object as stored now (a GET); `None` once it is gone, and then
/// nothing of it is kept.
async fn read_stored<E: Effects + 'static>(
    cached: &AssetScan,
    ctx: &Context<E>,
    api: &Api<AssetScan>,
) -> Result<Option<Arc<AssetScan>>, Error> {
    match api.get(&cached.name_any()).await {
        Ok(stored) => Ok(Some(Arc::new(stored))),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            ctx.forget_gone(cached);
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

/// The run the status shows ended has no report named in the status (its
/// write failed, or the status write that named it was lost): mirror the
/// run's ticket again, which writes the report and names it. One read of
/// the ticket, only then; a ticket Redis no longer has cannot be reported.
async fn write_missing_report(
    obj: &AssetScan,
    tickets: &dyn Tickets,
    mirror: &StatusMirror<'_>,
) -> Result<(), StoreFailure> {
    let Some(status) = obj.status.as_ref() else {
        return Ok(());
    };
    let (Some(run), Some(phase)) = (status.run.as_deref(), status.phase) else {
        return Ok(());
    };
    if !phase.is_terminal() || status.latest_report.as_deref() == Some(&report_name(obj, run)) {
        return Ok(());
    }
    let Ok(asset) = AssetId::new(obj.spec.asset_id.clone()) else {
        return Ok(());
    };
    let namespace = obj.metadata.namespace.as_deref();
    match tickets.ticket_of(namespace, &asset, run).await? {
        Some(ticket) if ticket.status.is_terminal() => {
            mirror.mirror(&ticket).await;
        }
        _ => debug!(run, "no ticket left to report the run from"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::Recorded;
    use assetscan_domain::ticket::Status;

    fn at_phase(phase: Status) -> RunView {
        RunView {
            owner: "1234abcd".into(),
            generation: 1,
            recorded: Recorded {
                run: Some("1234abcd-g1-s0".into()),
                phase: Some(phase),
                ..Recorded::default()
            },
            ..RunView::default()
        }
    }

    #[test]
    fn a_run_takes_a_start_unless_its_notification_is_all_that_is_left() {
        let this = RunDecision::Run("1234abcd-g1-s0".into());
        assert!(needs_a_start(&at_phase(Status::Init), &this));
        assert!(needs_a_start(&at_phase(Status::VulnCheckDone), &this));
        assert!(!needs_a_start(&at_phase(Status::HighRiskFound), &this));
        assert!(!needs_a_start(&at_phase(Status::Notifying), &this));
        let next = RunDecision::Run("1234abcd-g1-s1".into());
        assert!(needs_a_start(&at_phase(Status::Notifying), &next));
        assert!(!needs_a_start(
            &at_phase(Status::Finished),
            &RunDecision::Wait(None)
        ));
    }
}
