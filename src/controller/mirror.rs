//! Mirrors a run's ticket into the AssetScan's status, and reports it as
//! Events.
//!
//! Status writes are fenced like ticket writes: the CRD's CEL rule makes the
//! API server reject a status whose (fencingToken, revision) is lower than
//! the stored one, so a stale executor that slipped one Redis write in before
//! a takeover still cannot overwrite the newer status. Such a rejection is
//! expected and counted, not retried.

use crate::crd::{AssetScan, AssetScanStatus, status_from_ticket};
use crate::pipeline::{Observer, StepError};
use crate::telemetry::{Metrics, StepLabels};
use crate::ticket::{Step, Ticket};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use serde_json::Value;
use std::sync::Mutex;
use std::time::Duration;
use tracing::{debug, warn};

/// Field manager of the operator's writes.
pub const FIELD_MANAGER: &str = "assetscan-operator";

/// Attempts of one status write on transient API errors.
const STATUS_WRITE_ATTEMPTS: u32 = 4;

pub struct StatusMirror<'a> {
    pub api: Api<AssetScan>,
    pub obj: &'a AssetScan,
    pub recorder: &'a Recorder,
    pub metrics: &'a Metrics,
    /// Rescan interval: a terminal status carries `nextScanTime`.
    pub rescan: Option<Duration>,
    /// The status as last written (or as read with the object).
    pub last: Mutex<Option<AssetScanStatus>>,
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
            last: Mutex::new(obj.status.clone()),
        }
    }

    fn last(&self) -> Option<AssetScanStatus> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn remember(&self, status: Option<AssetScanStatus>) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = status;
    }

    /// Writes `status` unless it equals the stored one. Returns whether the
    /// API server holds it now.
    pub async fn write(&self, status: AssetScanStatus) -> bool {
        for attempt in 1..=STATUS_WRITE_ATTEMPTS {
            let previous = self.last();
            if previous.as_ref() == Some(&status) {
                return true;
            }
            let patch = serde_json::json!({
                "status": merge_patch(
                    &serde_json::to_value(&previous).unwrap_or(Value::Null),
                    &serde_json::to_value(&status).unwrap_or(Value::Null),
                )
            });
            let name = self.obj.metadata.name.as_deref().unwrap_or_default();
            match self
                .api
                .patch_status(name, &PatchParams::apply(FIELD_MANAGER), &Patch::Merge(&patch))
                .await
            {
                Ok(stored) => {
                    self.remember(stored.status);
                    return true;
                }
                Err(kube::Error::Api(status_err)) if status_err.code == 422 => {
                    // The fence: a newer executor's status is stored.
                    self.metrics.stale_writes_rejected.inc();
                    warn!(object = name, message = %status_err.message, "status write rejected by the fence");
                    self.publish(
                        EventType::Warning,
                        "StaleStatusRejected",
                        "MirrorStatus",
                        format!("a status write from an older executor was rejected: {}", status_err.message),
                    )
                    .await;
                    self.refresh().await;
                    return false;
                }
                Err(kube::Error::Api(status_err)) if status_err.code == 404 => return false,
                Err(err) => {
                    warn!(object = name, attempt, error = %err, "status write failed");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                    self.refresh().await;
                }
            }
        }
        false
    }

    /// Re-reads the stored status, so the next patch is computed against it.
    async fn refresh(&self) {
        let name = self.obj.metadata.name.as_deref().unwrap_or_default();
        if let Ok(current) = self.api.get_status(name).await {
            self.remember(current.status);
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
            debug!(error = %err, "event not published");
        }
    }
}

impl Observer for StatusMirror<'_> {
    async fn on_ticket(&self, ticket: &Ticket) {
        let previous = self.last();
        let now = Timestamp::now();
        let next_scan = self
            .rescan
            .filter(|_| ticket.status.is_terminal())
            .and_then(|every| SignedDuration::try_from(every).ok())
            .and_then(|every| now.checked_add(every).ok());
        let status = status_from_ticket(
            ticket,
            previous.as_ref(),
            self.obj.metadata.generation,
            now,
            next_scan,
        );
        let moved = previous.as_ref().and_then(|p| p.phase) != status.phase;
        let same_run = previous.as_ref().and_then(|p| p.run.as_deref()) == Some(ticket.run.as_str());
        if self.write(status).await && (moved || !same_run) {
            if ticket.status == crate::ticket::Status::Notified {
                let receipts = ticket.facts.notification.iter().flat_map(|n| n.receipt.keys());
                for channel in receipts {
                    self.metrics
                        .notifications_sent
                        .get_or_create(&crate::telemetry::ChannelLabels {
                            channel: channel.clone(),
                        })
                        .inc();
                }
            }
            let (type_, reason) = match ticket.status {
                crate::ticket::Status::Failed => (EventType::Warning, "ScanFailed"),
                crate::ticket::Status::HighRiskFound => (EventType::Warning, "HighRiskFound"),
                _ => (EventType::Normal, "Advanced"),
            };
            let note = format!(
                "run {} is {} (token {}, revision {})",
                ticket.run, ticket.status, ticket.fencing_token, ticket.revision
            );
            self.publish(type_, reason, "Scan", note).await;
        }
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
        self.publish(EventType::Warning, "StepFailed", "Scan", note).await;
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
    use serde_json::json;

    #[test]
    fn merge_patch_removes_what_is_gone_at_every_depth() {
        let from = json!({"a": 1, "n": {"state": "sent", "sentAt": "t"}, "gone": [1], "same": true});
        let to = json!({"a": 2, "n": {"state": "sending"}, "same": true, "new": "x"});
        assert_eq!(
            merge_patch(&from, &to),
            json!({"a": 2, "n": {"state": "sending", "sentAt": null}, "gone": null, "new": "x"})
        );
        assert_eq!(merge_patch(&json!(null), &to), to);
    }
}
