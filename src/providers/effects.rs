//! The pipeline's [`Effects`] over the configured providers: each step's
//! call, with provider errors turned into [`StepError`]s that keep their
//! retryability and any server-requested delay.

use super::Providers;
use super::intel::IntelError;
use super::notify::{ChannelKey, ChannelObject, Checked, Delivery, Notifier, NotifyError};
use super::online::OnlineError;
use super::pace::Provider;
use super::sbom::SbomError;
use super::vulns::VulnError;
use crate::pipeline::{Effects, Notification, Resolution, StepError};
use assetscan_domain::ticket::{ThreatIntelFacts, VulnFacts};
use assetscan_domain::{Origin, SbomFacts, SbomRead, SbomRef, ScanRequest, Statement, Triage};
use std::collections::BTreeMap;
use std::sync::Arc;
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

    async fn resolve(
        &self,
        channels: &[String],
        resolution: &Resolution,
    ) -> BTreeMap<String, Result<String, StepError>> {
        let resolves = channels.iter().map(|name| async move {
            Some((name.clone(), self.resolve_on(name, resolution).await?))
        });
        futures::future::join_all(resolves)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// Where a channel's name leads for a run of a namespace.
enum Found<'a> {
    /// A channel object: the namespace's own, or the cluster's.
    Object(Arc<ChannelObject>, ChannelKey),
    Configured(&'a Notifier),
    Missing,
    /// Another kind of channel than the channel check judged (an object
    /// created or deleted since), or one it refused since: the send waits
    /// for the next check, with these words.
    Unchecked(String),
}

impl Providers {
    /// The channel of that name the run's namespace defined, else the
    /// cluster's, else the configured one; the kind the channel check
    /// judged for the namespace, or none.
    fn find(&self, name: &str, origin: Option<&Origin>) -> Found<'_> {
        let namespace = origin.map(|o| o.namespace.as_str());
        let found = match (
            self.channel_objects.find(namespace, name),
            self.notifiers.get(name),
        ) {
            (Some((key, channel)), _) => Found::Object(channel, key),
            (None, Some(notifier)) => Found::Configured(notifier),
            (None, None) => Found::Missing,
        };
        let now = match &found {
            Found::Object(_, key) if key.namespace.is_some() => Checked::Own,
            Found::Object(..) => Checked::Cluster,
            Found::Configured(_) => Checked::Configured,
            Found::Missing | Found::Unchecked(_) => return found,
        };
        let judged = namespace.and_then(|namespace| self.channel_objects.checked(namespace, name));
        match judged {
            Some(judged) if judged != now => Found::Unchecked(format!(
                "channel {name} is not what the channel check judged ({judged} then, {now} now): it is judged again before the next attempt"
            )),
            _ => found,
        }
    }

    /// One channel's send; a channel object's outcome is noted for its
    /// `Delivered` condition.
    async fn send_to(&self, name: &str, notification: &Notification) -> Result<String, StepError> {
        let origin = notification.origin.as_ref();
        let (channel, key) = match self.find(name, origin) {
            Found::Missing => return Err(StepError::permanent("not configured")),
            Found::Unchecked(why) => return Err(StepError::retryable(why)),
            Found::Configured(notifier) => {
                self.until_ready(Provider::Channel(name), origin).await;
                return Ok(notifier.send(notification).await?);
            }
            Found::Object(channel, key) => (channel, key),
        };
        self.until_ready(Provider::Channel(&key.bucket()), origin)
            .await;
        let notifier = match &*channel {
            ChannelObject::Ready(notifier) => notifier,
            ChannelObject::Refused(why) => return Err(StepError::permanent(why.clone())),
            ChannelObject::Pending(why) => return Err(StepError::retryable(why.clone())),
        };
        let result = notifier.send(notification).await.map_err(StepError::from);
        let message = match &result {
            Ok(receipt) => receipt.clone(),
            Err(e) => e.message.clone(),
        };
        let delivery = Delivery {
            ok: result.is_ok(),
            message,
        };
        self.channel_objects.record(key, delivery);
        result
    }

    /// One channel's resolution, `None` when the channel resolves nothing
    /// (its kind, or it is missing or refused).
    async fn resolve_on(
        &self,
        name: &str,
        resolution: &Resolution,
    ) -> Option<Result<String, StepError>> {
        let origin = resolution.origin.as_ref();
        let found = self.find(name, origin);
        let (notifier, bucket) = match &found {
            Found::Missing | Found::Unchecked(_) => return None,
            Found::Configured(notifier) => (*notifier, name.to_owned()),
            Found::Object(channel, key) => match &**channel {
                ChannelObject::Ready(notifier) => (notifier, key.bucket()),
                ChannelObject::Refused(_) | ChannelObject::Pending(_) => return None,
            },
        };
        self.until_ready(Provider::Channel(&bucket), origin).await;
        let result = notifier.resolve(resolution).await?;
        Some(result.map_err(StepError::from))
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
