//! The NotificationChannel: a team's own channel, defined in its namespace
//! with its credentials in a Secret of that namespace (never another's:
//! the reference has a name and no namespace). The AssetScans of the
//! namespace name it in `spec.notify` as they name a configured channel;
//! those of other namespaces cannot reach it. In the spirit of
//! cert-manager's `Issuer` and Flux's namespaced `Provider`: the platform's
//! channels stay in the operator's configuration, opened to namespaces by
//! `channelAccess`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A channel of this namespace's team.
#[allow(
    clippy::duplicated_attributes,
    reason = "printer columns of one type read as a repeated `type_` to the lint"
)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "assetscan.io",
    version = "v1alpha1",
    kind = "NotificationChannel",
    plural = "notificationchannels",
    namespaced,
    status = "NotificationChannelStatus",
    derive = "PartialEq",
    shortname = "nch",
    category = "security",
    doc = "A notification channel of this namespace's team: the AssetScans of this namespace that name it in spec.notify are alerted on it, with the credentials of a Secret of this namespace.",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct NotificationChannelSpec {
    /// The receiver, and so which keys the Secret holds: `webhook` (`url`,
    /// `secret`: `whsec_<base64>`), `slack` (`url`), `teams` (`url`),
    /// `wecom` (`key`), `alertmanager` (`url`, optional `token`),
    /// `pagerduty` (`routingKey`), `cloudevents` (`url`, optional `token`).
    #[serde(rename = "type")]
    pub type_: ChannelType,

    /// The Secret of this namespace that holds the channel's credentials.
    pub secret_ref: SecretReference,

    /// `alertmanager`: more labels on every alert, for its routes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = 16))]
    pub labels: BTreeMap<String, String>,

    /// `alertmanager`: how long an alert stays firing after a run's send
    /// (its `endsAt`); default `24h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = super::DURATION_PATTERN))]
    pub active_for: Option<String>,

    /// `cloudevents`: `binary` (default) or `structured`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<CloudEventsMode>,

    /// `cloudevents`: the URI reference that starts every event's
    /// `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub source: Option<String>,

    /// `pagerduty`: the Events API endpoint, when not
    /// `https://events.pagerduty.com/v2/enqueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    pub url: Option<String>,

    /// Bound on one delivery (`10s` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = super::DURATION_PATTERN))]
    pub timeout: Option<String>,
}

/// The receivers a team's channel may be.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChannelType {
    Webhook,
    Slack,
    Teams,
    Wecom,
    Alertmanager,
    Pagerduty,
    Cloudevents,
}

/// How a CloudEvent travels.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CloudEventsMode {
    Binary,
    Structured,
}

/// A Secret of the channel's own namespace, by name.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SecretReference {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// What the operator found of the channel: `Ready` (usable, or why not:
/// the Secret missing or malformed, the destination refused by the egress
/// policy) and `Delivered` (the last delivery's outcome).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NotificationChannelStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
