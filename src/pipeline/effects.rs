//! What the pipeline asks of the world: the [`Effects`] a run calls (one
//! method per I/O step), what they fail with ([`StepError`]), what a
//! notifier is given ([`Notification`]), and who hears of the run's
//! progress ([`Observer`]).

use assetscan_domain::ticket::{RiskFacts, Step, ThreatIntelFacts, Ticket, VulnFacts};
use assetscan_domain::{Origin, SbomFacts, SbomRead, SbomRef, ScanRequest, Statement, Triage};
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// What a step's provider call failed with.
#[derive(Clone, Debug, PartialEq)]
pub struct StepError {
    pub message: String,
    /// Worth another attempt (timeouts, 5xx, 429, connection errors).
    pub retryable: bool,
    /// A server's requested delay (e.g. `Retry-After`).
    pub retry_after: Option<Duration>,
}

impl StepError {
    pub fn retryable(message: impl Into<String>) -> StepError {
        StepError {
            message: message.into(),
            retryable: true,
            retry_after: None,
        }
    }

    pub fn permanent(message: impl Into<String>) -> StepError {
        StepError {
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }
}

/// What the notifier is given. The ticket id is the idempotency key: a
/// re-send after a takeover carries the same key and the same content.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Notification {
    pub ticket_id: String,
    pub asset: String,
    pub run: String,
    pub fencing_token: u64,
    pub risk: RiskFacts,
    pub vulnerabilities: std::sync::Arc<VulnFacts>,
    pub threat_intel: Option<ThreatIntelFacts>,
    /// Who asked for the run (`null` for the CLI's): in the webhook's
    /// signed body and in every chat message.
    pub origin: Option<Origin>,
    /// Set when this send may repeat an earlier attempt (a retry, or a
    /// takeover at `NOTIFYING`), so that the chat channels say so. Not in
    /// the webhook's body: a repeat there is the same body under the same
    /// `Idempotency-Key`.
    #[serde(skip)]
    pub resend: Option<Resend>,
}

/// A send that may repeat an earlier attempt of the same notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resend {
    /// Unix ms of the first attempt, when the ticket recorded it (tickets
    /// written by older versions did not).
    pub first_attempt_at: Option<u64>,
}

/// A clean run's word that the asset's alert is over, for the channels
/// that resolve what they raised (Alertmanager, PagerDuty): they key the
/// alert by the asset, not by the run, so the run that resolves names the
/// asset and itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub asset: String,
    /// The clean run's ticket id and token.
    pub ticket_id: String,
    pub fencing_token: u64,
    pub origin: Option<Origin>,
}

/// The outside world, one method per I/O step. Implemented over the
/// configured providers; every call is bounded by the step's timeout and
/// cancelled when the lock is lost. What the findings mean is decided apart
/// from it, by the pure [`assetscan_domain::assess`] and
/// [`assetscan_domain::needs_threat_intel`].
pub trait Effects: Send + Sync {
    fn check_online(
        &self,
        req: &ScanRequest,
    ) -> impl Future<Output = Result<bool, StepError>> + Send;
    /// The vulnerabilities of `req.software`, the findings `triage`
    /// covers set apart ([`assetscan_domain::TriageFacts`]).
    fn query_vulnerabilities(
        &self,
        req: &ScanRequest,
        triage: &Triage,
    ) -> impl Future<Output = Result<VulnFacts, StepError>> + Send;
    /// Reads the SBOM that lists the asset's packages: its packages and
    /// what the run records of it, or why it cannot be used and the same
    /// record with the problem. Without SBOM sources (the default) every
    /// reference is refused.
    fn read_sbom(
        &self,
        sbom: &SbomRef,
    ) -> impl Future<Output = Result<SbomRead, (StepError, SbomFacts)>> + Send {
        let facts = SbomFacts {
            problem: Some(assetscan_domain::SbomProblem::SourceUnknown),
            ..SbomFacts::of(sbom)
        };
        async move { Err((StepError::permanent("no SBOM source is configured"), facts)) }
    }
    /// Reads a VEX document the AssetScan names: the statements in it that
    /// clear findings, or why it cannot be used. Without SBOM sources (the
    /// default) every reference is refused.
    fn read_vex(
        &self,
        vex: &SbomRef,
    ) -> impl Future<Output = Result<Vec<Statement>, String>> + Send {
        let why = format!("no VEX source {:?} is configured", vex.source());
        async move { Err(why) }
    }
    fn threat_intel(
        &self,
        req: &ScanRequest,
        vulns: &VulnFacts,
    ) -> impl Future<Output = Result<ThreatIntelFacts, StepError>> + Send;
    /// Sends to each of `channels`; one result per channel (a receipt, or
    /// why that channel failed), so that a retry re-sends only to the
    /// channels that have not confirmed.
    fn notify(
        &self,
        channels: &[String],
        notification: &Notification,
    ) -> impl Future<Output = BTreeMap<String, Result<String, StepError>>> + Send;
    /// Tells those of `channels` that resolve alerts that the asset's is
    /// over; one result per channel that resolves (the others are not
    /// asked). Best effort, once, while the run still holds its lock: a
    /// resolution lost leaves the alert open until the receiver lets it
    /// lapse (the safe side). Without such channels (the default) nothing
    /// is sent.
    fn resolve(
        &self,
        channels: &[String],
        resolution: &Resolution,
    ) -> impl Future<Output = BTreeMap<String, Result<String, StepError>>> + Send {
        let _ = (channels, resolution);
        async { BTreeMap::new() }
    }
}

/// Step 2 of the fence, "Record the claim" (`domain::fence`): where a
/// run's claim is recorded before any provider call, so that every token
/// that acts is known outside Redis and the next claim takes it as floor
/// after Redis lost its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum ClaimRecord {
    /// Recorded (the controller: in the AssetScan's status, written only
    /// over the object as it was read): the run starts.
    Recorded,
    /// Not recorded where it must be (the API server refused the
    /// conditional write, or could not be reached): the run does not start.
    Refused,
    /// This caller keeps no record outside Redis (the standalone `scan`
    /// and the bench, which have no AssetScan): the run starts under
    /// Redis's fence alone, steps 1 and 3.
    NotKept,
}

/// Hears about a run's progress (the controller mirrors the ticket into the
/// CR status from here; the CLI prints), and records its claim.
///
/// Recording the claim has no default: an observer says where it records
/// it, or that it keeps none. This one forgets to, and does not compile:
///
/// ```compile_fail
/// use assetscan_operator::domain::ticket::Ticket;
/// use assetscan_operator::pipeline::Observer;
///
/// struct Forgetful;
///
/// impl Observer for Forgetful {
///     async fn on_ticket(&self, _ticket: &Ticket) {}
/// }
/// ```
pub trait Observer: Send + Sync {
    /// Step 2 of the fence, with the freshly claimed ticket, before any
    /// provider call (it is told the claimed ticket here, not by
    /// [`Observer::on_ticket`]). A run whose claim is
    /// [`ClaimRecord::Refused`] releases its lock without any provider
    /// call ([`crate::pipeline::Outcome::ClaimUnrecorded`]).
    fn record_claim(&self, ticket: &Ticket) -> impl Future<Output = ClaimRecord> + Send;
    /// Called after every accepted write (and with a terminal ticket found
    /// on the fast path).
    fn on_ticket(&self, ticket: &Ticket) -> impl Future<Output = ()> + Send;
    /// Called instead of [`Observer::on_ticket`] with a run that had ended
    /// before this executor came to it (on the fast path, or by the claim
    /// that found it ended): another executor ended it and told of it, so
    /// an observer that tells the world (a status, a report, an Event) may
    /// tell nothing again. By default, as any ticket.
    fn on_found_ended(&self, ticket: &Ticket) -> impl Future<Output = ()> + Send {
        self.on_ticket(ticket)
    }
    /// Called after every provider call with how long it took.
    fn on_step_timed(&self, _step: Step, _elapsed: Duration, _ok: bool) {}
    /// Called when a step failed and will be retried or has failed the run.
    fn on_step_error(
        &self,
        _ticket: &Ticket,
        _step: Step,
        _error: &StepError,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Observes nothing, and keeps no record of a claim (the bench; runs of
/// no AssetScan).
impl Observer for () {
    async fn record_claim(&self, _ticket: &Ticket) -> ClaimRecord {
        ClaimRecord::NotKept
    }

    async fn on_ticket(&self, _ticket: &Ticket) {}
}
