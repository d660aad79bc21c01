//! Mirrors a run's ticket into the AssetScan's status, and reports it as
//! Events: the pipeline's [`Observer`], composed of the status plan
//! (`plan.rs`, what to write), the fenced writer (`writer.rs`, writing it),
//! the report recorder (`report.rs`) and the run's Events (`events.rs`).

use super::conditions::{ConditionType, bounded};
use super::events::RunEvents;
use super::halt::{
    DeferredRescan, Halt, Refused, channel_condition, rescan_condition, shard_label_condition,
};
use super::plan::{ClaimRefusal, Planned, StatusPlan, fence_of};
use super::report::{ReportRecorder, report_name};
use super::writer::StatusWriter;
use crate::kubernetes::controller::cache::WatchCache;
use crate::kubernetes::controller::fleet::shard::InvalidShardLabel;
use crate::kubernetes::controller::settings::{EventsSection, ReportsSection};
use crate::kubernetes::crd::{AssetScan, AssetScanStatus};
use crate::pipeline::{ClaimRecord, Observer, StepError};
use crate::telemetry::Metrics;
use assetscan_domain::Alert;
use assetscan_domain::ticket::{Step, Ticket, now_ms};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::events::Recorder;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::{debug, warn};

/// The pipeline's observer for one object's reconcile: mirrors each
/// accepted ticket into the status, records claims, reports runs that
/// ended, and tells the run's Events and metrics.
pub struct StatusMirror<'a> {
    obj: &'a AssetScan,
    plan: StatusPlan,
    writer: StatusWriter<'a>,
    reports: ReportRecorder<'a>,
    events: RunEvents<'a>,
    /// A step in between a run's claim and its end is written only once
    /// this long has passed since the last write (see
    /// [`crate::kubernetes::controller::settings::StatusSection::progress_every`]).
    progress_every: Duration,
    /// Whether this reconcile recorded a claim: a run started (or resumed).
    claimed: AtomicBool,
    /// How long the executor that ended a run has to write its end (the
    /// lock's ttl) before another writes it.
    grace_to_write_end: Duration,
    /// The end of a run another executor ended and has not written yet is
    /// left to it for this long (see [`Observer::on_found_ended`]).
    end_awaited: Mutex<Option<Duration>>,
}

impl<'a> StatusMirror<'a> {
    /// `rescan` is how long after a run ended its next scan is due (see
    /// [`rescan_after`]): a terminal status carries `nextScanTime`.
    ///
    /// [`rescan_after`]: crate::kubernetes::controller::fleet::spread::rescan_after
    pub fn new(
        api: Api<AssetScan>,
        obj: &'a AssetScan,
        recorder: &'a Recorder,
        metrics: &'a Metrics,
        rescan: Option<Duration>,
    ) -> StatusMirror<'a> {
        let events = RunEvents::new(obj, recorder, metrics);
        StatusMirror {
            obj,
            plan: StatusPlan::new(obj, rescan),
            reports: ReportRecorder::new(api.clone().into_client(), obj, metrics),
            writer: StatusWriter::new(api, obj, events),
            events,
            progress_every: Duration::ZERO,
            claimed: AtomicBool::new(false),
            grace_to_write_end: Duration::ZERO,
            end_awaited: Mutex::new(None),
        }
    }

    /// Tells `cache` of every status this mirror writes.
    pub fn remembered_in(mut self, cache: &'a WatchCache) -> Self {
        self.writer = self.writer.remembered_in(cache);
        self
    }

    /// Leaves the end of a run another executor ended to it for `grace`
    /// after the end (the lock's ttl; default: none).
    pub fn grace_to_write_end(mut self, grace: Duration) -> Self {
        self.grace_to_write_end = grace;
        self
    }

    /// How long the end of a run another executor ended is left to it: look
    /// again then (its write, when it comes, triggers a reconcile sooner).
    pub(crate) fn end_awaited_for(&self) -> Option<Duration> {
        *self.end_awaited.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes a step between the claim and the end only once `every` has
    /// passed since the last write (default: every step).
    pub fn progress_every(mut self, every: Duration) -> Self {
        self.progress_every = every;
        self
    }

    /// Bounds the reports by `reports`, and announces the runs `events`
    /// asks for (default: reports of any size, every run's end).
    pub fn records(mut self, reports: &ReportsSection, events: &EventsSection) -> Self {
        self.reports = self.reports.max_bytes(reports.max_bytes);
        self.events = self.events.scan_complete(events.scan_complete);
        self
    }

    /// The run's Events and metrics.
    pub(crate) fn events(&self) -> &RunEvents<'a> {
        &self.events
    }

    /// Whether this reconcile recorded a claim: only then did a run start
    /// (or resume), and spend a start of the replica's start bound.
    pub(crate) fn claimed(&self) -> bool {
        self.claimed.load(Ordering::Relaxed)
    }

    /// Whether the status as last written or read records the end of
    /// `ticket`'s run, which ended, with its report: the end's work (the
    /// report, the status write, the Event) is done.
    fn end_recorded(&self, ticket: &Ticket) -> bool {
        let report = report_name(self.obj, &ticket.run);
        self.current().is_some_and(|s| {
            s.run.as_deref() == Some(ticket.run.as_str())
                && s.phase == Some(ticket.status)
                && fence_of(&s) == Some(ticket.fence())
                && s.latest_report.as_deref() == Some(report.as_str())
        })
    }

    /// Whether the status as last written or read shows the claim under
    /// which `ticket`'s run ended: the executor that ended it is the one
    /// that writes its end.
    fn claim_recorded(&self, ticket: &Ticket) -> bool {
        let token = i64::try_from(ticket.fencing_token).ok();
        self.current().is_some_and(|s| {
            s.run.as_deref() == Some(ticket.run.as_str()) && s.fencing_token == token
        })
    }

    /// The status as last written or read.
    fn current(&self) -> Option<AssetScanStatus> {
        self.writer.stored().status
    }

    /// Writes why no run goes on into the status. Returns whether the API
    /// server holds it.
    pub(crate) async fn halt(&self, halt: &Halt) -> bool {
        // On top of what this run last wrote, not of the object as it was
        // read at the start: that status is older, and writing it back would
        // go behind the fence (and be refused).
        let generation = self.obj.metadata.generation;
        let status = halt.status(self.current(), generation, Timestamp::now());
        self.writer.write(status).await
    }

    /// Writes the shard label's condition ([`shard_label_condition`]) on
    /// top of the status, when that changes it: the label is the object's,
    /// not the run's, so it is checked after each reconcile, and costs a
    /// write only when the label turns invalid or valid again.
    ///
    /// Whether the condition is shown is read from the object as the
    /// reconcile found it: a run's writes keep the conditions they found and
    /// never add this one, so a valid label whose object did not show it
    /// costs no copy of the status.
    pub(crate) async fn shard_label(&self, invalid: Option<InvalidShardLabel<'_>>) {
        let shown = self.obj.status.as_ref().is_some_and(|s| {
            ConditionType::ShardLabelInvalid
                .find(&s.conditions)
                .is_some()
        });
        if invalid.is_none() && !shown {
            return;
        }
        let mut status = self.current().unwrap_or_default();
        shard_label_condition(&mut status, invalid, Timestamp::now());
        self.writer.write(status).await;
    }

    /// Writes the channel policy's condition ([`channel_condition`]) on top
    /// of the status when it changes, with a Warning Event when a refusal
    /// is new or says something new: like the shard label, it is the
    /// object's (its namespace and spec), so it is checked after each
    /// reconcile and costs a write only when it changes.
    pub(crate) async fn channels(&self, refused: &Refused) {
        let shown = (self.obj.status.as_ref())
            .and_then(|s| ConditionType::ChannelRefused.find(&s.conditions))
            .map(|c| c.message.clone());
        let message = (!refused.0.is_empty()).then(|| bounded(&refused.message()));
        if shown == message {
            return;
        }
        let mut status = self.current().unwrap_or_default();
        channel_condition(&mut status, refused, Timestamp::now());
        if self.writer.write(status).await
            && let Some(message) = &message
        {
            self.events.channel_refused(message).await;
        }
    }

    /// Writes the deferred rescan's condition ([`rescan_condition`]) on top
    /// of the status when it changes, with a Normal `RescanDeferred` Event
    /// when the write that starts saying it (or a new start time) lands:
    /// one write and one Event per deferral, however often the object is
    /// reconciled while it waits. Only for a reconcile that starts no run:
    /// a run's claim removes the condition itself, in the same write.
    ///
    /// What is shown is read from the status as last written or read, so
    /// that a write of this reconcile (a missing report) is not undone.
    pub(crate) async fn rescan_deferred(&self, deferred: Option<&DeferredRescan>) {
        let current = self.current();
        let shown = (current.as_ref())
            .and_then(|s| ConditionType::RescanPending.find(&s.conditions))
            .map(|c| c.message.clone());
        let message = deferred.map(|d| bounded(&d.message()));
        if shown == message {
            return;
        }
        let mut status = current.unwrap_or_default();
        rescan_condition(&mut status, deferred, Timestamp::now());
        if self.writer.write(status).await
            && let Some(message) = &message
        {
            self.events.rescan_deferred(message).await;
        }
    }

    /// Mirrors a step of the run: its end and a confirmed high risk always
    /// (the gauge of high risks waiting for their notification reads the
    /// status), a step in between only when progress is due (a fast run's
    /// steps are not written one by one).
    async fn follow(&self, ticket: &Ticket) {
        let due = self
            .writer
            .written_at()
            .is_none_or(|at| at.elapsed() >= self.progress_every);
        let confirmed = ticket.status.alert() == Some(Alert::Confirmed);
        if ticket.status.is_terminal() || confirmed || due {
            self.mirror(ticket).await;
        }
    }

    /// Mirrors `ticket` now, with an Event when the phase or the run moved:
    /// where a run stops short of its end (deferred, its lock lost, shut
    /// down), the status shows where it stands; a run that ended gets its
    /// report, named in the same write. Returns whether the API server
    /// holds the status.
    pub async fn mirror(&self, ticket: &Ticket) -> bool {
        if ticket.status.is_terminal() && self.end_awaited_for().is_some() {
            return false;
        }
        if ticket.status.is_terminal() && self.end_recorded(ticket) {
            return true;
        }
        let Planned { mut status, news } = self.plan.mirror(ticket, self.current().as_ref());
        if ticket.status.is_terminal() {
            self.reports.record(ticket, &mut status).await;
        }
        let written = self.writer.write(status).await;
        if written && news {
            self.events.announce(ticket).await;
        }
        written
    }

    /// Records a claim: the zombie-write defence's step outside Redis (see
    /// `docs/design/reconcile.md`, "Recording a claim").
    ///
    /// One merge patch, conditional on the resourceVersion of the object as
    /// read before the acquire (the read whose status gave the token floor),
    /// and never retried after a refresh. Two claims of one token can then
    /// never both be recorded: each needs the object unchanged since a read
    /// whose token was lower, and the first one recorded changes it. Redis
    /// may hand a number out again after it lost its data, but only a
    /// recorded claim makes provider calls or writes, so no two executors
    /// ever act under one token. For the same reason a claim is not recorded
    /// over a status that, since the read, recorded this run's end or a
    /// later run. A failure of any kind (the object changed, the fence, the
    /// API unreachable, an answer that never came) stops the run before any
    /// provider call; the next reconcile claims again, from a fresh read,
    /// under a higher token. A refused claim costs a token, never the truth.
    async fn write_claim(&self, ticket: &Ticket) -> bool {
        let name = self.obj.metadata.name.as_deref().unwrap_or_default();
        let claim = match self.plan.claim(ticket, &self.writer.stored()) {
            Ok(claim) => claim,
            Err(why @ ClaimRefusal::NoResourceVersion) => {
                warn!(object = name, %why, "claim not recorded");
                return false;
            }
            Err(why) => {
                debug!(object = name, run = %ticket.run, token = ticket.fencing_token, %why, "claim not recorded");
                return false;
            }
        };
        let recorded = self.writer.claim(&claim).await;
        if recorded && claim.news {
            self.events.announce(ticket).await;
        }
        recorded
    }
}

impl Observer for StatusMirror<'_> {
    async fn on_ticket(&self, ticket: &Ticket) {
        self.events.time_to_notification(ticket);
        self.follow(ticket).await;
    }

    /// Another executor ended the run after this reconcile read the
    /// object, and writes its end (report, status, Event) now, or did. One
    /// read of the status as stored now: when it records the end, this
    /// reconcile does none of the end's work again (no report, no status
    /// write, no Event, no second count of the notification's latency).
    /// When it shows that executor's claim instead, the end is left to it
    /// for the lock's ttl after the end, and written over a fresh read only
    /// then (that executor died before writing it). Otherwise it is
    /// written now.
    async fn on_found_ended(&self, ticket: &Ticket) {
        self.writer.refresh().await;
        if self.end_recorded(ticket) {
            return;
        }
        let age = Duration::from_millis(now_ms().saturating_sub(ticket.updated_at));
        if self.claim_recorded(ticket) && age < self.grace_to_write_end {
            *self.end_awaited.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(self.grace_to_write_end - age);
            return;
        }
        self.follow(ticket).await;
    }

    /// Fence step 2: the claim is recorded in the status before any
    /// provider call, so that the status holds every token that acts: after
    /// Redis loses data, the next acquisition takes it as floor. A claim the
    /// API server does not hold (see [`StatusMirror::write_claim`]) stops
    /// the run.
    async fn record_claim(&self, ticket: &Ticket) -> ClaimRecord {
        let recorded = self.write_claim(ticket).await;
        self.claimed.fetch_or(recorded, Ordering::Relaxed);
        if recorded {
            ClaimRecord::Recorded
        } else {
            ClaimRecord::Refused
        }
    }

    fn on_step_timed(&self, step: Step, elapsed: Duration, ok: bool) {
        self.events.step_timed(step, elapsed, ok);
    }

    async fn on_step_error(&self, ticket: &Ticket, step: Step, error: &StepError) {
        self.events.step_failed(ticket, step, error).await;
    }
}
