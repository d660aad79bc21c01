//! The scan pipeline: one run of one asset, driven by its ticket.
//!
//! fast path (terminal? done) → acquire (token floor) → loop { plan from the
//! ticket → call the step's provider (timeout, cancelled by lock loss) →
//! `advance` with the confirmed fact } → release.
//!
//! A `STALE_TOKEN` answer means another executor owns the run now: the runner
//! stops at once, with no further provider call, notification or write.
//!
//! Driving runs is the pipeline's one job: what else the controller asks of
//! the store goes through its doors ([`crate::ports`]), and a run's failure
//! reaches it as their [`StoreFailure`], never the store's own error.

mod drill;
mod effects;
mod facts;
mod retire;
mod retry;
mod run;
mod software;

use run::Run;

pub use effects::{ClaimRecord, Effects, Notification, Observer, Resend, Resolution, StepError};
pub use retry::{RetryPolicy, StepPolicies, StepSettingsError};

pub use crate::ports::StoreFailure;

use crate::store::{Claim, LeaseGuard, StoreError, TicketStore};
use assetscan_domain::ScanRequest;
use assetscan_domain::ticket::Ticket;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How a run ended for this executor.
#[derive(Debug)]
pub enum Outcome {
    /// The run reached a terminal status (here or earlier).
    Terminal(Ticket),
    /// Another executor holds the asset; try again after `retry_after`.
    Locked {
        holder: String,
        retry_after: Duration,
    },
    /// Another executor took the run over; this one stopped without writing.
    Superseded { caller: u64, valid: u64 },
    /// The run's owner was retired (deleted): nothing was created, taken or
    /// written.
    Retired,
    /// The run this one supersedes confirmed a risk and has not recorded its
    /// notification: nothing was taken or written; that run goes first.
    EarlierRunAlerting,
    /// The lock was lost (renewal failed or lease deadline passed) before a
    /// write was needed; this one stopped. The ticket is as last confirmed.
    LockLost(Ticket),
    /// Asked to stop (shutdown); the lock was released.
    Stopped(Ticket),
    /// The observer could not record the claim (see [`Observer::record_claim`]);
    /// the lock was released without any provider call.
    ClaimUnrecorded(Ticket),
    /// The notification could not be delivered yet (retryable errors in
    /// every attempt of this pass). The ticket stays `NOTIFYING`, the lock
    /// was released; try again after `retry_after`. A high-risk alert is
    /// never given up for a passing outage.
    Deferred {
        ticket: Ticket,
        retry_after: Duration,
    },
}

/// Runs scans against one store with one set of effects.
pub struct Pipeline<E> {
    store: TicketStore,
    effects: E,
    steps: StepPolicies,
}

impl<E> Pipeline<E> {
    pub fn new(store: TicketStore, effects: E, steps: StepPolicies) -> Pipeline<E> {
        Pipeline {
            store,
            effects,
            steps,
        }
    }

    /// The retry settings of each step.
    pub fn steps(&self) -> &StepPolicies {
        &self.steps
    }

    /// The store of the objects of `namespace`, where an asset's identity
    /// is `(namespace, assetId)`; the legacy layout for runs of no
    /// namespace (the CLI's).
    fn store_in(&self, namespace: Option<&str>) -> Result<TicketStore, StoreError> {
        match namespace {
            Some(namespace) => self.store.scoped(namespace),
            None => Ok(self.store.clone()),
        }
    }
}

impl<E: Effects> Pipeline<E> {
    /// Performs the run to its end, or until it is locked, superseded, loses
    /// its lock, or `shutdown` fires. Errors are the store's, as a
    /// [`StoreFailure`]: every other way a run can end is an [`Outcome`].
    pub async fn run(
        &self,
        req: &ScanRequest,
        observer: &impl Observer,
        shutdown: &CancellationToken,
    ) -> Result<Outcome, StoreFailure> {
        let store = self.store_in(req.origin.as_ref().map(|o| o.namespace.as_str()))?;
        // Fast path: a finished run needs no lock.
        let found = if req.expect_open {
            None
        } else {
            store.get_ticket(&req.asset, &req.run).await?
        };
        if let Some(ticket) = &found
            && ticket.status.is_terminal()
        {
            observer.on_found_ended(ticket).await;
            return Ok(Outcome::Terminal(ticket.clone()));
        }
        drill::stop_before(req.asset.as_str(), "ACQUIRE");
        // Fence step 1, "Claim" (`domain::fence`): the lock and a new token,
        // above every earlier one and the floor, in one atomic step. The
        // facts just read are not sent again unless the ticket changed.
        let acquired = store
            .acquire_run(
                &req.asset,
                Claim {
                    owner: req.owner.as_deref(),
                    known: found.as_ref(),
                    supersedes: req.supersedes.as_deref(),
                    ..Claim::new(&req.run, &req.holder, req.token_floor)
                },
            )
            .await;
        let acquired = match acquired {
            Ok(acquired) => acquired,
            Err(refused) => return not_claimed(refused, req),
        };
        if acquired.ticket.status.is_terminal() {
            // The run had ended (unread, or since the read): the claim took
            // nothing and returned the ticket as found.
            observer.on_found_ended(&acquired.ticket).await;
            return Ok(Outcome::Terminal(acquired.ticket));
        }
        info!(asset = %req.asset, run = %req.run, token = acquired.token, status = %acquired.ticket.status, "acquired");
        // Fence step 2, "Record the claim": before any provider call.
        if observer.record_claim(&acquired.ticket).await == ClaimRecord::Refused {
            warn!(asset = %req.asset, token = acquired.token, "claim not recorded: stopping");
            release_quietly(&store, req, &acquired.lease).await;
            return Ok(Outcome::ClaimUnrecorded(acquired.ticket));
        }
        // Fence step 3, "Every ticket write is fenced in Redis": each write
        // of the run goes under the claim's token (`Run::write`).
        let mut run = Run {
            pipeline: self,
            store: &store,
            req,
            observer,
            lease: &acquired.lease,
            shutdown,
            notify_attempts: Default::default(),
            first_send: Default::default(),
        };
        let outcome = run.drive(acquired.ticket).await;
        release_quietly(&store, req, &acquired.lease).await;
        Ok(outcome?)
    }
}

/// What a claim the store refused comes to: the outcomes a run expects
/// (its owner retired, an earlier run alerting, another holder), or the
/// store's failure.
fn not_claimed(refused: StoreError, req: &ScanRequest) -> Result<Outcome, StoreFailure> {
    match refused {
        StoreError::RunRetired { .. } => {
            warn!(asset = %req.asset, run = %req.run, "the run's owner was deleted: not starting it");
            Ok(Outcome::Retired)
        }
        StoreError::EarlierRunAlerting { .. } => {
            info!(asset = %req.asset, run = %req.run, "the run it replaces is alerting: that one goes first");
            Ok(Outcome::EarlierRunAlerting)
        }
        StoreError::Locked {
            holder, pttl_ms, ..
        } => Ok(Outcome::Locked {
            holder,
            retry_after: Duration::from_millis(pttl_ms.max(0) as u64),
        }),
        err => Err(err.into()),
    }
}

/// Releases whatever happened: a failed release only delays the next
/// holder by the ttl.
async fn release_quietly(store: &TicketStore, req: &ScanRequest, lease: &LeaseGuard) {
    if let Err(err) = store.release(&req.asset, lease).await {
        warn!(asset = %req.asset, error = %err, "release failed; the lock expires by itself");
    }
}
