//! Channels as objects (a team's NotificationChannel + a Secret of its
//! namespace; the platform's ClusterNotificationChannel): the helpers that
//! create them and read their conditions, and the two-team scenario that `tests/team_channels.rs` runs with a controller
//! in its process and the e2e suite with operator processes, on the
//! emulator or a cluster. The caller starts what reconciles both
//! namespaces, with `channelAccess` opening the configured
//! `secops-webhook` to the first namespace alone, and the egress policy
//! opening 127.0.0.1 (the stubs' address).

use super::kit::scans::{condition, is_terminal, phase, scan};
use super::{create_in, ended_refusing, online_in};
use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::crd::{
    AssetScan, ClusterNotificationChannel, NotificationChannel,
};
use assetscan_testkit::stubs::{ProviderStubs, WebhookSink};
use assetscan_testkit::wait::{self, until_some};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// Each team's Standard Webhooks secret, and the platform's.
pub const WHSEC: [&str; 3] = [
    "whsec_dGVhbS1hLXNlY3JldC0yNC1ieXRlcy1sb25n",
    "whsec_dGVhbS1iLXNlY3JldC0yNC1ieXRlcy1sb25n",
    "whsec_cGxhdGZvcm0tc2VjcmV0LTI0LWJ5dGVzLWxvbmc=",
];

/// The `channelAccess` the scenario expects (YAML): `secops-webhook` open
/// to `first` alone.
pub fn channel_access_to(first: &str) -> String {
    format!("{{secops-webhook: {{namespaces: [{first}]}}}}")
}

/// Creates Secret `name` in `namespace` with `keys`.
pub async fn secret_in(client: &Client, namespace: &str, name: &str, keys: &[(&str, &str)]) {
    let data: BTreeMap<String, ByteString> = (keys.iter())
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("Secret {namespace}/{name}: {e}"));
}

/// Creates NotificationChannel `name` in `namespace` with `spec`.
pub async fn channel_in(client: &Client, namespace: &str, name: &str, spec: Value) {
    let api = Api::<NotificationChannel>::namespaced(client.clone(), namespace);
    create_channel(api, name, spec).await;
}

/// Creates the channel object `name` of kind `K` with `spec` through `api`.
async fn create_channel<K>(api: Api<K>, name: &str, spec: Value)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let object: K = serde_json::from_value(json!({
        "apiVersion": K::api_version(&()), "kind": K::kind(&()),
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap_or_else(|e| panic!("a {} {name}: {e}", K::kind(&())));
    (api.create(&PostParams::default(), &object).await)
        .unwrap_or_else(|e| panic!("create {name} at {}: {e}", api.resource_url()));
}

/// A team's webhook channel `name` in `namespace`, to `url` and signed
/// with `whsec`, its credentials in that namespace's Secret `secret`.
pub async fn webhook_channel_in(
    client: &Client,
    (namespace, name): (&str, &str),
    secret: &str,
    url: &str,
    whsec: &str,
) {
    secret_in(
        client,
        namespace,
        secret,
        &[("url", url), ("secret", whsec)],
    )
    .await;
    let spec = json!({"type": "webhook", "secretRef": {"name": secret}});
    channel_in(client, namespace, name, spec).await;
}

/// The platform's receiver (signing with `WHSEC[2]`), its address and key
/// in the Secret `secret` of `namespace`, as a cluster channel names it.
pub async fn platform_receiver(client: &Client, (namespace, secret): (&str, &str)) -> WebhookSink {
    let sink = WebhookSink::start(WHSEC[2]).await.expect("sink");
    let url = sink.hook_url();
    secret_in(
        client,
        namespace,
        secret,
        &[("url", &url), ("secret", WHSEC[2])],
    )
    .await;
    sink
}

/// Creates ClusterNotificationChannel `name` with `spec` (on a cluster,
/// named `<the run's namespace>-…`: the e2e clean-up sweeps them so).
pub async fn cluster_channel(client: &Client, name: &str, spec: Value) {
    create_channel(
        Api::<ClusterNotificationChannel>::all(client.clone()),
        name,
        spec,
    )
    .await;
}

/// Waits until the channel's condition of `type_` has `reason`: its
/// status and message. `namespace` empty: the cluster's channel.
pub async fn channel_condition(
    client: &Client,
    (namespace, name): (&str, &str),
    (type_, reason): (&str, &str),
    patience: Duration,
) -> (String, String) {
    let what = format!("{namespace}/{name} {type_} {reason}");
    until_some(&what, patience, async || {
        let status = match namespace {
            "" => {
                let api = Api::<ClusterNotificationChannel>::all(client.clone());
                api.get(name).await.ok()?.status?
            }
            _ => {
                let api = Api::<NotificationChannel>::namespaced(client.clone(), namespace);
                api.get(name).await.ok()?.status?
            }
        };
        let c = (status.conditions.into_iter()).find(|c| c.type_ == type_)?;
        (c.reason == reason).then_some((c.status, c.message))
    })
    .await
}

/// Creates a high-risk AssetScan `name` in `namespace` naming `channels`,
/// and waits for its run's end.
pub async fn high_risk_naming(
    client: &Client,
    stubs: &ProviderStubs,
    (namespace, name): (&str, &str),
    channels: &[&str],
    patience: Duration,
) -> AssetScan {
    let api: Api<AssetScan> = Api::namespaced(client.clone(), namespace);
    create_in(
        &api,
        &online_in(stubs, scan(name).high_risk().notify(channels)),
    )
    .await;
    wait::object(&api, name, "the run's end", patience, is_terminal).await
}

/// Two teams, each with a channel named `alerts` on its own receiver (which
/// verifies its own signing key) and a Secret of its own: each team's alert
/// reaches its own receiver and never the other's, and each channel shows
/// `Ready` and then `Delivered`. The first team also aims a channel at the
/// cloud metadata service: refused, with the rule as the reason. The
/// configured `secops-webhook`, and the platform's cluster channel
/// `<first>-secops` (its Secret kept in the first namespace, the e2e
/// install's own), both open to the first namespace alone, deliver the
/// first team's alert and are refused to the second.
pub async fn each_team_alerted_on_its_own_channel(
    client: &Client,
    stubs: &ProviderStubs,
    namespaces: [&str; 2],
    patience: Duration,
) {
    let sinks = [
        WebhookSink::start(WHSEC[0]).await.expect("sink"),
        WebhookSink::start(WHSEC[1]).await.expect("sink"),
    ];
    for ((namespace, sink), whsec) in namespaces.iter().zip(&sinks).zip(WHSEC) {
        let url = sink.hook_url();
        webhook_channel_in(client, (namespace, "alerts"), "alerts", &url, whsec).await;
    }
    let [first, second] = namespaces;
    let metadata = [("url", "http://169.254.169.254/latest/meta-data/")];
    secret_in(client, first, "metadata", &metadata).await;
    let spec = json!({"type": "teams", "secretRef": {"name": "metadata"}});
    channel_in(client, first, "inside", spec).await;
    let platform = platform_receiver(client, (first, "platform")).await;
    let cluster = format!("{first}-secops");
    let spec = json!({
        "type": "webhook",
        "secretRef": {"name": "platform", "namespace": first},
        "access": {"namespaces": [first]},
    });
    cluster_channel(client, &cluster, spec).await;

    for channel in [
        (first, "alerts"),
        (second, "alerts"),
        ("", cluster.as_str()),
    ] {
        let ready = ("Ready", "Ready");
        let (status, _) = channel_condition(client, channel, ready, patience).await;
        assert_eq!(status, "True", "{channel:?}");
    }
    let refused = ("Ready", "EgressRefusedCloudMetadata");
    let (status, message) = channel_condition(client, (first, "inside"), refused, patience).await;
    assert_eq!(status, "False");
    assert!(message.contains("169.254.169.254"), "{message}");

    let channels = ["alerts", "secops-webhook", cluster.as_str()];
    for namespace in namespaces {
        high_risk_naming(client, stubs, (namespace, "web"), &channels, patience).await;
    }
    // The second's run ends with the refusals in its status (written
    // beside the run's end, not necessarily with it).
    let api: Api<AssetScan> = Api::namespaced(client.clone(), second);
    let (done, (on, reason, message)) = ended_refusing(&api, "web", patience).await;
    assert_eq!(phase(&done), Some(Status::Finished));
    assert_eq!(
        (on.as_str(), reason.as_str()),
        ("True", "ChannelNotAllowed")
    );
    assert!(
        message.contains("channel secops-webhook refuses namespace"),
        "{message}"
    );
    let closed = format!(
        "channel {cluster} refuses namespace {second}: it is not among {first} \
         (ClusterNotificationChannel {cluster} spec.access)"
    );
    assert!(message.contains(&closed), "{message}");
    let api: Api<AssetScan> = Api::namespaced(client.clone(), first);
    let done = api.get("web").await.expect("the first's AssetScan");
    assert_eq!(phase(&done), Some(Status::Finished));
    assert_eq!(condition(&done, ConditionType::ChannelRefused), None);
    for (namespace, sink) in namespaces.iter().zip(&sinks) {
        assert_eq!(sink.rejected(), 0, "signed with {namespace}'s own key");
        let deliveries = sink.deliveries();
        assert_eq!(deliveries.len(), 1, "{namespace}");
        assert_eq!(deliveries[0].json()["origin"]["namespace"], *namespace);
        let delivered = ("Delivered", "Delivered");
        let (status, message) =
            channel_condition(client, (namespace, "alerts"), delivered, patience).await;
        assert_eq!((status.as_str(), message.as_str()), ("True", "HTTP 200"));
    }
    for (what, deliveries) in [
        ("secops-webhook", stubs.sink.deliveries()),
        ("the cluster channel", platform.deliveries()),
    ] {
        assert_eq!(deliveries.len(), 1, "{what}: the first namespace's alone");
        assert_eq!(deliveries[0].json()["origin"]["namespace"], first);
    }
    assert_eq!(platform.rejected(), 0, "signed with the platform's key");
    let delivered = ("Delivered", "Delivered");
    channel_condition(client, ("", &cluster), delivered, patience).await;
    Api::<ClusterNotificationChannel>::all(client.clone())
        .delete(&cluster, &Default::default())
        .await
        .expect("the cluster channel deleted");
}
