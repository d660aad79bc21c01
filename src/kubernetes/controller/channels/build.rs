//! A channel object from its settings and its Secret: the configuration of
//! its type, with the credentials the Secret's keys hold; for a team's, the
//! egress policy on every connection, and its destination judged before
//! any delivery, so that a refusal is the channel's condition at once.

use crate::kubernetes::crd::{ChannelSettings, ChannelType, CloudEventsMode};
use crate::providers::egress::{EgressPolicy, Refusal};
use crate::providers::http::{EgressGuard, GuardError};
use crate::providers::notify::{
    AlertmanagerConfig, CloudEventsConfig, CloudEventsMode as Mode, Notifier, NotifierConfig,
    PAGERDUTY_URL, PagerDutyConfig, SlackConfig, TeamsConfig, WECOM_BASE_URL, WeComConfig,
    WebhookConfig,
};
use crate::providers::{HttpSettings, Secret, SecretFrom};
use k8s_openapi::api::core::v1::Secret as KubeSecret;
use reqwest::Url;
use std::sync::Arc;

/// Why a channel object cannot be used; each is the channel's `Ready=False`
/// condition, with a reason of its own.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("Secret {namespace}/{name} does not exist")]
    SecretMissing { namespace: String, name: String },
    /// The API server forbids the operator to read it (the chart's
    /// `rbac.secretNamespaces` does not list the namespace).
    #[error(
        "the operator may not read Secret {namespace}/{name} (forbidden): the platform has not opened this namespace's Secrets to it (rbac.secretNamespaces)"
    )]
    SecretForbidden { namespace: String, name: String },
    #[error("Secret {namespace}/{name} has no key {key:?} (a {type_} channel reads it)")]
    KeyMissing {
        namespace: String,
        name: String,
        key: &'static str,
        type_: &'static str,
    },
    #[error("key {key:?} of Secret {namespace}/{name} is not UTF-8 text")]
    KeyNotText {
        namespace: String,
        name: String,
        key: &'static str,
    },
    /// The settings or the credentials' shape, in the provider's words
    /// (which never repeat a secret).
    #[error("{0}")]
    Invalid(String),
    #[error("the destination is refused: {0}")]
    Egress(Refusal),
    /// A cluster channel's `access` cannot be applied: it opens the
    /// channel to no namespace.
    #[error("{0}")]
    Access(String),
}

impl Problem {
    /// The condition's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Problem::SecretMissing { .. } => "SecretMissing",
            Problem::SecretForbidden { .. } => "SecretForbidden",
            Problem::KeyMissing { .. } | Problem::KeyNotText { .. } | Problem::Invalid(_) => {
                "SecretMalformed"
            }
            Problem::Egress(refusal) => refusal.rule.reason(),
            Problem::Access(_) => "AccessInvalid",
        }
    }
}

/// A channel built, and what could not be checked yet (its host did not
/// resolve: the check runs again at each connection).
pub struct Built {
    pub notifier: Notifier,
    pub unresolved: Option<String>,
}

/// The channel `settings` ask for with `secret`, the Secret `secret_ref`
/// (namespace, name) names if it exists; its destination judged by
/// `egress` when given (a team's channel).
pub async fn build(
    settings: &ChannelSettings,
    (namespace, secret_name): (&str, &str),
    secret: Option<&KubeSecret>,
    egress: Option<&Arc<EgressPolicy>>,
) -> Result<Built, Problem> {
    let Some(secret) = secret else {
        return Err(Problem::SecretMissing {
            namespace: namespace.to_owned(),
            name: secret_name.to_owned(),
        });
    };
    let keys = Keys {
        secret,
        namespace,
        name: secret_name,
        type_: type_name(settings.type_),
    };
    let guard = egress.map(|egress| EgressGuard::new(egress.clone()));
    let (config, destination) = config(settings, &keys, guard.as_ref())?;
    let notifier = Notifier::from_config(&config).map_err(|e| Problem::Invalid(e.to_string()))?;
    let unresolved = match &guard {
        None => None,
        Some(guard) => match guard.check_url(&destination).await {
            Ok(()) => None,
            Err(GuardError::Refused(refusal)) => return Err(Problem::Egress(refusal)),
            Err(GuardError::Resolve(reason)) => Some(reason),
        },
    };
    Ok(Built {
        notifier,
        unresolved,
    })
}

/// The configuration of the channel's type, and the URL it posts to.
fn config(
    spec: &ChannelSettings,
    keys: &Keys<'_>,
    guard: Option<&EgressGuard>,
) -> Result<(NotifierConfig, Url), Problem> {
    let mut http = http_settings(spec, guard)?;
    Ok(match spec.type_ {
        ChannelType::Webhook => {
            let (url_from, url) = keys.url()?;
            let config = WebhookConfig {
                url_from,
                secret_from: keys.required("secret")?,
                additional_secrets_from: Vec::new(),
                legacy_signature: false,
                legacy_secret_from: None,
                http,
            };
            (NotifierConfig::Webhook(config), url)
        }
        ChannelType::Slack => {
            let (url_from, url) = keys.url()?;
            (NotifierConfig::Slack(SlackConfig { url_from, http }), url)
        }
        ChannelType::Teams => {
            let (url_from, url) = keys.url()?;
            (NotifierConfig::Teams(TeamsConfig { url_from, http }), url)
        }
        ChannelType::Wecom => {
            let config = WeComConfig {
                key_from: keys.required("key")?,
                base_url: WECOM_BASE_URL.to_owned(),
                http,
            };
            (
                NotifierConfig::Wecom(config),
                parse_url("url", WECOM_BASE_URL)?,
            )
        }
        ChannelType::Alertmanager => {
            let (url_from, url) = keys.url()?;
            http.bearer_token_from = keys.optional("token");
            let config = AlertmanagerConfig {
                url_from,
                active_for: active_for(spec)?,
                labels: spec.labels.clone(),
                http,
            };
            (NotifierConfig::Alertmanager(config), url)
        }
        ChannelType::Pagerduty => {
            let endpoint = parse_url("url", spec.url.as_deref().unwrap_or(PAGERDUTY_URL))?;
            let config = PagerDutyConfig {
                routing_key_from: keys.required("routingKey")?,
                url: spec.url.clone(),
                http,
            };
            (NotifierConfig::Pagerduty(config), endpoint)
        }
        ChannelType::Cloudevents => {
            let (url_from, url) = keys.url()?;
            http.bearer_token_from = keys.optional("token");
            let mode = match spec.mode {
                Some(CloudEventsMode::Structured) => Mode::Structured,
                Some(CloudEventsMode::Binary) | None => Mode::Binary,
            };
            let source = spec.source.clone();
            let config = CloudEventsConfig {
                url_from,
                mode,
                source,
                http,
            };
            (NotifierConfig::Cloudevents(config), url)
        }
    })
}

/// `activeFor` (alertmanager), in the spec's units.
fn active_for(spec: &ChannelSettings) -> Result<Option<std::time::Duration>, Problem> {
    (spec.active_for.as_deref())
        .map(|text| crate::duration::parse(text, crate::duration::SPEC_UNITS))
        .transpose()
        .map_err(|e| Problem::Invalid(format!("activeFor: {e}")))
}

/// The channel's `timeout`, and the egress guard (if any) on every
/// connection.
fn http_settings(
    spec: &ChannelSettings,
    guard: Option<&EgressGuard>,
) -> Result<HttpSettings, Problem> {
    let mut http: HttpSettings = match &spec.timeout {
        Some(timeout) => serde_json::from_value(serde_json::json!({"timeout": timeout}))
            .map_err(|e| Problem::Invalid(format!("timeout: {e}")))?,
        None => HttpSettings::default(),
    };
    http.egress = guard.cloned();
    Ok(http)
}

/// `text` as a URL; `what` names it in the error, which never repeats it
/// (it may be a credential).
fn parse_url(what: &str, text: &str) -> Result<Url, Problem> {
    Url::parse(text.trim()).map_err(|e| Problem::Invalid(format!("{what} is not a URL: {e}")))
}

fn type_name(type_: ChannelType) -> &'static str {
    match type_ {
        ChannelType::Webhook => "webhook",
        ChannelType::Slack => "slack",
        ChannelType::Teams => "teams",
        ChannelType::Wecom => "wecom",
        ChannelType::Alertmanager => "alertmanager",
        ChannelType::Pagerduty => "pagerduty",
        ChannelType::Cloudevents => "cloudevents",
    }
}

/// The keys of a channel's Secret.
struct Keys<'a> {
    secret: &'a KubeSecret,
    namespace: &'a str,
    name: &'a str,
    type_: &'static str,
}

impl Keys<'_> {
    /// The `url` key: where the channel posts, a credential itself.
    fn url(&self) -> Result<(SecretFrom, Url), Problem> {
        let from = self.required("url")?;
        let text = (from.load()).map_err(|e| Problem::Invalid(format!("key \"url\": {e}")))?;
        let url = parse_url("key \"url\"", text.expose())?;
        Ok((from, url))
    }

    fn required(&self, key: &'static str) -> Result<SecretFrom, Problem> {
        self.get(key)?.ok_or_else(|| Problem::KeyMissing {
            namespace: self.namespace.to_owned(),
            name: self.name.to_owned(),
            key,
            type_: self.type_,
        })
    }

    /// A key the type may go without; one that is not text counts as absent
    /// and the delivery says what the receiver thinks of that.
    fn optional(&self, key: &'static str) -> Option<SecretFrom> {
        self.get(key).ok().flatten()
    }

    fn get(&self, key: &'static str) -> Result<Option<SecretFrom>, Problem> {
        let Some(bytes) = self.secret.data.as_ref().and_then(|data| data.get(key)) else {
            return Ok(None);
        };
        let text = String::from_utf8(bytes.0.clone()).map_err(|_| Problem::KeyNotText {
            namespace: self.namespace.to_owned(),
            name: self.name.to_owned(),
            key,
        })?;
        Ok(Some(SecretFrom::Given {
            source: format!("key {key} of Secret {}/{}", self.namespace, self.name),
            value: Secret::new(text),
        }))
    }
}
