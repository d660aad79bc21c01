//! The channels defined as objects. A NotificationChannel is a team's own
//! channel, defined in its namespace with its credentials in a Secret of
//! that namespace (never another's: the reference has a name and no
//! namespace); the AssetScans of the namespace name it in `spec.notify` as
//! they name a configured channel, and those of other namespaces cannot
//! reach it. A ClusterNotificationChannel is the platform's: cluster-scoped,
//! its Secret named with its namespace, and open to the namespaces its
//! `access` lists, as `channelAccess` opens a configured channel. In the
//! spirit of cert-manager's `Issuer` and `ClusterIssuer`, and of Flux's
//! namespaced `Provider`.

use crate::kubernetes::channel_access::ChannelAccess;
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
    /// The Secret of this namespace that holds the channel's credentials.
    pub secret_ref: SecretReference,

    #[serde(flatten)]
    pub settings: ChannelSettings,
}

/// The platform's channel, open to the namespaces `access` names.
#[allow(
    clippy::duplicated_attributes,
    reason = "printer columns of one type read as a repeated `type_` to the lint"
)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "assetscan.io",
    version = "v1alpha1",
    kind = "ClusterNotificationChannel",
    plural = "clusternotificationchannels",
    status = "NotificationChannelStatus",
    derive = "PartialEq",
    shortname = "cnch",
    category = "security",
    doc = "A notification channel of the platform's: the AssetScans of the namespaces its access opens it to, that name it in spec.notify, are alerted on it, with the credentials of the Secret it names.",
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
pub struct ClusterNotificationChannelSpec {
    /// The Secret that holds the channel's credentials, in the namespace
    /// named: one only the platform writes (the operator's, say; with the
    /// chart's `rbac.secretNamespaces` set, one it lists), never a
    /// tenant's, as the destination it holds is not under the egress
    /// policy.
    pub secret_ref: NamespacedSecretReference,

    /// The namespaces whose AssetScans may name the channel: listed by
    /// name, selected by their labels, or all. Absent or empty: none.
    #[serde(default, skip_serializing_if = "ChannelAccess::is_closed")]
    pub access: ChannelAccess,

    #[serde(flatten)]
    pub settings: ChannelSettings,
}

/// A channel's receiver and how it is addressed, beside its credentials.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChannelSettings {
    /// The receiver, and so which keys the Secret holds: `webhook` (`url`,
    /// `secret`: `whsec_<base64>`), `slack` (`url`), `teams` (`url`),
    /// `wecom` (`key`), `alertmanager` (`url`, optional `token`),
    /// `pagerduty` (`routingKey`), `cloudevents` (`url`, optional `token`).
    #[serde(rename = "type")]
    pub type_: ChannelType,

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

/// The receivers a channel object may be.
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

/// A Secret of a namespace that the reference names.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NamespacedSecretReference {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// A namespace's name (an RFC 1123 label).
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: String,
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
