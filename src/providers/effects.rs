//! The pipeline's [`Effects`] over the configured providers: each step's
//! call, with provider errors turned into [`StepError`]s that keep their
//! retryability and any server-requested delay.

use super::Providers;
use super::intel::IntelError;
use super::notify::NotifyError;
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

    /// Sends to the channels at once, one result per channel. WeCom and
    /// Slack have no idempotency key: a re-send shows the message twice, so
    /// the pipeline re-sends only to channels without a receipt.
    async fn notify(
        &self,
        channels: &[String],
        notification: &Notification,
    ) -> BTreeMap<String, Result<String, StepError>> {
        let sends = channels.iter().map(|name| async move {
            self.until_ready(Provider::Channel(name), notification.origin.as_ref())
                .await;
            let result = match self.notifiers.get(name) {
                Some(notifier) => notifier.send(notification).await.map_err(StepError::from),
                None => Err(StepError::permanent("not configured")),
            };
            (name.clone(), result)
        });
        futures::future::join_all(sends).await.into_iter().collect()
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
