//! Mirrors a run's ticket into the AssetScan's status, and reports it as
//! Events.
//!
//! Status writes are fenced like ticket writes: the CRD's CEL rules make the
//! API server reject a status whose (fencingToken, revision) or
//! observedGeneration is lower than the stored one, so a stale executor that
//! slipped one Redis write in before a takeover still cannot overwrite the
//! newer status. Such a rejection is expected and counted, not retried.
//!
//! For the rules to see this executor's values, every write carries them
//! (token, revision, run, ticket id, phase, observed generation) even when
//! they did not change since this executor last looked, and every write is
//! conditional on the resourceVersion it was computed against: a merge patch
//! computed against an outdated copy would otherwise mix this executor's
//! changes into a newer status.

use super::cache::WatchCache;
use super::report;
use super::status::status_from_ticket;
use crate::backoff::Backoff;
use crate::crd::{AssetScan, AssetScanReport, AssetScanStatus, is_fence_refusal};
use crate::pipeline::{Observer, StepError};
use crate::telemetry::{Metrics, StepLabels, Throttle};
use assetscan_domain::ticket::{Step, Ticket};
use assetscan_domain::{RESCAN_ANNOTATION, run_order};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// Field manager of the operator's writes.
pub const FIELD_MANAGER: &str = "assetscan-operator";

/// Attempts of one status write on transient API errors (409 from a
/// conflicting writer, 429, 5xx, transport errors), [`STATUS_WRITE_BACKOFF`]
/// apart: 3 to 5 s in all before the write is given up (the next
/// transition, or the end of the run, writes the whole status again).
const STATUS_WRITE_ATTEMPTS: u32 = 7;

/// One warning a minute per process for Events that could not be
/// published; the rest are counted.
static EVENT_WARNINGS: Throttle = Throttle::new(Duration::from_secs(60));
/// From 100 ms, doubling, up to 2 s.
const STATUS_WRITE_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_secs(2));

pub struct StatusMirror<'a> {
    pub api: Api<AssetScan>,
    pub obj: &'a AssetScan,
    pub recorder: &'a Recorder,
    pub metrics: &'a Metrics,
    /// Rescan interval: a terminal status carries `nextScanTime`.
    pub rescan: Option<Duration>,
    /// The status as last written (or as read with the object), and the
    /// object's resourceVersion then.
    last: Mutex<Stored>,
    /// `(fencingToken, revision)` of the last status refused as stale, so
    /// that one stale status is counted and reported once.
    refused: Mutex<Option<Option<(i64, i64)>>>,
    /// A step in between a run's claim and its end is written only once
    /// this long has passed since the last write (see
    /// [`crate::config::StatusSection::progress_every`]).
    progress_every: Duration,
    /// When this mirror last wrote the status.
    written_at: Mutex<Option<Instant>>,
    /// Told of every status write, so that the controller does not decide
    /// from a cached copy older than it.
    cache: Option<&'a WatchCache>,
}

/// What this executor last knew to be stored.
#[derive(Clone, Default)]
struct Stored {
    resource_version: Option<String>,
    status: Option<AssetScanStatus>,
}

/// Status fields every write carries, changed or not, so that the CRD's
/// fence rules compare this executor's values with the stored ones.
const FENCE_FIELDS: [&str; 6] = [
    "fencingToken",
    "revision",
    "run",
    "ticketId",
    "phase",
    "observedGeneration",
];

/// `(fencingToken, revision)` of a status, if it carries them.
fn fence_of(status: &AssetScanStatus) -> Option<(i64, i64)> {
    Some((status.fencing_token?, status.revision?))
}

impl<'a> StatusMirror<'a> {
    pub fn new(
        api: Api<AssetScan>,
        obj: &'a AssetScan,
        recorder: &'a Recorder,
        metrics: &'a Metrics,
        rescan: Option<Duration>,
    ) -> StatusMirror<'a> {
        StatusMirror {
            api,
            obj,
            recorder,
            metrics,
            rescan,
            last: Mutex::new(Stored {
                resource_version: obj.metadata.resource_version.clone(),
                status: obj.status.clone(),
            }),
            refused: Mutex::new(None),
            progress_every: Duration::ZERO,
            written_at: Mutex::new(None),
            cache: None,
        }
    }

    /// Tells `cache` of every status this mirror writes.
    pub fn remembered_in(mut self, cache: &'a WatchCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Writes a step between the claim and the end only once `every` has
    /// passed since the last write (default: every step).
    pub fn progress_every(mut self, every: Duration) -> Self {
        self.progress_every = every;
        self
    }

    /// Whether a step between the claim and the end is written now.
    fn progress_due(&self) -> bool {
        let written_at = *self.written_at.lock().unwrap_or_else(|e| e.into_inner());
        written_at.is_none_or(|at| at.elapsed() >= self.progress_every)
    }

    fn stored(&self) -> Stored {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn last(&self) -> Option<AssetScanStatus> {
        self.stored().status
    }

    /// The status as last written or read: the base for a status that only
    /// changes conditions (a stall), so it never goes behind what is stored.
    pub fn current(&self) -> Option<AssetScanStatus> {
        self.last()
    }

    /// `object` as this mirror's own write left it.
    fn stored_now(&self, object: AssetScan) {
        *self.written_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if let Some(cache) = self.cache {
            cache.wrote(&object);
        }
        self.remember(object);
    }

    fn remember(&self, object: AssetScan) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Stored {
            resource_version: object.metadata.resource_version,
            status: object.status,
        };
    }

    /// Writes `status` unless it equals the stored one. Returns whether the
    /// API server holds it now.
    ///
    /// A status behind the one known to be stored (lower
    /// `(fencingToken, revision)`) is not sent at all: the CRD's rule would
    /// refuse it, and sending it again after a refusal is a retry storm.
    pub async fn write(&self, status: AssetScanStatus) -> bool {
        let name = self.obj.metadata.name.as_deref().unwrap_or_default();
        for attempt in 1..=STATUS_WRITE_ATTEMPTS {
            let Stored {
                resource_version,
                status: previous,
            } = self.stored();
            if previous.as_ref() == Some(&status) {
                return true;
            }
            if let (Some(stored), Some(mine)) =
                (previous.as_ref().and_then(fence_of), fence_of(&status))
                && mine < stored
            {
                let why = format!(
                    "status with token {}, revision {} not written: token {}, revision {} is stored",
                    mine.0, mine.1, stored.0, stored.1
                );
                self.refused(fence_of(&status), why).await;
                return false;
            }
            let patch = status_patch(previous.as_ref(), &status, resource_version.as_deref());
            match self
                .api
                .patch_status(
                    name,
                    &PatchParams::apply(FIELD_MANAGER),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(stored) => {
                    self.stored_now(stored);
                    return true;
                }
                Err(kube::Error::Api(status_err))
                    if status_err.code == 422 && is_fence_refusal(&status_err) =>
                {
                    // The fence: a newer executor's status is stored.
                    self.refused(fence_of(&status), status_err.message).await;
                    self.refresh().await;
                    return false;
                }
                Err(kube::Error::Api(status_err)) if status_err.code == 422 => {
                    // Not the fence: the status itself is invalid. Sending it
                    // again cannot help; say so on the object.
                    warn!(object = name, message = %status_err.message, "status write rejected as invalid");
                    self.publish(
                        EventType::Warning,
                        "InvalidStatus",
                        "MirrorStatus",
                        format!("the status could not be written: {}", status_err.message),
                    )
                    .await;
                    self.refresh().await;
                    return false;
                }
                Err(kube::Error::Api(status_err)) if status_err.code == 404 => return false,
                Err(err) => {
                    warn!(object = name, attempt, error = %err, "status write failed");
                    if attempt == STATUS_WRITE_ATTEMPTS {
                        break;
                    }
                    tokio::time::sleep(STATUS_WRITE_BACKOFF.after(attempt)).await;
                    self.refresh().await;
                }
            }
        }
        false
    }

    /// Counts and reports a stale status (refused by the API server's fence,
    /// or known to be behind the stored one), once per status.
    async fn refused(&self, fence: Option<(i64, i64)>, why: String) {
        {
            let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            if *refused == Some(fence) {
                return;
            }
            *refused = Some(fence);
        }
        let name = self.obj.metadata.name.as_deref().unwrap_or_default();
        self.metrics.stale_writes_rejected.inc();
        warn!(object = name, %why, "stale status write refused");
        self.publish(
            EventType::Warning,
            "StaleStatusRejected",
            "MirrorStatus",
            format!("a status write from an older executor was refused: {why}"),
        )
        .await;
    }

    /// Re-reads the stored status, so the next patch is computed against it.
    async fn refresh(&self) {
        let name = self.obj.metadata.name.as_deref().unwrap_or_default();
        if let Ok(current) = self.api.get_status(name).await {
            self.remember(current);
        }
    }

    pub async fn publish(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        let reference = kube::Resource::object_ref(self.obj, &());
        if let Err(err) = self.recorder.publish(&event, &reference).await {
            // The run does not depend on its Events, but an operator whose
            // Events all fail (RBAC, quota, an API outage) should be seen.
            self.metrics.events_unpublished.inc();
            match EVENT_WARNINGS.admit(Instant::now()) {
                Some(held_back) => warn!(
                    error = %err, reason, held_back,
                    "event not published (more failures in the next minute are counted in assetscan_events_unpublished_total, not logged)"
                ),
                None => debug!(error = %err, reason, "event not published"),
            }
        }
    }
}

impl StatusMirror<'_> {
    /// The status mirroring `ticket`, on top of what is stored.
    fn status_for(&self, ticket: &Ticket, previous: Option<&AssetScanStatus>) -> AssetScanStatus {
        // Conditions change when the ticket did, and the next scan is due an
        // interval after the run ended: both from the ticket, not the clock,
        // so mirroring the same ticket again (a later reconcile, another
        // replica) gives the same status and writes nothing.
        let changed_at = ticket_time(ticket);
        let next_scan = self
            .rescan
            .filter(|_| ticket.status.is_terminal())
            .and_then(|every| SignedDuration::try_from(every).ok())
            .and_then(|every| changed_at.checked_add(every).ok());
        status_from_ticket(
            ticket,
            previous,
            self.obj.metadata.generation,
            changed_at,
            next_scan,
        )
    }

    /// Writes the status mirroring `ticket`, with an Event when the phase or
    /// the run changed. Returns whether the API server holds it.
    /// Mirrors a step of the run: its end always, a step in between only
    /// when progress is due (a fast run's steps are not written one by one).
    async fn follow(&self, ticket: &Ticket) {
        if ticket.status.is_terminal() || self.progress_due() {
            self.mirror(ticket).await;
        }
    }

    /// Mirrors `ticket` now: where a run stops short of its end (deferred,
    /// its lock lost, shut down), the status shows where it stands.
    pub async fn mirror(&self, ticket: &Ticket) -> bool {
        let previous = self.last();
        let mut status = self.status_for(ticket, previous.as_ref());
        if ticket.status.is_terminal() {
            self.record_report(ticket, &mut status).await;
        }
        let news = is_news(previous.as_ref(), &status, ticket);
        let written = self.write(status).await;
        if written && news {
            self.announce(ticket).await;
        }
        written
    }

    /// Writes the report of `ticket`'s run, which ended, unless `status`
    /// names it already, deletes the reports beyond the object's limit,
    /// and records both in `status` (written by the caller, in the same
    /// write as the run's end). A report that could not be written leaves
    /// `status` as it was: the next reconcile of the finished object
    /// writes it.
    async fn record_report(&self, ticket: &Ticket, status: &mut AssetScanStatus) {
        let name = report::report_name(self.obj, &ticket.run);
        if status.latest_report.as_deref() == Some(name.as_str()) {
            return;
        }
        let namespace = self.obj.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<AssetScanReport> = Api::namespaced(self.api.clone().into_client(), namespace);
        let object = self.obj.metadata.name.as_deref().unwrap_or_default();
        if let Err(err) = report::create(&api, &report::build(self.obj, ticket)).await {
            self.metrics.failed("ReportWrite");
            warn!(object, report = %name, error = %err, "report not written; written at the next reconcile");
            return;
        }
        status.reports = report::prune(&api, self.obj, &name, &status.reports).await;
        status.latest_report = Some(name);
    }

    /// Records a claim: the zombie-write defence's step outside Redis (see
    /// `docs/design.md`, "Recording a claim").
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
    async fn record_claim(&self, ticket: &Ticket) -> bool {
        let name = self.obj.metadata.name.as_deref().unwrap_or_default();
        let Stored {
            resource_version,
            status: read,
        } = self.stored();
        if let Some(why) = claim_refusal(read.as_ref(), ticket) {
            debug!(object = name, run = %ticket.run, token = ticket.fencing_token, %why, "claim not recorded");
            return false;
        }
        let Some(resource_version) = resource_version else {
            // Without a precondition the write could land on any status.
            warn!(
                object = name,
                "claim not recorded: the object as read has no resourceVersion"
            );
            return false;
        };
        let mut status = self.status_for(ticket, read.as_ref());
        if read.as_ref().and_then(|r| r.run.as_deref()) != Some(ticket.run.as_str()) {
            // A new run: it handles the rescan request the object carries
            // as read (a request made later changes the object, and this
            // write, conditional on it, is refused).
            status.last_handled_rescan = self
                .obj
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RESCAN_ANNOTATION))
                .cloned();
        }
        let news = is_news(read.as_ref(), &status, ticket);
        let patch = status_patch(read.as_ref(), &status, Some(&resource_version));
        let result = self
            .api
            .patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(&patch),
            )
            .await;
        match result {
            Ok(stored) => {
                self.stored_now(stored);
                if news {
                    self.announce(ticket).await;
                }
                true
            }
            Err(kube::Error::Api(err)) if err.code == 422 && is_fence_refusal(&err) => {
                self.refused(fence_of(&status), err.message).await;
                false
            }
            Err(kube::Error::Api(err)) if err.code == 409 => {
                debug!(object = name, run = %ticket.run, "claim not recorded: the object changed since it was read");
                false
            }
            Err(err) => {
                warn!(object = name, run = %ticket.run, error = %err, "claim not recorded");
                false
            }
        }
    }

    /// The Event (and notification counts) for a status that moved.
    async fn announce(&self, ticket: &Ticket) {
        if ticket.status == assetscan_domain::ticket::Status::Notified {
            let receipts = ticket
                .facts
                .notification
                .iter()
                .flat_map(|n| n.receipt.keys());
            for channel in receipts {
                self.metrics
                    .notifications_sent
                    .get_or_create(&crate::telemetry::ChannelLabels {
                        channel: channel.clone(),
                    })
                    .inc();
            }
        }
        // One Event per run, at its end: what a person acts on is the
        // verdict or the failure, not each step (the status shows those).
        let high_risk = ticket.facts.risk.as_ref().is_some_and(|r| r.high_risk);
        let (type_, reason) = match ticket.status {
            assetscan_domain::ticket::Status::Failed => (EventType::Warning, "ScanFailed"),
            assetscan_domain::ticket::Status::Finished if high_risk => {
                (EventType::Warning, "HighRiskFound")
            }
            assetscan_domain::ticket::Status::Finished => (EventType::Normal, "ScanComplete"),
            _ => return,
        };
        let note = format!(
            "run {} is {} (token {}, revision {})",
            ticket.run, ticket.status, ticket.fencing_token, ticket.revision
        );
        // kube's Recorder folds events with the same type, reason and
        // action into one series and keeps the first note: the phase as
        // the action keeps each kind of end's event (and note) apart.
        self.publish(type_, reason, ticket.status.as_str(), note)
            .await;
    }
}

/// Whether writing `status` over `previous` moves the phase or the run.
fn is_news(previous: Option<&AssetScanStatus>, status: &AssetScanStatus, ticket: &Ticket) -> bool {
    let moved = previous.and_then(|p| p.phase) != status.phase;
    let same_run = previous.and_then(|p| p.run.as_deref()) == Some(ticket.run.as_str());
    moved || !same_run
}

/// Why a claim of `ticket` must not be recorded over `read` (the status as
/// read before the acquire), if it must not.
fn claim_refusal(read: Option<&AssetScanStatus>, ticket: &Ticket) -> Option<String> {
    let read = read?;
    if let Some(stored) = read.fencing_token
        && u64::try_from(stored).is_ok_and(|stored| stored >= ticket.fencing_token)
    {
        return Some(format!(
            "token {} is not above the recorded token {stored}",
            ticket.fencing_token
        ));
    }
    let recorded = read.run.as_deref()?;
    if recorded == ticket.run && read.phase.is_some_and(|phase| phase.is_terminal()) {
        return Some(format!("run {recorded} has ended"));
    }
    match (run_order(recorded), run_order(&ticket.run)) {
        (Some((owner, later)), Some((mine, claimed))) if owner == mine && later > claimed => {
            Some(format!("the status records a later run, {recorded}"))
        }
        _ => None,
    }
}

impl Observer for StatusMirror<'_> {
    async fn on_ticket(&self, ticket: &Ticket) {
        self.follow(ticket).await;
    }

    /// The claim is recorded in the status before any provider call, so that
    /// the status holds every token that acts: after Redis loses data, the
    /// next acquisition takes it as floor. A claim the API server does not
    /// hold (see [`StatusMirror::record_claim`]) stops the run.
    async fn on_claimed(&self, ticket: &Ticket) -> bool {
        self.record_claim(ticket).await
    }

    fn on_step_timed(&self, step: Step, elapsed: Duration, ok: bool) {
        let labels = StepLabels {
            step: step.as_str().to_owned(),
        };
        self.metrics
            .step_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if !ok {
            self.metrics.step_errors.get_or_create(&labels).inc();
        }
    }

    async fn on_step_error(&self, ticket: &Ticket, step: Step, error: &StepError) {
        let note = format!(
            "run {}: {step} attempt {} failed: {}",
            ticket.run,
            ticket.attempts_of(step) + 1,
            error.message
        );
        self.publish(EventType::Warning, "StepFailed", step.as_str(), note)
            .await;
    }
}

/// When the ticket was last written (its `updated_at`), or now if that is
/// not a usable time.
pub fn ticket_time(ticket: &Ticket) -> Timestamp {
    i64::try_from(ticket.updated_at)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or_else(Timestamp::now)
}

/// The merge patch writing `status` over `previous`: what changed, the fence
/// fields always, and `previous`'s resourceVersion as precondition.
fn status_patch(
    previous: Option<&AssetScanStatus>,
    status: &AssetScanStatus,
    resource_version: Option<&str>,
) -> Value {
    let new = serde_json::to_value(status).unwrap_or(Value::Null);
    let mut body = merge_patch(&serde_json::to_value(previous).unwrap_or(Value::Null), &new);
    if let (Value::Object(body), Value::Object(new)) = (&mut body, &new) {
        for field in FENCE_FIELDS {
            if let Some(value) = new.get(field) {
                body.insert(field.to_owned(), value.clone());
            }
        }
    }
    match resource_version {
        Some(rv) => serde_json::json!({"metadata": {"resourceVersion": rv}, "status": body}),
        None => serde_json::json!({"status": body}),
    }
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed and
/// new members as in `to`, removed members as `null`, objects recursively.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = serde_json::Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(prev) if prev == value => {}
                    Some(prev) => {
                        patch.insert(key.clone(), merge_patch(prev, value));
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys().filter(|k| !new.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::merge_patch;
    use assetscan_domain::ticket::{Status, Ticket};
    use serde_json::json;

    fn claimed(run: &str, token: u64) -> Ticket {
        Ticket {
            fencing_token: token,
            revision: 1,
            ..Ticket::new("web-01", run, 0)
        }
    }

    fn recorded(run: &str, token: i64, phase: Status) -> crate::crd::AssetScanStatus {
        crate::crd::AssetScanStatus {
            run: Some(run.into()),
            fencing_token: Some(token),
            revision: Some(3),
            phase: Some(phase),
            ..Default::default()
        }
    }

    #[test]
    fn a_claim_is_recorded_only_above_the_read_token_and_never_behind_the_run() {
        use super::claim_refusal;
        let run = "1234abcd-g2-s0";
        // Nothing recorded yet, or an earlier run or token: recorded.
        assert_eq!(claim_refusal(None, &claimed(run, 1)), None);
        let earlier = recorded("1234abcd-g1-s4", 5, Status::Finished);
        assert_eq!(claim_refusal(Some(&earlier), &claimed(run, 6)), None);
        let same_open = recorded(run, 5, Status::VulnCheckDone);
        assert_eq!(claim_refusal(Some(&same_open), &claimed(run, 6)), None);
        // A token the status already holds (or a lower one): refused.
        assert!(claim_refusal(Some(&same_open), &claimed(run, 5)).is_some());
        assert!(claim_refusal(Some(&same_open), &claimed(run, 2)).is_some());
        // This run's recorded end is never re-opened, whatever the token.
        let ended = recorded(run, 5, Status::Finished);
        assert!(claim_refusal(Some(&ended), &claimed(run, 9)).is_some());
        // A later run (generation, then scan) of the same owner: refused.
        let later = recorded("1234abcd-g3-s0", 5, Status::Init);
        assert!(claim_refusal(Some(&later), &claimed(run, 9)).is_some());
        let next_scan = recorded("1234abcd-g2-s1", 5, Status::Init);
        assert!(claim_refusal(Some(&next_scan), &claimed(run, 9)).is_some());
        // Another owner's run (a recreated object) does not order ours.
        let other = recorded("ffff0000-g9-s9", 5, Status::Finished);
        assert_eq!(claim_refusal(Some(&other), &claimed(run, 6)), None);
    }

    #[test]
    fn a_status_patch_carries_the_fence_and_its_precondition() {
        use crate::crd::AssetScanStatus;
        let old = AssetScanStatus {
            fencing_token: Some(5),
            revision: Some(3),
            run: Some("r".into()),
            high_risk: Some(false),
            ..Default::default()
        };
        let new = AssetScanStatus {
            high_risk: Some(true),
            ..old.clone()
        };
        let patch = super::status_patch(Some(&old), &new, Some("42"));
        assert_eq!(
            patch,
            json!({
                "metadata": {"resourceVersion": "42"},
                "status": {"highRisk": true, "fencingToken": 5, "revision": 3, "run": "r"}
            })
        );
    }

    #[test]
    fn merge_patch_removes_what_is_gone_at_every_depth() {
        let from =
            json!({"a": 1, "n": {"state": "sent", "sentAt": "t"}, "gone": [1], "same": true});
        let to = json!({"a": 2, "n": {"state": "sending"}, "same": true, "new": "x"});
        assert_eq!(
            merge_patch(&from, &to),
            json!({"a": 2, "n": {"state": "sending", "sentAt": null}, "gone": null, "new": "x"})
        );
        assert_eq!(merge_patch(&json!(null), &to), to);
    }
}
