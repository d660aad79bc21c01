//! The channels defined as objects (a team's NotificationChannel + a Secret
//! of its own namespace; the platform's ClusterNotificationChannel), on the
//! API emulator with a controller in this process: each team's channel
//! carries its own namespace's alerts and no other's; a cluster channel
//! carries those of the namespaces its access opens it to; a destination
//! inside the cluster's reach is refused with a condition and never
//! dialled; a Secret missing or of the wrong shape, or an access that
//! cannot be applied, is a condition and an Event, and a fixed one is
//! taken.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::crd::{AssetScan, ClusterNotificationChannel};
use assetscan_testkit::emulator::Fault;
use assetscan_testkit::listener;
use assetscan_testkit::receivers::Alertmanager;
use assetscan_testkit::stubs::{Answer, ReceiverStub, WebhookSink};
use assetscan_testkit::wait;
use controller_kit::team_channels::{
    WHSEC, channel_access_to, channel_condition, channel_in, cluster_channel,
    each_team_alerted_on_its_own_channel, high_risk_naming, platform_receiver, secret_in,
    webhook_channel_in,
};
use controller_kit::*;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;
use tokio::net::TcpListener;

/// A harness watching every namespace, with `team-a`, `team-b` and the
/// platform's `assetscan`, whose
/// egress policy opens 127.0.0.1 alone (the stubs' address), whose team
/// channels are built again every second, and whose `secops-webhook` is
/// open to `team-a`.
async fn harness() -> Harness {
    let mut h = Harness::start().await;
    h.watched = None;
    h.config.providers.online.tcp.egress.allow = vec!["127.0.0.1/32".into()];
    h.config.team_channels.resync_interval = Duration::from_secs(1);
    h.config.channel_access =
        assetscan_operator::yaml::from_str(&channel_access_to("team-a")).unwrap();
    for name in ["team-a", "team-b", "assetscan"] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(h.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
    }
    h
}

/// The API server refuses the operator every GET whose path holds `path`,
/// as kube-apiserver's RBAC words it.
fn forbid_gets(h: &Harness, path: &str) {
    h.emu.faults().inject(
        "GET",
        path,
        usize::MAX,
        Fault::Forbidden {
            user: "system:serviceaccount:assetscan:assetscan-operator".into(),
            verb: "get".into(),
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_team_channel_carries_its_own_namespaces_alerts() {
    let h = harness().await;
    let ctl = h.controller("teams").await;
    each_team_alerted_on_its_own_channel(&h.client, &h.stubs, ["team-a", "team-b"], PATIENCE).await;
    ctl.stop().await;
}

/// A team's channel aimed at loopback (beside the one address the policy
/// opens) is refused with a condition that names the rule and a Warning
/// Event, and is never dialled: a run naming it fails its send with the
/// refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_aimed_at_loopback_is_refused_and_never_dialled() {
    let h = harness().await;
    let inside = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let url = format!("http://{}/hook", inside.local_addr().unwrap());
    webhook_channel_in(&h.client, ("team-a", "inside"), "inside", &url, WHSEC[0]).await;
    let ctl = h.controller("egress").await;

    let refused = ("Ready", "EgressRefusedLoopback");
    let (status, message) =
        channel_condition(&h.client, ("team-a", "inside"), refused, PATIENCE).await;
    assert_eq!(status, "False");
    assert!(message.contains("rule loopback (127.0.0.0/8)"), "{message}");

    let done = high_risk_naming(
        &h.client,
        &h.stubs,
        ("team-a", "web"),
        &["inside"],
        PATIENCE,
    )
    .await;
    assert_eq!(phase(&done), Some(Status::Failed));
    let error = controller_kit::status(&done).last_error.clone();
    let error = error.map(|e| e.message).unwrap_or_default();
    assert!(
        error.contains("the egress policy refuses 127.0.0.2"),
        "{error}"
    );
    assert!(
        !listener::dialled_before(&inside).await.unwrap(),
        "never dialled"
    );

    let events: Api<Event> = Api::namespaced(h.client.clone(), "team-a");
    let notes = until_some("the channel's Warning Event", PATIENCE, async || {
        let list = events.list(&ListParams::default()).await.ok()?;
        let notes: Vec<String> = (list.items.into_iter())
            .filter(|e| e.reason.as_deref() == Some("EgressRefusedLoopback"))
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .filter_map(|e| e.note)
            .collect();
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert_eq!(notes.len(), 1, "one Event for one change: {notes:?}");
    ctl.stop().await;
}

/// A channel whose Secret is missing, then lacks a key its type reads, then
/// holds a secret of the wrong shape, says so (and never repeats a value of
/// the Secret); the Secret fixed, the channel is ready within a resync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_malformed_secret_is_a_condition_until_it_is_fixed() {
    let h = harness().await;
    let spec = json!({"type": "webhook", "secretRef": {"name": "hook"}});
    channel_in(&h.client, "team-a", "alerts", spec).await;
    let ctl = h.controller("secrets").await;
    let channel = ("team-a", "alerts");
    let (status, message) =
        channel_condition(&h.client, channel, ("Ready", "SecretMissing"), PATIENCE).await;
    assert_eq!(status, "False");
    assert_eq!(message, "Secret team-a/hook does not exist");

    let url = h.stubs.sink.hook_url();
    secret_in(&h.client, "team-a", "hook", &[("url", &url)]).await;
    let malformed = ("Ready", "SecretMalformed");
    let (_, message) = channel_condition(&h.client, channel, malformed, PATIENCE).await;
    assert_eq!(
        message,
        "Secret team-a/hook has no key \"secret\" (a webhook channel reads it)"
    );

    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "team-a");
    let set_secret = async |value: &str| {
        let patch = json!({"data": {"secret": base64_of(value)}});
        let params = PatchParams::default();
        secrets
            .patch("hook", &params, &Patch::Merge(&patch))
            .await
            .unwrap();
    };
    set_secret("not-a-whsec-secret").await;
    let message = until_some("the secret's shape named", PATIENCE, async || {
        let (_, message) = channel_condition(&h.client, channel, malformed, PATIENCE).await;
        message.contains("secretFrom").then_some(message)
    })
    .await;
    assert!(!message.contains("not-a-whsec-secret"), "{message}");

    set_secret(WHSEC[0]).await;
    let (status, _) = channel_condition(&h.client, channel, ("Ready", "Ready"), PATIENCE).await;
    assert_eq!(status, "True");
    ctl.stop().await;
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Two runs of one asset through a team's Alertmanager channel and a real
/// Alertmanager: the first, high risk, raises the alert; the spec edited
/// to a clean one, the next run resolves it (the asset's last run was high
/// risk), and Alertmanager tells its receiver so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_alertmanager_resolves_what_a_clean_run_clears() {
    let h = harness().await;
    let webhook = ReceiverStub::start(Answer::Ok).await.unwrap();
    let alertmanager = Alertmanager::start(&webhook.receiver_url()).await.unwrap();
    secret_in(&h.client, "team-a", "am", &[("url", &alertmanager.url())]).await;
    let spec = json!({"type": "alertmanager", "secretRef": {"name": "am"}});
    channel_in(&h.client, "team-a", "alerts", spec).await;
    let ctl = h.controller("resolve").await;
    let ready = ("Ready", "Ready");
    channel_condition(&h.client, ("team-a", "alerts"), ready, PATIENCE).await;

    let raised = high_risk_naming(
        &h.client,
        &h.stubs,
        ("team-a", "web"),
        &["alerts"],
        PATIENCE,
    )
    .await;
    assert_eq!(controller_kit::status(&raised).high_risk, Some(true));
    let asset = raised.spec.asset_id.clone();
    let firing = alertmanager.alerts().await.unwrap();
    assert_eq!(firing.len(), 1, "{firing:#?}");
    assert_eq!(firing[0]["labels"]["asset"], asset.as_str());
    assert_eq!(firing[0]["labels"]["namespace"], "team-a");

    // Alertmanager notified its receiver of the firing alert (a resolution
    // before that would be one it never has to tell).
    until_some("Alertmanager tells of the alert", PATIENCE, async || {
        webhook.alertmanager_told("firing", &asset)
    })
    .await;
    let api: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-a");
    let clean = json!({"spec": {"software": []}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&clean))
        .await
        .unwrap();
    wait::object(&api, "web", "the clean run's end", PATIENCE, |o| {
        is_terminal(o) && controller_kit::status(o).high_risk == Some(false)
    })
    .await;
    let resolved = until_some(
        "Alertmanager tells of the resolution",
        PATIENCE,
        async || webhook.alertmanager_told("resolved", &asset),
    )
    .await;
    assert_eq!(resolved["alerts"][0]["labels"]["namespace"], "team-a");
    let active = alertmanager.alerts().await.unwrap();
    assert!(active.is_empty(), "{active:#?}");
    ctl.stop().await;
}

/// Which runs resolve, over five generations of one AssetScan whose team
/// channel posts to a receiver that records Alertmanager's API calls: a
/// clean first run (no alert before it), a high-risk run (it raises), a
/// clean run that could not ask about every package (it may not say the
/// asset is clean), a high-risk run again, and a clean, complete run: only
/// the last resolves, each severity's alert ended at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_clean_complete_run_after_a_high_risk_one_resolves() {
    let h = harness().await;
    let recorder = ReceiverStub::start(Answer::Ok).await.unwrap();
    secret_in(&h.client, "team-a", "am", &[("url", &recorder.url())]).await;
    let spec = json!({"type": "alertmanager", "secretRef": {"name": "am"}});
    channel_in(&h.client, "team-a", "alerts", spec).await;
    let ctl = h.controller("which-resolve").await;
    let ready = ("Ready", "Ready");
    channel_condition(&h.client, ("team-a", "alerts"), ready, PATIENCE).await;

    let api: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-a");
    let high_risk = h.online(scan("web").high_risk()).spec.software;
    let unasked = h
        .online(scan("web").purl("pkg:generic/firmware@1.0"))
        .spec
        .software;
    let generations = [
        (json!([]), 0),
        (serde_json::to_value(&high_risk).unwrap(), 1),
        (serde_json::to_value(&unasked).unwrap(), 0),
        (serde_json::to_value(&high_risk).unwrap(), 1),
        (json!([]), 1),
    ];
    let mut posts = 0;
    for (generation, (software, new_posts)) in (1..).zip(generations) {
        if generation == 1 {
            let first = h.online(scan("web").notify(&["alerts"]));
            create_in(&api, &first).await;
        } else {
            let edit = json!({"spec": {"software": software}});
            api.patch("web", &PatchParams::default(), &Patch::Merge(&edit))
                .await
                .unwrap();
        }
        let marker = format!("-g{generation}-");
        wait::object(&api, "web", "the generation's run", PATIENCE, |o| {
            let run = o.status.as_ref().and_then(|s| s.run.as_deref());
            is_terminal(o) && run.is_some_and(|r| r.contains(&marker))
        })
        .await;
        posts += new_posts;
        // A resolution is sent after the run's end is written: wait for it.
        until("the generation's posts", PATIENCE, async || {
            recorder.received().len() >= posts
        })
        .await;
        let received = recorder.received();
        assert_eq!(
            received.len(),
            posts,
            "generation {generation}: {received:#?}"
        );
    }
    let resolution = recorder.received().pop().unwrap().body;
    let alerts = resolution.as_array().unwrap();
    assert_eq!(alerts.len(), 6, "one per severity: {resolution:#}");
    for alert in alerts {
        assert_eq!(alert["startsAt"], alert["endsAt"], "ended at once");
        assert_eq!(alert["labels"]["namespace"], "team-a");
    }
    ctl.stop().await;
}

/// A channel whose Secret the API server forbids the operator to read (a
/// namespace the chart's `rbac.secretNamespaces` does not list) says so:
/// `Ready=False`, reason `SecretForbidden`, never a silent channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_the_operator_may_not_read_is_a_condition() {
    let h = harness().await;
    forbid_gets(&h, "/namespaces/team-b/secrets/");
    secret_in(
        &h.client,
        "team-b",
        "hook",
        &[("url", "https://hooks.example/x")],
    )
    .await;
    let spec = json!({"type": "slack", "secretRef": {"name": "hook"}});
    channel_in(&h.client, "team-b", "alerts", spec).await;
    let ctl = h.controller("forbidden").await;
    let forbidden = ("Ready", "SecretForbidden");
    let (status, message) =
        channel_condition(&h.client, ("team-b", "alerts"), forbidden, PATIENCE).await;
    assert_eq!(status, "False");
    assert_eq!(
        message,
        "the operator may not read Secret team-b/hook (forbidden): the platform has not \
         opened this namespace's Secrets to it (rbac.secretNamespaces)"
    );
    ctl.stop().await;
}

/// The platform's channel, open to the namespaces whose labels its
/// selector matches: `team-b` (labelled) is alerted on it; `team-a`, which
/// defines a channel of the same name, on its own and never on the
/// cluster's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_channel_opens_by_labels_and_a_teams_own_channel_comes_first() {
    let h = harness().await;
    let label = json!({"metadata": {"labels": {"alerts": "secops"}}});
    Api::<Namespace>::all(h.client.clone())
        .patch("team-b", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let platform = platform_receiver(&h.client, ("assetscan", "secops")).await;
    let spec = json!({
        "type": "webhook",
        "secretRef": {"name": "secops", "namespace": "assetscan"},
        "access": {"namespaceSelector": {"matchLabels": {"alerts": "secops"}}},
    });
    cluster_channel(&h.client, "secops", spec).await;
    let own = WebhookSink::start(WHSEC[0]).await.unwrap();
    let url = own.hook_url();
    webhook_channel_in(&h.client, ("team-a", "secops"), "own", &url, WHSEC[0]).await;
    let ctl = h.controller("cluster-labels").await;
    let ready = ("Ready", "Ready");
    channel_condition(&h.client, ("", "secops"), ready, PATIENCE).await;
    channel_condition(&h.client, ("team-a", "secops"), ready, PATIENCE).await;

    for namespace in ["team-a", "team-b"] {
        let done = high_risk_naming(
            &h.client,
            &h.stubs,
            (namespace, "web"),
            &["secops"],
            PATIENCE,
        )
        .await;
        assert_eq!(phase(&done), Some(Status::Finished), "{namespace}");
        assert_eq!(
            controller_kit::condition(&done, ConditionType::ChannelRefused),
            None,
            "{namespace}"
        );
    }
    for (sink, namespace) in [(&own, "team-a"), (&platform, "team-b")] {
        let deliveries = sink.deliveries();
        assert_eq!(deliveries.len(), 1, "{namespace}'s alone: {deliveries:?}");
        assert_eq!(deliveries[0].json()["origin"]["namespace"], namespace);
        assert_eq!(sink.rejected(), 0);
    }
    ctl.stop().await;
}

/// A cluster channel whose access cannot be applied opens to no one, says
/// why in its condition, and a run naming it is refused in those words;
/// its access fixed, its missing Secret is the next condition, in the
/// Secret's own namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_channel_whose_access_cannot_be_applied_opens_to_no_one() {
    let h = harness().await;
    let spec = json!({
        "type": "slack",
        "secretRef": {"name": "chat", "namespace": "assetscan"},
        "access": {"allNamespaces": true, "namespaces": ["team-a"]},
    });
    cluster_channel(&h.client, "chat", spec).await;
    let ctl = h.controller("cluster-access").await;
    let invalid = ("Ready", "AccessInvalid");
    let (status, message) = channel_condition(&h.client, ("", "chat"), invalid, PATIENCE).await;
    assert_eq!(status, "False");
    let why = "spec.access: allNamespaces cannot be combined with namespaces or namespaceSelector";
    assert_eq!(message, why);

    let api: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-a");
    create_in(&api, &h.online(scan("web").high_risk().notify(&["chat"]))).await;
    let (_, (_, reason, message)) = ended_refusing(&api, "web", PATIENCE).await;
    assert_eq!(reason, "ChannelNotAllowed");
    assert_eq!(
        message,
        format!(
            "nothing is sent on these channels: channel chat is open to no namespace: \
             its ClusterNotificationChannel's {why}"
        )
    );

    let fixed = json!({"spec": {"access": {"allNamespaces": null}}});
    Api::<ClusterNotificationChannel>::all(h.client.clone())
        .patch("chat", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .unwrap();
    let missing = ("Ready", "SecretMissing");
    let (_, message) = channel_condition(&h.client, ("", "chat"), missing, PATIENCE).await;
    assert_eq!(message, "Secret assetscan/chat does not exist");
    ctl.stop().await;
}

/// A cluster channel that selects namespaces by their labels, where the
/// operator may not read a namespace's labels (an RBAC edited by hand):
/// the channel is refused for that namespace, and the object's run goes
/// on; the refusal says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_the_operator_may_not_read_refuse_the_channel_not_the_run() {
    let h = harness().await;
    forbid_gets(&h, "/api/v1/namespaces/team-b");
    let keys = [("url", "https://hooks.example/x")];
    secret_in(&h.client, "assetscan", "chat", &keys).await;
    let spec = json!({
        "type": "slack",
        "secretRef": {"name": "chat", "namespace": "assetscan"},
        "access": {"namespaceSelector": {"matchLabels": {"alerts": "secops"}}},
    });
    cluster_channel(&h.client, "chat", spec).await;
    let ctl = h.controller("labels-forbidden").await;
    channel_condition(&h.client, ("", "chat"), ("Ready", "Ready"), PATIENCE).await;

    let api: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-b");
    create_in(&api, &h.online(scan("web").high_risk().notify(&["chat"]))).await;
    let (done, (_, _, message)) = ended_refusing(&api, "web", PATIENCE).await;
    assert_eq!(phase(&done), Some(Status::Finished));
    assert!(
        message.contains(
            "channel chat refuses namespace team-b: its namespaceSelector needs the namespace's labels, and the operator may not read them (forbidden)"
        ),
        "{message}"
    );
    ctl.stop().await;
}

/// A cluster channel created under a configured channel's name while a
/// run that the channel check let use the configured one is under way, and
/// closed to the run's namespace: the send does not go to the cluster
/// channel, which no check judged for it; it waits for the next check,
/// which refuses the name. Nothing reaches either receiver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_object_created_under_a_judged_name_waits_for_the_next_check() {
    let h = harness().await;
    let platform = platform_receiver(&h.client, ("assetscan", "secops")).await;
    h.stubs.osv.faults().hold();
    let ctl = h.controller("judged").await;
    let api: Api<AssetScan> = Api::namespaced(h.client.clone(), "team-a");
    let scan = h.online(scan("web").high_risk().notify(&["secops-webhook"]));
    create_in(&api, &scan).await;
    wait::object(
        &api,
        "web",
        "the run at its vulnerability query",
        PATIENCE,
        |o| phase(o) == Some(Status::AssetOnline),
    )
    .await;

    let closed = json!({
        "type": "webhook",
        "secretRef": {"name": "secops", "namespace": "assetscan"},
    });
    cluster_channel(&h.client, "secops-webhook", closed).await;
    let ready = ("Ready", "Ready");
    channel_condition(&h.client, ("", "secops-webhook"), ready, PATIENCE).await;
    h.stubs.osv.faults().release();

    let (_, (_, _, message)) = ended_refusing(&api, "web", PATIENCE).await;
    assert!(
        message.contains("channel secops-webhook refuses namespace team-a: no namespace is listed"),
        "{message}"
    );
    assert_eq!(
        platform.deliveries().len(),
        0,
        "the cluster channel is closed to team-a"
    );
    assert_eq!(
        h.stubs.sink.deliveries().len(),
        0,
        "the configured one stands behind it"
    );
    ctl.stop().await;
}
