//! Notifications about a high-risk asset, over the channels configured by
//! name: a generic signed webhook, a WeCom group robot, a Slack incoming
//! webhook, a Microsoft Teams workflow, Prometheus Alertmanager, PagerDuty
//! Events v2, and CloudEvents over HTTP.
//!
//! Delivery is at-least-once: a takeover at `NOTIFYING` sends again. What
//! turns the repeats into one effect is each receiver's own key
//! (docs/configuration.md, "One effect, receiver by receiver"): the
//! webhook's `Idempotency-Key` (the ticket id), CloudEvents' `source` +
//! `id` (the ticket id), Alertmanager's labels and PagerDuty's `dedup_key`
//! (both the asset's incident, [`message::incident_key`]). WeCom, Slack and
//! Teams have no key: a repeat there is a second message, and the ticket id
//! is in every message's text so that humans can tell repeats apart.

mod alertmanager;
mod cloudevents;
mod error;
mod message;
mod objects;
mod pagerduty;
mod signature;
mod slack;
mod teams;
mod untrusted;
mod webhook;
mod wecom;

pub use alertmanager::{ALERT_NAME, AlertmanagerConfig, AlertmanagerNotifier};
pub use cloudevents::{
    CloudEventsConfig, CloudEventsNotifier, EVENT_TYPE, Mode as CloudEventsMode,
};
pub use error::{NotifyError, SlackError};
pub use objects::{ChannelKey, ChannelObject, ChannelObjects, Checked, Delivery};
pub use pagerduty::{DEFAULT_URL as PAGERDUTY_URL, PagerDutyConfig, PagerDutyNotifier};
pub use slack::{SlackConfig, SlackNotifier};
pub use teams::{CARD_VERSION, TeamsConfig, TeamsNotifier};
pub use webhook::{WebhookConfig, WebhookNotifier};
pub use wecom::{DEFAULT_BASE_URL as WECOM_BASE_URL, WeComConfig, WeComNotifier};

use crate::pipeline::{Notification, Resolution};
use crate::providers::error::ProviderConfigError;
use schemars::JsonSchema;
use serde::Deserialize;
use signature::Schemes;
use std::collections::BTreeMap;

/// One channel's configuration, by `kind`.
///
/// ```yaml
/// notifications:
///   ops-webhook: {kind: webhook, urlFrom: {env: HOOK_URL}, secretFrom: {file: /secrets/hmac}}
///   sec-wecom:   {kind: wecom, keyFrom: {env: WECOM_KEY}}
///   sec-slack:   {kind: slack, urlFrom: {file: /secrets/slack-url}}
///   sec-teams:   {kind: teams, urlFrom: {file: /secrets/teams-workflow-url}}
///   alerts:      {kind: alertmanager, urlFrom: {env: ALERTMANAGER_URL}, labels: {team: secops}}
///   oncall:      {kind: pagerduty, routingKeyFrom: {file: /secrets/pd-key}}
///   bus:         {kind: cloudevents, urlFrom: {env: BROKER_URL}, mode: structured}
/// ```
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum NotifierConfig {
    Webhook(WebhookConfig),
    Wecom(WeComConfig),
    Slack(SlackConfig),
    Teams(TeamsConfig),
    Alertmanager(AlertmanagerConfig),
    Pagerduty(PagerDutyConfig),
    Cloudevents(CloudEventsConfig),
}

/// A configured channel.
#[derive(Debug)]
pub enum Notifier {
    Webhook(WebhookNotifier),
    WeCom(WeComNotifier),
    Slack(SlackNotifier),
    Teams(TeamsNotifier),
    Alertmanager(AlertmanagerNotifier),
    PagerDuty(PagerDutyNotifier),
    CloudEvents(CloudEventsNotifier),
}

impl Notifier {
    pub fn from_config(config: &NotifierConfig) -> Result<Notifier, ProviderConfigError> {
        Ok(match config {
            NotifierConfig::Webhook(c) => Notifier::Webhook(WebhookNotifier::new(c)?),
            NotifierConfig::Wecom(c) => Notifier::WeCom(WeComNotifier::new(c)?),
            NotifierConfig::Slack(c) => Notifier::Slack(SlackNotifier::new(c)?),
            NotifierConfig::Teams(c) => Notifier::Teams(TeamsNotifier::new(c)?),
            NotifierConfig::Alertmanager(c) => {
                Notifier::Alertmanager(AlertmanagerNotifier::new(c)?)
            }
            NotifierConfig::Pagerduty(c) => Notifier::PagerDuty(PagerDutyNotifier::new(c)?),
            NotifierConfig::Cloudevents(c) => Notifier::CloudEvents(CloudEventsNotifier::new(c)?),
        })
    }

    /// Ends the asset's alert, on the kinds that resolve what they raised
    /// (Alertmanager, PagerDuty); `None` for the others, which have nothing
    /// to resolve.
    pub async fn resolve(&self, resolution: &Resolution) -> Option<Result<String, NotifyError>> {
        match self {
            Notifier::Alertmanager(n) => Some(n.resolve(resolution).await),
            Notifier::PagerDuty(n) => Some(n.resolve(resolution).await),
            Notifier::Webhook(_)
            | Notifier::WeCom(_)
            | Notifier::Slack(_)
            | Notifier::Teams(_)
            | Notifier::CloudEvents(_) => None,
        }
    }

    /// Delivers the notification; the `Ok` value is the receipt (what the
    /// receiver answered, short) for the ticket.
    pub async fn send(&self, notification: &Notification) -> Result<String, NotifyError> {
        match self {
            Notifier::Webhook(n) => n.send(notification).await,
            Notifier::WeCom(n) => n.send(notification).await,
            Notifier::Slack(n) => n.send(notification).await,
            Notifier::Teams(n) => n.send(notification).await,
            Notifier::Alertmanager(n) => n.send(notification).await,
            Notifier::PagerDuty(n) => n.send(notification).await,
            Notifier::CloudEvents(n) => n.send(notification).await,
        }
    }
}

/// Builds every configured channel. Names are what an AssetScan's
/// `spec.notify` lists, so they follow the CRD's pattern.
pub fn notifiers_from_config(
    configs: &BTreeMap<String, NotifierConfig>,
) -> Result<BTreeMap<String, Notifier>, ProviderConfigError> {
    configs
        .iter()
        .map(|(name, config)| {
            if !is_channel_name(name) {
                return Err(ProviderConfigError::invalid(
                    "notifications",
                    "channel name",
                    format!(
                        "{name:?} must match [A-Za-z0-9][A-Za-z0-9._-]*, at most 63 characters"
                    ),
                ));
            }
            let notifier =
                Notifier::from_config(config).map_err(|e| e.of("notifications", name))?;
            if let Notifier::Webhook(webhook) = &notifier {
                say_legacy_signing(name, webhook.schemes());
            }
            Ok((name.clone(), notifier))
        })
        .collect()
}

/// A channel still signing as 0.1.0 did is said at start: the setting goes
/// in 0.3.0, and one that signs only that way is refused by every receiver
/// already verifying Standard Webhooks.
fn say_legacy_signing(channel: &str, schemes: Schemes) {
    match schemes {
        Schemes::Standard { .. } => {}
        Schemes::StandardAndLegacy { .. } => tracing::warn!(
            channel,
            "channel sends 0.1.0's X-AssetScan-Signature beside the Standard Webhooks signature (legacySignature, deprecated: removed in 0.3.0)"
        ),
        Schemes::LegacyOnly => tracing::warn!(
            channel,
            "channel signs only as 0.1.0 did (legacySignature with a secret that is not whsec_): a receiver verifying Standard Webhooks refuses its deliveries; docs/upgrading.md says how to move"
        ),
    }
}

/// `[A-Za-z0-9][A-Za-z0-9._-]*`, 1–63 characters (the CRD's `notify` items).
fn is_channel_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 63
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_configs_by_kind() {
        let yaml = r#"
ops-webhook: {kind: webhook, urlFrom: {env: HOOK_URL}, secretFrom: {file: /s/hmac}}
sec-wecom: {kind: wecom, keyFrom: {env: WECOM_KEY}, timeout: 2s}
sec-slack: {kind: slack, urlFrom: {file: /s/slack}}
teams: {kind: teams, urlFrom: {file: /s/teams}}
am: {kind: alertmanager, urlFrom: {env: AM}, activeFor: 48h, labels: {team: secops}}
pd: {kind: pagerduty, routingKeyFrom: {file: /s/pd}, url: 'https://events.eu.pagerduty.com/v2/enqueue'}
bus: {kind: cloudevents, urlFrom: {env: BUS}, mode: structured, source: //prod-eu}
"#;
        let configs: BTreeMap<String, NotifierConfig> = crate::yaml::from_str(yaml).unwrap();
        assert!(matches!(configs["ops-webhook"], NotifierConfig::Webhook(_)));
        assert!(matches!(configs["sec-wecom"], NotifierConfig::Wecom(_)));
        assert!(matches!(configs["sec-slack"], NotifierConfig::Slack(_)));
        assert!(matches!(configs["teams"], NotifierConfig::Teams(_)));
        assert!(matches!(configs["am"], NotifierConfig::Alertmanager(_)));
        assert!(matches!(configs["pd"], NotifierConfig::Pagerduty(_)));
        assert!(
            matches!(&configs["bus"], NotifierConfig::Cloudevents(c) if c.mode == CloudEventsMode::Structured)
        );
        assert!(
            crate::yaml::from_str::<NotifierConfig>(
                "{kind: cloudevents, urlFrom: {env: X}, mode: batched}"
            )
            .is_err()
        );
        assert!(
            crate::yaml::from_str::<NotifierConfig>("{kind: slack, url: 'https://x'}").is_err()
        );
        assert!(crate::yaml::from_str::<NotifierConfig>("{kind: email}").is_err());
    }

    #[test]
    fn bad_channel_names_are_rejected() {
        let configs: BTreeMap<String, NotifierConfig> =
            crate::yaml::from_str("'Bad Name': {kind: slack, urlFrom: {env: X}}").unwrap();
        let err = notifiers_from_config(&configs).unwrap_err();
        assert!(err.to_string().contains("Bad Name"), "{err}");
        for good in ["ops", "Sec.Slack_1", "a-b"] {
            assert!(is_channel_name(good), "{good}");
        }
        for bad in ["", "-x", "a b", "x/y", &"a".repeat(64)] {
            assert!(!is_channel_name(bad), "{bad}");
        }
    }
}
