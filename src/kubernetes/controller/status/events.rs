//! What a run tells outside its status: Events on the object, and the
//! metrics of its steps, notifications and refused writes.

use super::conditions::bounded;
use crate::kubernetes::crd::AssetScan;
use crate::pipeline::StepError;
use crate::telemetry::{ChannelLabels, Metrics, StepLabels, Throttle};
use assetscan_domain::ticket::{Status, Step, Ticket};
use kube::runtime::events::{Event, EventType, Recorder};
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// `namespace/name` of `obj`, as the log lines name it.
fn object_key(obj: &AssetScan) -> String {
    let meta = &obj.metadata;
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// One warning a minute per process for Events that could not be
/// published; the rest are counted.
static EVENT_WARNINGS: Throttle = Throttle::new(Duration::from_secs(60));

/// The Events and metrics of one object's reconcile.
#[derive(Clone, Copy)]
pub struct RunEvents<'a> {
    obj: &'a AssetScan,
    recorder: &'a Recorder,
    metrics: &'a Metrics,
    /// Whether a run that ends without a high risk gets an Event
    /// ([`crate::kubernetes::controller::settings::EventsSection::scan_complete`]).
    scan_complete: bool,
}

impl<'a> RunEvents<'a> {
    pub fn new(obj: &'a AssetScan, recorder: &'a Recorder, metrics: &'a Metrics) -> RunEvents<'a> {
        RunEvents {
            obj,
            recorder,
            metrics,
            scan_complete: true,
        }
    }

    /// Whether runs that end without a high risk get an Event too.
    pub fn scan_complete(mut self, announce: bool) -> Self {
        self.scan_complete = announce;
        self
    }

    /// `namespace/name`: many teams' objects share one log.
    fn object(&self) -> String {
        object_key(self.obj)
    }

    /// Publishes an Event on the object; one the API server refuses is
    /// counted, never fatal.
    async fn publish(&self, type_: EventType, reason: &str, action: &str, note: String) {
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

    /// The Event (and notification counts) for a status that moved.
    pub async fn announce(&self, ticket: &Ticket) {
        if ticket.status == Status::Notified {
            let receipts = ticket
                .facts
                .notification
                .iter()
                .flat_map(|n| n.receipt.keys());
            for channel in receipts {
                self.metrics
                    .notifications_sent
                    .get_or_create(&ChannelLabels {
                        channel: channel.clone(),
                    })
                    .inc();
            }
        }
        // At most one Event per run, at its end: what a person acts on is
        // a high risk or a failure, not each step, nor (unless asked for)
        // a clean end: the status and the report show those.
        let high_risk = ticket.facts.risk.as_ref().is_some_and(|r| r.high_risk);
        let (type_, reason) = match ticket.status {
            Status::Failed => (EventType::Warning, "ScanFailed"),
            Status::Finished if high_risk => (EventType::Warning, "HighRiskFound"),
            Status::Finished if self.scan_complete => (EventType::Normal, "ScanComplete"),
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

    /// Channels the spec names that its namespace may not use: nothing is
    /// sent on them (`channelAccess`).
    pub async fn channel_refused(&self, message: &str) {
        warn!(object = %self.object(), why = %message, "channel refused");
        self.publish(
            EventType::Warning,
            "ChannelNotAllowed",
            "Notify",
            message.to_owned(),
        )
        .await;
    }

    /// A rescan the annotation asks for waits for the minimum interval:
    /// said once, when the status starts saying so (the caller publishes it
    /// only on that write), so that the person who asked sees when the run
    /// starts without one Event per requeue. Normal: the operator does as
    /// configured. Deferrals repeated within kube's event cache (minutes)
    /// fold into one series with the first note; the condition has the
    /// current start.
    pub async fn rescan_deferred(&self, message: &str) {
        debug!(object = %self.object(), why = %message, "rescan deferred");
        self.publish(
            EventType::Normal,
            "RescanDeferred",
            "Rescan",
            message.to_owned(),
        )
        .await;
    }

    /// A ticket write of this executor was refused: another executor took
    /// the run over, and this one stopped.
    pub async fn superseded(&self, caller: u64, valid: u64) {
        self.metrics.stale_writes_rejected.inc();
        self.publish(
            EventType::Warning,
            "StaleWriteRejected",
            "Scan",
            format!("write with token {caller} rejected: token {valid} owns the run; this executor stopped"),
        )
        .await;
    }

    /// A stale status (refused by the API server's fence, or known to be
    /// behind the stored one) was not written.
    pub async fn stale_status(&self, why: &str) {
        self.metrics.stale_writes_rejected.inc();
        warn!(object = %self.object(), %why, "stale status write refused");
        self.publish(
            EventType::Warning,
            "StaleStatusRejected",
            "MirrorStatus",
            format!("a status write from an older executor was refused: {why}"),
        )
        .await;
    }

    /// The API server refused a status as invalid, not by the fence:
    /// sending it again cannot help; say so on the object.
    pub async fn invalid_status(&self, message: &str) {
        warn!(object = %self.object(), why = %message, "status write rejected as invalid");
        self.publish(
            EventType::Warning,
            "InvalidStatus",
            "MirrorStatus",
            format!("the status could not be written: {message}"),
        )
        .await;
    }

    /// At an accepted `NOTIFIED` write: the time since the run's high risk
    /// was confirmed, per channel notified (once per run: the pipeline
    /// writes `NOTIFIED` once, and a takeover after it does not again).
    pub fn time_to_notification(&self, ticket: &Ticket) {
        let Some(ms) = ticket.detection_to_notification_ms() else {
            return;
        };
        let receipts = (ticket.facts.notification.iter()).flat_map(|n| n.receipt.keys());
        for channel in receipts {
            self.metrics.promise.notified(channel, ms);
        }
    }

    /// A reconcile failed (the first failure of a streak, or another
    /// reason than the last): said once on the object, so that `kubectl
    /// describe` shows it. The message is the error's, as the `Stalled`
    /// condition carries it (bounded; Redis targets are redacted).
    pub async fn reconcile_failed(&self, reason: &str, message: &str) {
        self.publish(
            EventType::Warning,
            "ReconcileFailed",
            reason,
            bounded(&format!("reconcile failed ({reason}): {message}")),
        )
        .await;
    }

    /// How long a provider call took, and whether it failed.
    pub fn step_timed(&self, step: Step, elapsed: Duration, ok: bool) {
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

    /// A step failed, and is retried or has failed the run.
    pub async fn step_failed(&self, ticket: &Ticket, step: Step, error: &StepError) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// What a JSON subscriber wrote, line by line.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_channel_is_logged_once_with_the_object_s_namespace() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let obj: AssetScan = serde_json::from_value(serde_json::json!({
            "apiVersion": "assetscan.io/v1alpha1", "kind": "AssetScan",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"assetId": "web-1", "target": {"inventoryRef": "web-1"}}
        }))
        .unwrap();
        // No API server: the Event is refused and counted; the log line is
        // what this test reads.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let recorder = Recorder::new(client, "test".into());
        let metrics = Metrics::new();
        let why = "channel secops refuses namespace team-a: it is not among team-b";
        RunEvents::new(&obj, &recorder, &metrics)
            .channel_refused(why)
            .await;
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("channel refused"))
            .unwrap_or_else(|| panic!("no line: {text}"));
        assert_eq!(line.matches("\"message\"").count(), 1, "{line}");
        let fields = serde_json::from_str::<serde_json::Value>(line).unwrap()["fields"].clone();
        assert_eq!(fields["message"], "channel refused");
        assert_eq!(fields["object"], "team-a/web");
        assert_eq!(fields["why"], why);
    }
}
