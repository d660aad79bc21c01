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
use assetscan_domain::{SbomFacts, SbomRead, SbomRef, ScanRequest};
use std::collections::BTreeMap;
use std::time::Duration;

impl Effects for Providers {
    async fn check_online(&self, req: &ScanRequest) -> Result<bool, StepError> {
        self.until_ready(Provider::Online).await;
        Ok(self.online.is_online(&req.target).await?)
    }

    async fn query_vulnerabilities(&self, req: &ScanRequest) -> Result<VulnFacts, StepError> {
        self.until_ready(Provider::Vulnerabilities).await;
        Ok(self
            .vulnerabilities
            .query(req.asset.as_str(), &req.software)
            .await?)
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
        _req: &ScanRequest,
        vulns: &VulnFacts,
    ) -> Result<ThreatIntelFacts, StepError> {
        self.until_ready(Provider::ThreatIntel).await;
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
            self.until_ready(Provider::Channel(name)).await;
            let result = match self.notifiers.get(name) {
                Some(notifier) => notifier.send(notification).await.map_err(StepError::from),
                None => Err(StepError::permanent("not configured")),
            };
            (name.clone(), result)
        });
        futures::future::join_all(sends).await.into_iter().collect()
    }
}

fn step_error(
    error: &dyn std::error::Error,
    retryable: bool,
    retry_after: Option<Duration>,
) -> StepError {
    StepError {
        message: error.to_string(),
        retryable,
        retry_after,
    }
}

impl From<OnlineError> for StepError {
    fn from(e: OnlineError) -> StepError {
        step_error(&e, e.is_retryable(), None)
    }
}

impl From<VulnError> for StepError {
    fn from(e: VulnError) -> StepError {
        let retry_after = match &e {
            VulnError::Http(http) => http.retry_after(),
            _ => None,
        };
        step_error(&e, e.is_retryable(), retry_after)
    }
}

impl From<SbomError> for StepError {
    fn from(e: SbomError) -> StepError {
        let retry_after = match &e {
            SbomError::Http { error, .. } => error.retry_after(),
            _ => None,
        };
        step_error(&e, e.is_retryable(), retry_after)
    }
}

impl From<IntelError> for StepError {
    fn from(e: IntelError) -> StepError {
        step_error(&e, e.is_retryable(), None)
    }
}

impl From<NotifyError> for StepError {
    fn from(e: NotifyError) -> StepError {
        step_error(&e, e.is_retryable(), e.retry_after())
    }
}
