//! The one writer of an AssetScan's status: it sends the patches the status
//! plan (`plan.rs`) computed, classifies the API server's answer, and keeps
//! what it knows to be stored.
//!
//! Status writes are fenced like ticket writes: the CRD's CEL rules make the
//! API server reject a status whose (fencingToken, revision) or
//! observedGeneration is lower than the stored one, so a stale executor that
//! slipped one Redis write in before a takeover still cannot overwrite the
//! newer status. Such a rejection is expected and counted, not retried.

use super::events::RunEvents;
use super::plan::{ClaimWrite, NextWrite, Stored, fence_of, next_write};
use crate::backoff::Backoff;
use crate::kubernetes::controller::cache::WatchCache;
use crate::kubernetes::crd::{AssetScan, AssetScanStatus, is_fence_refusal};
use assetscan_domain::Fence;
use kube::api::{Api, Patch, PatchParams};
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

/// From 100 ms, doubling, up to 2 s.
const STATUS_WRITE_BACKOFF: Backoff =
    Backoff::new(Duration::from_millis(100), Duration::from_secs(2));

/// Why the API server did not take a status patch.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// The fence: a newer executor's status is stored.
    #[error("refused by the status fence: {}", .0.message)]
    Fenced(Box<kube::core::Status>),
    /// The resourceVersion precondition: the object changed since.
    #[error("the object changed: {0}")]
    Conflict(Box<kube::core::Status>),
    /// Not the fence: the status itself is invalid.
    #[error("invalid status: {0}")]
    Invalid(Box<kube::core::Status>),
    /// The object is gone.
    #[error("gone: {0}")]
    Gone(Box<kube::core::Status>),
    /// Throttled, a server error, or no answer at all: it may or may not
    /// have landed.
    #[error(transparent)]
    Transient(kube::Error),
}

impl Refusal {
    /// Classifies the API server's refusal of a status patch.
    fn of(status_err: Box<kube::core::Status>) -> Refusal {
        match status_err.code {
            422 if is_fence_refusal(&status_err) => Refusal::Fenced(status_err),
            422 => Refusal::Invalid(status_err),
            409 => Refusal::Conflict(status_err),
            404 => Refusal::Gone(status_err),
            _ => Refusal::Transient(kube::Error::Api(status_err)),
        }
    }
}

/// The last status a writer saw refused as stale, by its
/// `(fencingToken, revision)`: a status is reported stale once, however
/// often it is written again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LastRefused {
    /// No status refused yet: the first refusal is reported whatever it is.
    Nothing,
    /// A status that carries no fence was refused (the API server's rules
    /// also fence on observedGeneration): later refusals of fenceless
    /// statuses are taken for the same one, not reported again.
    Unfenced,
    /// The status of this fence was refused: only a status of another fence
    /// is news.
    Fenced(Fence),
}

impl LastRefused {
    /// `status` as refused.
    fn of(status: &AssetScanStatus) -> LastRefused {
        fence_of(status).map_or(LastRefused::Unfenced, LastRefused::Fenced)
    }
}

/// Writes one object's status, fenced and conditional.
pub struct StatusWriter<'a> {
    api: Api<AssetScan>,
    name: &'a str,
    events: RunEvents<'a>,
    /// The status as last written (or as read with the object), and the
    /// object's resourceVersion then.
    last: Mutex<Stored>,
    /// The last status refused as stale, so that one stale status is
    /// counted and reported once.
    refused: Mutex<LastRefused>,
    /// When this writer last wrote the status.
    written_at: Mutex<Option<Instant>>,
    /// Told of every status write, so that the controller does not decide
    /// from a cached copy older than it.
    cache: Option<&'a WatchCache>,
}

impl<'a> StatusWriter<'a> {
    pub fn new(api: Api<AssetScan>, obj: &'a AssetScan, events: RunEvents<'a>) -> StatusWriter<'a> {
        StatusWriter {
            api,
            name: obj.metadata.name.as_deref().unwrap_or_default(),
            events,
            last: Mutex::new(Stored::of(obj)),
            refused: Mutex::new(LastRefused::Nothing),
            written_at: Mutex::new(None),
            cache: None,
        }
    }

    /// Tells `cache` of every status this writer writes.
    pub fn remembered_in(mut self, cache: &'a WatchCache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// What this writer last knew to be stored.
    pub fn stored(&self) -> Stored {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// When this writer last wrote the status.
    pub fn written_at(&self) -> Option<Instant> {
        *self.written_at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `status` unless it equals the stored one or is behind it.
    /// Returns whether the API server holds it now. Transient failures are
    /// retried over a fresh read; a refusal is not.
    pub async fn write(&self, status: AssetScanStatus) -> bool {
        for attempt in 1..=STATUS_WRITE_ATTEMPTS {
            let patch = match next_write(&self.stored(), &status) {
                NextWrite::Stored => return true,
                NextWrite::Behind(behind) => {
                    self.refused(&status, &behind.to_string()).await;
                    return false;
                }
                NextWrite::Send(patch) => patch,
            };
            match self.send(&status, &patch).await {
                Ok(()) => return true,
                Err(Refusal::Fenced(_)) => {
                    self.refresh().await;
                    return false;
                }
                Err(Refusal::Invalid(err)) => {
                    self.events.invalid_status(&err.message).await;
                    self.refresh().await;
                    return false;
                }
                Err(Refusal::Gone(_)) => return false,
                Err(err @ (Refusal::Conflict(_) | Refusal::Transient(_))) => {
                    warn!(object = self.name, attempt, error = %err, "status write failed");
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

    /// Records a claim planned over the object as read: one patch,
    /// conditional on its resourceVersion, never retried (see the mirror's
    /// `write_claim`). Returns whether the API server holds it.
    pub async fn claim(&self, claim: &ClaimWrite) -> bool {
        let run = claim.status.run.as_deref().unwrap_or_default();
        match self.send(&claim.status, &claim.patch).await {
            Ok(()) => true,
            Err(Refusal::Fenced(_)) => false,
            Err(Refusal::Conflict(_)) => {
                debug!(
                    object = self.name,
                    run, "claim not recorded: the object changed since it was read"
                );
                false
            }
            Err(err) => {
                warn!(object = self.name, run, error = %err, "claim not recorded");
                false
            }
        }
    }

    /// Sends `patch`, which writes `status`: the one place a status patch is
    /// sent and its answer classified. An accepted status is remembered as
    /// stored; one refused by the fence is counted and reported as stale.
    async fn send(&self, status: &AssetScanStatus, patch: &Value) -> Result<(), Refusal> {
        let answer = self
            .api
            .patch_status(
                self.name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(patch),
            )
            .await;
        let refusal = match answer {
            Ok(stored) => {
                self.stored_now(stored);
                return Ok(());
            }
            Err(kube::Error::Api(status_err)) => Refusal::of(status_err),
            Err(err) => Refusal::Transient(err),
        };
        if let Refusal::Fenced(err) = &refusal {
            self.refused(status, &err.message).await;
        }
        Err(refusal)
    }

    /// Counts and reports a stale status (refused by the API server's fence,
    /// or known to be behind the stored one), once per status.
    async fn refused(&self, status: &AssetScanStatus, why: &str) {
        let fence = LastRefused::of(status);
        {
            let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            if *refused == fence {
                return;
            }
            *refused = fence;
        }
        self.events.stale_status(why).await;
    }

    /// Re-reads the stored status, so the next patch is computed against it.
    pub async fn refresh(&self) {
        if let Ok(current) = self.api.get_status(self.name).await {
            self.remember(current);
        }
    }

    /// `object` as this writer's own write left it.
    fn stored_now(&self, object: AssetScan) {
        *self.written_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        if let Some(cache) = self.cache {
            cache.wrote(&object);
        }
        self.remember(object);
    }

    fn remember(&self, object: AssetScan) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Stored::from(object);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assetscan_domain::fence::TOKEN_RULE;
    use kube::core::response::{StatusCause, StatusDetails};

    fn answer(code: u16, causes: &[(&str, &str, &str)]) -> Refusal {
        let causes = causes
            .iter()
            .map(|(reason, field, message)| StatusCause {
                reason: (*reason).to_owned(),
                field: (*field).to_owned(),
                message: (*message).to_owned(),
            })
            .collect();
        Refusal::of(Box::new(kube::core::Status {
            code,
            message: TOKEN_RULE.message.to_owned(),
            details: Some(StatusDetails {
                name: "scan".to_owned(),
                group: "assetscan.io".to_owned(),
                kind: "AssetScan".to_owned(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
            ..Default::default()
        }))
    }

    #[test]
    fn a_refusal_is_classified_by_its_code_and_the_fence_by_its_cause() {
        let fenced = ("FieldValueForbidden", "status.fencingToken", "Forbidden");
        assert!(matches!(answer(422, &[fenced]), Refusal::Fenced(_)));
        // The aggregated message alone (here the fence's own) proves nothing.
        let other = (
            "FieldValueNotSupported",
            "status.phase",
            "Unsupported value",
        );
        assert!(matches!(answer(422, &[other]), Refusal::Invalid(_)));
        assert!(matches!(answer(422, &[]), Refusal::Invalid(_)));
        assert!(matches!(answer(409, &[]), Refusal::Conflict(_)));
        assert!(matches!(answer(404, &[]), Refusal::Gone(_)));
        for code in [429, 500, 503] {
            assert!(matches!(answer(code, &[fenced]), Refusal::Transient(_)));
        }
    }
}
