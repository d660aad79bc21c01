//! The pipeline's [`Effects`] over the configured providers: each step's
//! call, with provider errors turned into [`StepError`]s that keep their
//! retryability and any server-requested delay.

use super::Providers;
use super::intel::IntelError;
use super::notify::{Delivery, NotifyError, TeamChannel};
use super::online::OnlineError;
use super::pace::Provider;
use super::sbom::SbomError;
use super::vulns::VulnError;
use crate::pipeline::{Effects, Notification, StepError};
use assetscan_domain::ticket::{ThreatIntelFacts, VulnFacts};
use assetscan_domain::{SbomFacts, SbomRead, SbomRef, ScanRequest, Statement, Triage};
use std::collections::BTreeMap;
use std::time::Duration;

impl Effects for Providers {
    async fn check_online(&self, req: &ScanRequest) -> Result<bool, StepError> {
        self.until_ready(Provider::Online, req.origin.as_ref())
            .await;
        Ok(self.online.is_online(&req.target).await?)
    }

    async fn query_vulnerabilities(
        &self,
        req: &ScanRequest,
        triage: &Triage,
    ) -> Result<VulnFacts, StepError> {
        self.until_ready(Provider::Vulnerabilities, req.origin.as_ref())
            .await;
        Ok(self
            .vulnerabilities
            .query(req.asset.as_str(), &req.software, triage)
            .await?)
    }

    async fn read_vex(&self, vex: &SbomRef) -> Result<Vec<Statement>, String> {
        self.sbom_sources
            .read_vex(vex)
            .await
            .map_err(|e| e.summary())
    }

    async fn read_sbom(&self, sbom: &SbomRef) -> Result<SbomRead, (StepError, SbomFacts)> {
        self.sbom_sources.read(sbom).await.map_err(|e| {
            let facts = SbomFacts {
                problem: Some(e.problem()),
                ..SbomFacts::of(sbom)
            };
            (StepError::from(e), facts)
        })
    }

    async fn threat_intel(
        &self,
        req: &ScanRequest,
        vulns: &VulnFacts,
    ) -> Result<ThreatIntelFacts, StepError> {
        self.until_ready(Provider::ThreatIntel, req.origin.as_ref())
            .await;
        Ok(self.threat_intel.enrich(vulns).await?)
    }

    /// Sends to the channels at once, one result per channel (a team's own
    /// channel of that name first, [`Providers::send_to`]). WeCom, Slack and
    /// Teams have no idempotency key: a re-send shows the message twice, so
    /// the pipeline re-sends only to channels without a receipt.
    async fn notify(
        &self,
        channels: &[String],
        notification: &Notification,
    ) -> BTreeMap<String, Result<String, StepError>> {
        let sends = channels.iter().map(|name| async move {
            let result = self.send_to(name, notification).await;
            (name.clone(), result)
        });
        futures::future::join_all(sends).await.into_iter().collect()
    }
}

impl Providers {
    /// One channel's send: the channel of that name the run's namespace
    /// defined, else the configured one.
    async fn send_to(&self, name: &str, notification: &Notification) -> Result<String, StepError> {
        let origin = notification.origin.as_ref();
        let team = origin.and_then(|o| Some((o, self.team_channels.get(&o.namespace, name)?)));
        let Some((origin, channel)) = team else {
            self.until_ready(Provider::Channel(name), origin).await;
            return match self.notifiers.get(name) {
                Some(notifier) => Ok(notifier.send(notification).await?),
                None => Err(StepError::permanent("not configured")),
            };
        };
        let paced = format!("{}/{name}", origin.namespace);
        self.until_ready(Provider::Channel(&paced), Some(origin))
            .await;
        let notifier = match &*channel {
            TeamChannel::Ready(notifier) => notifier,
            TeamChannel::Refused(why) => return Err(StepError::permanent(why.clone())),
        };
        let result = notifier.send(notification).await.map_err(StepError::from);
        let delivery = match &result {
            Ok(receipt) => Delivery {
                ok: true,
                message: receipt.clone(),
            },
            Err(e) => Delivery {
                ok: false,
                message: e.message.clone(),
            },
        };
        (self.team_channels).record(&origin.namespace, name, delivery);
        result
    }
}

/// The step's error as the ticket (and so the status a tenant reads) keeps
/// it: `summary`, the error's class and code without the provider's answer.
/// The whole error, excerpt included, goes to the operator's log.
fn step_error(
    error: &dyn std::error::Error,
    summary: String,
    retryable: bool,
    retry_after: Option<Duration>,
) -> StepError {
    tracing::warn!(error = %error, "provider call failed");
    StepError {
        message: summary,
        retryable,
        retry_after,
    }
}

impl From<OnlineError> for StepError {
    fn from(e: OnlineError) -> StepError {
        step_error(&e, e.summary(), e.is_retryable(), None)
    }
}

impl From<VulnError> for StepError {
    fn from(e: VulnError) -> StepError {
        let retry_after = match &e {
            VulnError::Http(http) => http.retry_after(),
            _ => None,
        };
        step_error(&e, e.summary(), e.is_retryable(), retry_after)
    }
}

impl From<SbomError> for StepError {
    fn from(e: SbomError) -> StepError {
        let retry_after = match &e {
            SbomError::Http { error, .. } => error.retry_after(),
            _ => None,
        };
        step_error(&e, e.summary(), e.is_retryable(), retry_after)
    }
}

impl From<IntelError> for StepError {
    fn from(e: IntelError) -> StepError {
        step_error(&e, e.summary(), e.is_retryable(), None)
    }
}

impl From<NotifyError> for StepError {
    fn from(e: NotifyError) -> StepError {
        step_error(&e, e.summary(), e.is_retryable(), e.retry_after())
    }
}
