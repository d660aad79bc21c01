//! Which namespaces' AssetScans may name each notification channel, in the
//! spirit of Gateway API's `allowedRoutes.namespaces`: a channel is the
//! platform's (a security team's webhook, a chat room), and a tenant that
//! may create AssetScans in its own namespace must not be able to raise
//! alerts on a channel that is not meant for it.
//!
//! A channel is open to the namespaces listed by name, and to those whose
//! labels match its selector; `allNamespaces: true` opens it to all. A
//! channel that `channelAccess` does not list is open to no namespace when
//! the operator watches all of them, and to the watched namespace when it
//! watches one (every AssetScan it sees is there). Closed unless opened:
//! a new tenant namespace reaches no channel until the platform team says
//! it may.

use crate::providers::notify::ChannelObjects;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One channel's entry in `channelAccess`.
///
/// ```yaml
/// channelAccess:
///   secops-webhook:
///     namespaces: [payments, billing]
///     namespaceSelector: {matchLabels: {assetscan.io/alerts: secops}}
///   team-chat: {allNamespaces: true}
/// ```
///
/// A ClusterNotificationChannel's `spec.access` is the same entry.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ChannelAccess {
    /// Every namespace may use the channel (for a configured channel,
    /// logged as a warning at start).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// These namespaces may use it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Namespaces whose labels match may use it. Needs the operator to
    /// read Namespaces, so only when it watches all namespaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
}

impl ChannelAccess {
    /// Opens the channel to no namespace.
    pub fn is_closed(&self) -> bool {
        self == &ChannelAccess::default()
    }
}

/// An entry of access cannot be applied. `at` is where the entry was
/// written: `channelAccess.<channel>`, or a ClusterNotificationChannel's
/// `spec.access`.
#[derive(Debug, thiserror::Error)]
pub enum ChannelAccessError {
    #[error("channelAccess.{channel}: no channel of that name in providers.notifications")]
    UnknownChannel { channel: String },
    #[error("{at}: allNamespaces cannot be combined with namespaces or namespaceSelector")]
    AllAndListed { at: String },
    #[error("{at}.namespaceSelector: {reason}")]
    Selector { at: String, reason: String },
    #[error(
        "{at}.namespaceSelector: the operator watches one namespace ({namespace}) and may not read Namespace labels; list namespaces by name"
    )]
    SelectorWhileNamespaced { at: String, namespace: String },
}

/// Who may use one channel: an entry of access, checked.
#[derive(Clone, Debug)]
pub enum Opening {
    All,
    Listed {
        names: BTreeSet<String>,
        /// The selector, and how the messages show it.
        selector: Option<(Selector, String)>,
    },
}

/// `channelAccess` checked against the configured channels and the
/// watched namespace.
#[derive(Clone, Debug)]
pub struct ChannelPolicy {
    openings: BTreeMap<String, Opening>,
}

impl ChannelPolicy {
    /// `channels`: the configured channel names; `watched`: the one
    /// namespace the operator watches, if it watches one.
    pub fn new<'a>(
        access: &BTreeMap<String, ChannelAccess>,
        channels: impl IntoIterator<Item = &'a String>,
        watched: Option<&str>,
    ) -> Result<ChannelPolicy, ChannelAccessError> {
        let channels: BTreeSet<&String> = channels.into_iter().collect();
        if let Some(channel) = access.keys().find(|c| !channels.contains(c)) {
            return Err(ChannelAccessError::UnknownChannel {
                channel: channel.clone(),
            });
        }
        let mut openings = BTreeMap::new();
        for channel in channels {
            let opening = match (access.get(channel), watched) {
                (Some(entry), _) => {
                    Opening::new(&format!("channelAccess.{channel}"), entry, watched)?
                }
                (None, Some(namespace)) => Opening::Listed {
                    names: BTreeSet::from([namespace.to_owned()]),
                    selector: None,
                },
                (None, None) => Opening::Listed {
                    names: BTreeSet::new(),
                    selector: None,
                },
            };
            openings.insert(channel.clone(), opening);
        }
        Ok(ChannelPolicy { openings })
    }

    /// Every channel open to all namespaces, to be warned about at start.
    pub fn open_to_all(&self) -> Vec<&str> {
        self.openings_where(|o| matches!(o, Opening::All))
    }

    /// Every channel no namespace may use.
    pub fn closed(&self) -> Vec<&str> {
        self.openings_where(
            |o| matches!(o, Opening::Listed { names, selector: None } if names.is_empty()),
        )
    }

    fn openings_where(&self, pick: impl Fn(&Opening) -> bool) -> Vec<&str> {
        (self.openings.iter())
            .filter(|(_, o)| pick(o))
            .map(|(c, _)| c.as_str())
            .collect()
    }

    /// Whether deciding on `channel` for `namespace` needs the namespace's
    /// labels (it is not listed by name, and the channel has a selector).
    pub fn needs_labels(&self, channel: &str, namespace: &str) -> bool {
        (self.openings.get(channel)).is_some_and(|o| o.needs_labels(namespace))
    }

    /// `Ok` when `namespace` may use `channel`; else why not, in words that
    /// name the channel. `labels`: the namespace's, when
    /// [`ChannelPolicy::needs_labels`] said so. A channel that is not
    /// configured is not this policy's to refuse (the run says it is not
    /// configured).
    pub fn check(
        &self,
        channel: &str,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Result<(), String> {
        match self.openings.get(channel) {
            Some(opening) => opening.check(channel, namespace, labels, "channelAccess"),
            None => Ok(()),
        }
    }
}

impl Opening {
    /// The entry `entry`, written at `at`, for an operator that watches
    /// `watched` if one namespace.
    pub fn new(
        at: &str,
        entry: &ChannelAccess,
        watched: Option<&str>,
    ) -> Result<Opening, ChannelAccessError> {
        if entry.all_namespaces {
            if !entry.namespaces.is_empty() || entry.namespace_selector.is_some() {
                return Err(ChannelAccessError::AllAndListed { at: at.to_owned() });
            }
            return Ok(Opening::All);
        }
        let selector = match (&entry.namespace_selector, watched) {
            (None, _) => None,
            (Some(_), Some(namespace)) => {
                return Err(ChannelAccessError::SelectorWhileNamespaced {
                    at: at.to_owned(),
                    namespace: namespace.to_owned(),
                });
            }
            (Some(selector), None) => {
                let parsed = Selector::try_from(selector.clone()).map_err(|e| {
                    ChannelAccessError::Selector {
                        at: at.to_owned(),
                        reason: e.to_string(),
                    }
                })?;
                let shown = format!("namespaceSelector {parsed}");
                Some((parsed, shown))
            }
        };
        Ok(Opening::Listed {
            names: entry.namespaces.iter().cloned().collect(),
            selector,
        })
    }

    /// Whether deciding for `namespace` needs its labels (it is not listed
    /// by name, and there is a selector).
    pub fn needs_labels(&self, namespace: &str) -> bool {
        matches!(self, Opening::Listed { names, selector: Some(_) } if !names.contains(namespace))
    }

    /// `Ok` when `namespace` may use `channel`; else why not, in words that
    /// name the channel and `source`, where the opening is written.
    /// `labels`: the namespace's, when [`Opening::needs_labels`] said so.
    pub fn check(
        &self,
        channel: &str,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
        source: &str,
    ) -> Result<(), String> {
        let Opening::Listed { names, selector } = self else {
            return Ok(());
        };
        if names.contains(namespace) {
            return Ok(());
        }
        let empty = BTreeMap::new();
        if let Some((selector, _)) = selector
            && selector.matches(labels.unwrap_or(&empty))
        {
            return Ok(());
        }
        let listed = match names.is_empty() {
            true => "no namespace is listed".to_owned(),
            false => format!(
                "it is not among {}",
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        let selected = match selector {
            Some((_, shown)) => format!(" and its labels do not match {shown}"),
            None => String::new(),
        };
        Err(format!(
            "channel {channel} refuses namespace {namespace}: {listed}{selected} ({source})"
        ))
    }
}

/// The channel objects their watches keep: the teams' and the cluster's
/// channels, which runs send on, and the cluster channels' openings,
/// which decide who may name them.
#[derive(Clone, Debug, Default)]
pub struct ObjectChannels {
    pub channels: Arc<ChannelObjects>,
    pub openings: Arc<ClusterOpenings>,
}

/// The openings of the ClusterNotificationChannels, kept current by their
/// watch and read by every run's channel check. A channel whose `access`
/// cannot be applied is closed to every namespace, with the reason.
#[derive(Debug, Default)]
pub struct ClusterOpenings {
    openings: RwLock<HashMap<String, Result<Opening, String>>>,
}

impl ClusterOpenings {
    /// The opening of the cluster channel `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<Result<Opening, String>> {
        self.read().get(name).cloned()
    }

    pub fn set(&self, name: &str, opening: Result<Opening, String>) {
        self.write().insert(name.to_owned(), opening);
    }

    pub fn remove(&self, name: &str) {
        self.write().remove(name);
    }

    /// Keeps the channels `keep` names, after a watch started over.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.write().retain(|name, _| keep(name));
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<String, Result<Opening, String>>> {
        self.openings.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<String, Result<Opening, String>>> {
        self.openings.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channels() -> Vec<String> {
        ["hook", "chat", "open"].map(String::from).to_vec()
    }

    fn access(yaml: &str) -> BTreeMap<String, ChannelAccess> {
        crate::yaml::from_str(yaml).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn names_and_selectors_open_a_channel_and_nothing_else_does() {
        let config = access(
            "{hook: {namespaces: [team-a], namespaceSelector: {matchLabels: {alerts: secops}}}, \
              open: {allNamespaces: true}}",
        );
        let policy = ChannelPolicy::new(&config, &channels(), None).unwrap();
        assert_eq!(policy.open_to_all(), ["open"]);
        assert_eq!(policy.closed(), ["chat"]);
        assert!(policy.check("hook", "team-a", None).is_ok());
        assert!(!policy.needs_labels("hook", "team-a"));
        assert!(policy.needs_labels("hook", "team-b"));
        let secops = labels(&[("alerts", "secops")]);
        assert!(policy.check("hook", "team-b", Some(&secops)).is_ok());
        let why = policy
            .check("hook", "team-b", Some(&labels(&[("alerts", "other")])))
            .unwrap_err();
        assert_eq!(
            why,
            "channel hook refuses namespace team-b: it is not among team-a and its labels \
             do not match namespaceSelector alerts=secops (channelAccess)"
        );
        let why = policy.check("chat", "team-a", None).unwrap_err();
        assert_eq!(
            why,
            "channel chat refuses namespace team-a: no namespace is listed (channelAccess)"
        );
        assert!(policy.check("open", "anyone", None).is_ok());
        assert!(policy.check("unconfigured", "anyone", None).is_ok());
    }

    #[test]
    fn one_watched_namespace_may_use_the_channels_not_listed() {
        let config = access("{hook: {namespaces: [other]}}");
        let policy = ChannelPolicy::new(&config, &channels(), Some("scans")).unwrap();
        assert!(policy.check("chat", "scans", None).is_ok());
        assert!(
            policy.check("hook", "scans", None).is_err(),
            "listed: as listed"
        );
        assert!(policy.closed().is_empty());
    }

    #[test]
    fn bad_entries_are_named() {
        for (yaml, watched, expected) in [
            (
                "{nope: {allNamespaces: true}}",
                None,
                "channelAccess.nope: no channel",
            ),
            (
                "{hook: {allNamespaces: true, namespaces: [a]}}",
                None,
                "channelAccess.hook: allNamespaces cannot",
            ),
            (
                "{hook: {namespaceSelector: {matchLabels: {a: b}}}}",
                Some("scans"),
                "watches one namespace (scans)",
            ),
            (
                "{hook: {namespaceSelector: {matchExpressions: [{key: a, operator: Near}]}}}",
                None,
                "channelAccess.hook.namespaceSelector:",
            ),
        ] {
            let err = ChannelPolicy::new(&access(yaml), &channels(), watched)
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{yaml}: {err}");
        }
        assert!(crate::yaml::from_str::<ChannelAccess>("{namespace: [a]}").is_err());
    }
}
