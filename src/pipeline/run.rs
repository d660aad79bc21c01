//! One acquired run in progress: from its claim to its end, or until it is
//! superseded, loses its lock or is asked to stop. Every step is planned
//! from the ticket alone ([`assetscan_domain::plan`]), so a takeover
//! continues from the last confirmed fact.

use super::facts::{Facts, as_declared, to_json};
use super::{Effects, Observer, Outcome, Pipeline, Resolution, StepError, drill, software};
use crate::store::{LastErrorChange, LeaseGuard, Patch, StoreError, TicketStore};
use assetscan_domain::ticket::{
    Fact, LastError, NotificationFacts, NotificationState, Status, Step, ThreatIntelFacts, Ticket,
    now_ms,
};
use assetscan_domain::{Next, ScanRequest, assess, needs_threat_intel, plan};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

mod notify;

/// One acquired run in progress.
pub(super) struct Run<'a, E, O> {
    pub(super) pipeline: &'a Pipeline<E>,
    /// The store scoped by the run's namespace.
    pub(super) store: &'a TicketStore,
    pub(super) req: &'a ScanRequest,
    pub(super) observer: &'a O,
    pub(super) lease: &'a LeaseGuard,
    pub(super) shutdown: &'a CancellationToken,
    /// Notify attempts made in this pass (notification retries are bounded
    /// per pass, not per run).
    pub(super) notify_attempts: std::sync::atomic::AtomicU32,
    /// Set by this pass's write of the notification's intent, taken by the
    /// send that follows it: the only send that cannot repeat an earlier one.
    pub(super) first_send: std::sync::atomic::AtomicBool,
}

/// Why the loop exits before a terminal status.
enum Exit {
    Superseded {
        caller: u64,
        valid: u64,
    },
    LockLost,
    Stopped,
    /// The ticket as recorded before deferring.
    Deferred(Duration, Box<Ticket>),
}

/// What one step of the loop came to: the loop goes on, the run leaves it,
/// or the store failed. Three outcomes with names, rather than nested
/// results, so that each caller says which one it handles.
enum Progress {
    /// The ticket as the step's write recorded it: the loop goes on from it.
    Recorded(Box<Ticket>),
    /// The run leaves the loop before a terminal status, and why.
    Exit(Exit),
    /// The store failed: the run ends with its error.
    StoreFailed(StoreError),
}

impl<'a, E: Effects, O: Observer> Run<'a, E, O> {
    pub(super) async fn drive(&mut self, mut ticket: Ticket) -> Result<Outcome, StoreError> {
        loop {
            let progress = match self.next(&ticket) {
                Next::Done => return Ok(Outcome::Terminal(ticket)),
                Next::Move(to) => self.write(&ticket, to, Patch::default()).await,
                Next::Decide => {
                    let (to, patch) = self.decide(&ticket);
                    self.write(&ticket, to, patch).await
                }
                Next::Call(step) => self.call(&ticket, step).await,
            };
            ticket = match progress {
                Progress::Recorded(next) => {
                    if ticket.status != Status::Finished && next.status == Status::Finished {
                        self.resolve_if_clean(&next).await;
                    }
                    *next
                }
                Progress::Exit(Exit::Superseded { caller, valid }) => {
                    warn!(asset = %self.req.asset, caller, valid, "superseded by a newer executor: stopping");
                    return Ok(Outcome::Superseded { caller, valid });
                }
                Progress::Exit(Exit::LockLost) => {
                    warn!(asset = %self.req.asset, "lock lost: stopping");
                    return Ok(Outcome::LockLost(ticket));
                }
                Progress::Exit(Exit::Stopped) => return Ok(Outcome::Stopped(ticket)),
                Progress::Exit(Exit::Deferred(retry_after, recorded)) => {
                    return Ok(Outcome::Deferred {
                        ticket: *recorded,
                        retry_after,
                    });
                }
                Progress::StoreFailed(err) => return Err(err),
            };
        }
    }

    /// The run just ended at `ended`: when it ended clean, having asked
    /// about every package, and the asset's last run was high risk
    /// (`resolves_alert`), its channels that resolve are told, while the
    /// lock is still this run's. An offline asset, a high risk, a scan with
    /// packages it could not ask about, or a lost lock resolve nothing.
    async fn resolve_if_clean(&self, ended: &Ticket) {
        let facts = &ended.facts;
        let clean = facts.risk.as_ref().is_some_and(|risk| !risk.high_risk);
        let complete = (facts.vulnerabilities.as_ref())
            .and_then(|v| v.coverage.as_ref())
            .is_none_or(|coverage| coverage.not_asked_total() == 0);
        if !(self.req.resolves_alert && clean && complete && self.lease.is_held()) {
            return;
        }
        let resolution = Resolution {
            asset: self.req.asset.to_string(),
            ticket_id: ended.id.clone(),
            fencing_token: ended.fencing_token,
            origin: self.req.origin.clone(),
        };
        let effects = &self.pipeline.effects;
        for (channel, result) in effects.resolve(&self.req.channels, &resolution).await {
            match result {
                Ok(receipt) => info!(asset = %self.req.asset, channel, receipt, "alert resolved"),
                Err(e) => {
                    warn!(asset = %self.req.asset, channel, error = %e.message, "alert not resolved: it stays open until the receiver lets it lapse")
                }
            }
        }
    }

    fn next(&self, ticket: &Ticket) -> Next {
        let intel_needed = ticket
            .facts
            .vulnerabilities
            .as_ref()
            .is_some_and(|v| needs_threat_intel(&self.req.policy, v));
        plan(ticket, intel_needed)
    }

    /// The verdict at `VULN_CHECK_DONE`, from confirmed facts only. A high
    /// risk carries the time of the write that confirms it (made at once),
    /// where the time to its notification starts.
    fn decide(&self, ticket: &Ticket) -> (Status, Patch) {
        let vulns = ticket.facts.vulnerabilities.clone().unwrap_or_default();
        let mut risk = assess(&self.req.policy, &vulns, ticket.facts.threat_intel.as_ref());
        risk.confirmed_at = risk.high_risk.then(now_ms);
        let to = if risk.high_risk {
            Status::HighRiskFound
        } else {
            Status::Finished
        };
        (to, Patch::default().fact(Fact::Risk, risk))
    }

    /// Threat intel and the verdict it leads to, recorded in one write. The
    /// verdict is pure: a takeover before this write asks for the intel
    /// again and comes to the same verdict.
    fn with_verdict(
        &self,
        ticket: &Ticket,
        intel: ThreatIntelFacts,
    ) -> Result<(Status, Facts), StepError> {
        let recorded = to_json(&intel)?;
        let mut learned = ticket.clone();
        learned.facts.threat_intel = Some(intel);
        let (to, verdict) = self.decide(&learned);
        let mut facts = verdict.facts;
        facts.insert(Fact::ThreatIntel, recorded);
        Ok((to, facts))
    }

    /// One attempt of `step`, recorded in the ticket either way.
    ///
    /// Exhausted retries fail the run, with three exceptions that keep a
    /// confirmed risk from being lost: a notification is retried pass after
    /// pass while its errors are retryable ([`Exit::Deferred`]); threat
    /// intel that cannot be had is skipped when CVSS alone already makes the
    /// asset high risk.
    async fn call(&self, ticket: &Ticket, step: Step) -> Progress {
        let policy = self.pipeline.steps.of(step);
        let attempt = ticket.attempts_of(step) + 1;
        if step != Step::Notify && attempt > policy.max_attempts {
            return self
                .give_up(ticket, step, attempt - 1, "retries exhausted", Facts::new())
                .await;
        }
        if !self.lease.is_held() {
            return Progress::Exit(Exit::LockLost);
        }
        if self.shutdown.is_cancelled() {
            return Progress::Exit(Exit::Stopped);
        }
        let lost = self.lease.cancelled();
        let started = tokio::time::Instant::now();
        let work = tokio::time::timeout(policy.timeout, self.perform(ticket, step));
        // A shutdown does not walk away from a delivery in flight: the
        // receiver may act on it, and a replica that left it unrecorded
        // would have the next owner send it again. It ends within the
        // step's timeout (the chart's grace period covers it) and its
        // receipts, or its error, are written before the run stops. The
        // other steps only read, and stop at once.
        let stops_at_shutdown = step != Step::Notify;
        let result = tokio::select! {
            _ = lost.cancelled() => return Progress::Exit(Exit::LockLost),
            _ = self.shutdown.cancelled(), if stops_at_shutdown => {
                return Progress::Exit(Exit::Stopped)
            }
            r = while_held(self.lease, work) => match r {
                Some(r) => r,
                None => return Progress::Exit(Exit::LockLost),
            },
        };
        let result = result.unwrap_or_else(|_| {
            Err((
                StepError::retryable(format!("{step} timed out after {:?}", policy.timeout)),
                Facts::new(),
            ))
        });
        self.observer
            .on_step_timed(step, started.elapsed(), result.is_ok());
        debug_assert!(
            as_declared(step, &result),
            "{step} answered {result:?}, which its declaration does not allow"
        );
        match result {
            Ok((to, facts)) => {
                let patch = Patch {
                    facts,
                    attempts: BTreeMap::from([(step, attempt)]),
                    ..Patch::default()
                }
                .completes(step);
                self.write(ticket, to, patch).await
            }
            Err((error, learned)) => {
                self.after_failure(ticket, step, attempt, error, learned)
                    .await
            }
        }
    }

    /// Records a failed `attempt` of `step` and waits out its backoff, or
    /// ends the step's retries (see [`Run::call`]).
    async fn after_failure(
        &self,
        ticket: &Ticket,
        step: Step,
        attempt: u32,
        error: StepError,
        learned: Facts,
    ) -> Progress {
        let policy = self.pipeline.steps.of(step);
        self.observer.on_step_error(ticket, step, &error).await;
        warn!(asset = %self.req.asset, %step, attempt, error = %error.message, "step failed");
        let pass_attempts = if step == Step::Notify {
            self.notify_attempts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1
        } else {
            attempt
        };
        let exhausted = pass_attempts >= policy.max_attempts;
        if !error.retryable || (exhausted && step != Step::Notify) {
            return self
                .give_up(ticket, step, attempt, &error.message, learned)
                .await;
        }
        let patch = Patch {
            facts: learned,
            attempts: BTreeMap::from([(step, attempt)]),
            last_error: LastErrorChange::Set(LastError {
                step,
                message: error.message.clone(),
                at: now_ms(),
                attempt,
            }),
            ..Patch::default()
        };
        let recorded = match self.write(ticket, ticket.status, patch).await {
            Progress::Recorded(recorded) => recorded,
            stopped => return stopped,
        };
        if exhausted {
            return Progress::Exit(Exit::Deferred(policy.max_backoff, recorded));
        }
        let delay = policy.backoff(attempt, error.retry_after);
        let lost = self.lease.cancelled();
        tokio::select! {
            _ = lost.cancelled() => Progress::Exit(Exit::LockLost),
            _ = self.shutdown.cancelled() => Progress::Exit(Exit::Stopped),
            _ = tokio::time::sleep(delay) => Progress::Recorded(recorded),
        }
    }

    /// The provider call of `step`: the status it leads to and its facts,
    /// or why it failed and what it learned all the same (a notification's
    /// confirmed channels).
    async fn perform(
        &self,
        ticket: &Ticket,
        step: Step,
    ) -> Result<(Status, Facts), (StepError, Facts)> {
        let effects = &self.pipeline.effects;
        let failed = |e: StepError| (e, Facts::new());
        let (to, fact, value) = match step {
            Step::OnlineCheck => {
                let online = effects.check_online(self.req).await.map_err(failed)?;
                let to = if online {
                    Status::AssetOnline
                } else {
                    Status::AssetOffline
                };
                (to, Fact::Online, serde_json::Value::Bool(online))
            }
            Step::VulnQuery => {
                let facts = software::query_vulnerabilities(effects, self.req).await?;
                return Ok((Status::VulnCheckDone, facts));
            }
            Step::ThreatIntel => {
                let vulns = ticket.facts.vulnerabilities.clone().unwrap_or_default();
                let intel = effects
                    .threat_intel(self.req, &vulns)
                    .await
                    .map_err(failed)?;
                return self.with_verdict(ticket, intel.bounded()).map_err(failed);
            }
            Step::Notify => return self.notify(ticket).await,
        };
        Ok((to, Facts::from([(fact, value)])))
    }

    /// Ends the step's retries: the run fails, except that threat intel is
    /// skipped when CVSS alone already decides high risk (intel cannot change
    /// that verdict, and failing would lose the alert).
    async fn give_up(
        &self,
        ticket: &Ticket,
        step: Step,
        attempt: u32,
        message: &str,
        learned: Facts,
    ) -> Progress {
        let last_error = LastErrorChange::Set(LastError {
            step,
            message: message.to_owned(),
            at: now_ms(),
            attempt,
        });
        let attempts = BTreeMap::from([(step, attempt)]);
        if step == Step::ThreatIntel {
            let vulns = ticket.facts.vulnerabilities.clone().unwrap_or_default();
            if assess(&self.req.policy, &vulns, None).high_risk {
                warn!(asset = %self.req.asset, "threat intel unavailable; CVSS alone decides high risk");
                let mut patch = Patch {
                    attempts,
                    ..Patch::default()
                }
                .completes(step);
                patch.last_error = last_error;
                return self.write(ticket, ticket.status, patch).await;
            }
        }
        let patch = Patch {
            facts: learned,
            last_error,
            attempts,
            ..Patch::default()
        };
        self.write(ticket, Status::Failed, patch).await
    }

    /// `advance` under the run's token, the one its ticket was claimed
    /// with (every accepted write keeps it): fence step 3, "Every ticket
    /// write is fenced in Redis"; refused, the run stops at once. Entering `NOTIFYING` records the
    /// idempotency key first, so that a takeover re-sends under it.
    async fn write(&self, ticket: &Ticket, to: Status, mut patch: Patch) -> Progress {
        let intent = to == Status::Notifying && ticket.status != Status::Notifying;
        if intent {
            patch = patch.fact(
                Fact::Notification,
                NotificationFacts {
                    idempotency_key: ticket.id.clone(),
                    state: NotificationState::Sending,
                    sent_at: None,
                    attempted_at: Some(now_ms()),
                    receipt: BTreeMap::new(),
                    channels: self.req.channels.clone(),
                },
            );
        }
        drill::stop_before(self.req.asset.as_str(), to.as_str());
        match self
            .store
            .advance_from(&self.req.asset, ticket, ticket.fencing_token, to, &patch)
            .await
        {
            Ok(next) => {
                info!(asset = %self.req.asset, run = %self.req.run, from = %ticket.status, to = %next.status, revision = next.revision, "advanced");
                if intent {
                    self.first_send
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                self.observer.on_ticket(&next).await;
                Progress::Recorded(Box::new(next))
            }
            Err(StoreError::StaleToken { caller, valid }) => {
                Progress::Exit(Exit::Superseded { caller, valid })
            }
            Err(err) => Progress::StoreFailed(err),
        }
    }
}

/// Polls `work` only while the lease is believed held, checked on the
/// monotonic clock before every poll; `None` once it is not. A process that
/// wakes from a pause (GC, frozen VM, SIGSTOP) past its lease deadline must
/// not send one more provider request before its watchdog task gets to run
/// and fire the lease's cancellation: which of the two wakes first is up to
/// the scheduler.
async fn while_held<F: Future>(lease: &LeaseGuard, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    std::future::poll_fn(|cx| {
        if !lease.is_held() {
            return std::task::Poll::Ready(None);
        }
        work.as_mut().poll(cx).map(Some)
    })
    .await
}
