//! A shared cluster: what one team's AssetScans cannot make the operator do
//! on its behalf. The real controller against the API emulator, a real
//! redis-server, the provider stubs and real listeners.
//!
//! This file: an asset's identity is (namespace, assetId), the online
//! check's egress policy, who asked in every notification, and which
//! namespaces may use which channel.

mod controller_kit;

use assetscan_operator::domain::ticket::{NotificationState, Status};
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::crd::{AssetScan, SHARD_LABEL};
use assetscan_testkit::listener;
use controller_kit::tenants::{Tenant, TwoTenants, share_no_lock_token_or_history};
use controller_kit::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tokio::net::TcpListener;

async fn dialled_before(listener: &TcpListener) -> bool {
    listener::dialled_before(listener).await.unwrap()
}

/// Targets a tenant may not have probed, by default: each run fails at
/// once with a condition that names the rule, and the listener on the
/// named port sees no connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_online_check_never_dials_local_addresses_by_default() {
    let h = Harness::start().await;
    let v4 = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let v6 = TcpListener::bind("[::1]:0").await.unwrap();
    let (p4, p6) = (
        v4.local_addr().unwrap().port(),
        v6.local_addr().unwrap().port(),
    );
    let ctl = h.controller("tenancy").await;
    let cases = [
        (
            "loopback-v4",
            "127.0.0.1",
            p4,
            "EgressRefusedLoopback",
            "rule loopback (127.0.0.0/8)",
        ),
        (
            "loopback-v6",
            "::1",
            p6,
            "EgressRefusedLoopback",
            "rule loopback (::1/128)",
        ),
        (
            "by-name",
            "localhost",
            p4,
            "EgressRefusedLoopback",
            "rule loopback (127.0.0.0/8)",
        ),
        (
            "metadata",
            "169.254.169.254",
            80,
            "EgressRefusedCloudMetadata",
            "rule cloud-metadata (169.254.169.254/32)",
        ),
    ];
    for (name, host, port, ..) in cases {
        h.create(&scan(name).host(host, &[port]).notify(&[]).build())
            .await;
    }
    for (name, host, _, expected, rule) in cases {
        let done = h.wait_terminal(name, PATIENCE).await;
        assert_eq!(phase(&done), Some(Status::Failed), "{name}");
        let (stalled, why, message) = condition(&done, ConditionType::Stalled).unwrap();
        assert_eq!(
            (stalled.as_str(), why.as_str()),
            ("True", expected),
            "{name}"
        );
        assert!(
            message.contains("the egress policy refuses") && message.contains(rule),
            "{name}: {message}"
        );
        assert!(message.contains(host), "{name}: {message}");
        assert_eq!(
            reason(&done, ConditionType::Ready),
            Some(expected),
            "{name}"
        );
        let error = status(&done).last_error.as_ref().unwrap();
        assert_eq!(error.attempt, 1, "{name}: refused at once, not retried");
    }
    assert!(!dialled_before(&v4).await, "a refused target was dialled");
    assert!(!dialled_before(&v6).await, "a refused target was dialled");
    ctl.stop().await;
}

/// The platform team opens one address: the same target is dialled and
/// comes back online; the rest of loopback stays closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_cidr_is_dialled() {
    let mut h = Harness::start().await;
    h.config.providers.online.tcp.egress.allow = vec!["127.0.0.1/32".into()];
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let ctl = h.controller("tenancy").await;
    h.create(
        &scan("allowed")
            .host("127.0.0.1", &[port])
            .notify(&[])
            .build(),
    )
    .await;
    h.create(&scan("other").host("127.0.0.2", &[port]).notify(&[]).build())
        .await;
    let done = h.wait_terminal("allowed", PATIENCE).await;
    assert_eq!(phase(&done), Some(Status::Finished));
    assert_eq!(
        condition(&done, ConditionType::Ready).map(|c| c.2),
        Some("scan complete".to_owned()),
        "online, so not `asset offline`"
    );
    assert!(
        dialled_before(&listener).await,
        "the allowed target was dialled"
    );
    let other = h.wait_terminal("other", PATIENCE).await;
    assert_eq!(
        reason(&other, ConditionType::Stalled),
        Some("EgressRefusedLoopback")
    );
    ctl.stop().await;
}

/// Every channel names the AssetScan that asked: its namespace, name and
/// uid, in the webhook's signed body and in the chat texts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_notification_names_who_asked() {
    let h = Harness::start().await;
    let channels = ["secops-webhook", "secops-wecom", "secops-slack"];
    let (ctl, done) = h
        .run_to_end("tenancy", scan("asker").high_risk().notify(&channels))
        .await;
    assert_eq!(phase(&done), Some(Status::Finished));
    let uid = done.metadata.uid.clone().unwrap();
    let line = format!("requested by {NAMESPACE}/asker, uid {uid}");

    let deliveries = h.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(h.stubs.sink.rejected(), 0, "the signature covers the body");
    assert_eq!(
        deliveries[0].json()["origin"],
        json!({"namespace": NAMESPACE, "name": "asker", "uid": uid})
    );
    let wecom = h.stubs.wecom.messages();
    assert!(wecom.len() == 1 && wecom[0].contains(&line), "{wecom:?}");
    let slack = h.stubs.slack.messages();
    assert_eq!(slack.len(), 1);
    assert!(
        slack[0]["text"].as_str().unwrap().contains(&line),
        "{}",
        slack[0]
    );
    ctl.stop().await;
}

/// Creates namespace `name` with `labels`.
async fn namespace(h: &Harness, name: &str, labels: serde_json::Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(h.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

/// `name` in `namespace`, with a high risk, naming every channel.
async fn high_risk_in(h: &Harness, namespace: &str, name: &str) -> Api<AssetScan> {
    let api: Api<AssetScan> = Api::namespaced(h.client.clone(), namespace);
    let channels = ["secops-webhook", "secops-wecom", "secops-slack"];
    let scan = h.online(scan(name).high_risk().notify(&channels));
    create_in(&api, &scan).await;
    api
}

/// The Warning `ChannelNotAllowed` Events of `name` in `namespace`: notes.
async fn channel_events(h: &Harness, namespace: &str, name: &str) -> Vec<String> {
    (events_about(&h.client, namespace, name).await.into_iter())
        .filter(|e| e.reason.as_deref() == Some("ChannelNotAllowed"))
        .map(|e| {
            assert_eq!(e.type_.as_deref(), Some("Warning"));
            e.note.unwrap_or_default()
        })
        .collect()
}

/// `channelAccess`, with the operator watching every namespace: team-a is
/// listed by name on the webhook and selected by its labels on Slack;
/// WeCom is listed nowhere, so no namespace may use it; team-b may use
/// nothing. Nothing is sent on a refused channel (its receiver sees no
/// request), the condition and a Warning Event name it and why, and the
/// allowed channels of the same run deliver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_uses_only_the_channels_open_to_it() {
    let mut h = Harness::start().await;
    h.watched = None;
    h.config.channel_access = assetscan_operator::yaml::from_str(
        "{secops-webhook: {namespaces: [team-a]}, \
          secops-slack: {namespaceSelector: {matchLabels: {alerts: slack}}}}",
    )
    .unwrap();
    namespace(&h, "team-a", json!({"alerts": "slack"})).await;
    namespace(&h, "team-b", json!({"alerts": "none"})).await;
    let ctl = h.controller("tenancy").await;
    let team_a = high_risk_in(&h, "team-a", "alerting").await;
    let team_b = high_risk_in(&h, "team-b", "alerting").await;

    let (done_a, refused_a) = ended_refusing(&team_a, "alerting", PATIENCE).await;
    let (done_b, refused_b) = ended_refusing(&team_b, "alerting", PATIENCE).await;

    // team-a: the webhook and Slack delivered; WeCom refused.
    assert_eq!(phase(&done_a), Some(Status::Finished));
    let sent = status(&done_a).notification.as_ref().map(|n| n.state);
    assert_eq!(sent, Some(NotificationState::Sent));
    let (on, reason, message) = refused_a;
    assert_eq!(
        (on.as_str(), reason.as_str()),
        ("True", "ChannelNotAllowed")
    );
    assert_eq!(
        message,
        "nothing is sent on these channels: channel secops-wecom refuses namespace team-a: \
         no namespace is listed (channelAccess)"
    );
    // team-b: every channel refused, the run ends all the same.
    assert_eq!(phase(&done_b), Some(Status::Finished));
    let (_, _, message) = refused_b;
    for why in [
        "channel secops-webhook refuses namespace team-b: it is not among team-a",
        "channel secops-slack refuses namespace team-b: no namespace is listed and its labels \
         do not match namespaceSelector alerts=slack",
        "channel secops-wecom refuses namespace team-b",
    ] {
        assert!(message.contains(why), "{why}: {message}");
    }
    let skipped = status(&done_b).notification.as_ref().map(|n| n.state);
    assert_eq!(skipped, Some(NotificationState::Skipped));

    // The receivers: team-a's alert alone, and nothing on WeCom.
    let deliveries = h.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].json()["origin"]["namespace"], "team-a");
    let slack = h.stubs.slack.messages();
    assert_eq!(slack.len(), 1);
    assert!(
        slack[0]["text"]
            .as_str()
            .unwrap()
            .contains("team-a/alerting")
    );
    assert_eq!(
        h.stubs.wecom.send_calls(),
        0,
        "the refused channel got no request"
    );

    for (namespace, channels) in [("team-a", 1), ("team-b", 3)] {
        let notes = until_some("the ChannelNotAllowed Event", PATIENCE, async || {
            let notes = channel_events(&h, namespace, "alerting").await;
            (!notes.is_empty()).then_some(notes)
        })
        .await;
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].matches("refuses namespace").count(), channels);
    }
    ctl.stop().await;
}

/// A channel open to all namespaces is named in a warning at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_open_to_all_namespaces_is_warned_about_at_start() {
    let h = Harness::start().await;
    let config = h.dir.path().join("open.yaml");
    let text = std::fs::read_to_string(&h.config_path).unwrap();
    std::fs::write(
        &config,
        format!("{text}channelAccess: {{secops-slack: {{allNamespaces: true}}}}\n"),
    )
    .unwrap();
    let op = h.operator("open", &config, |c| c);
    until("the start-up warning", PATIENCE, async || {
        op.log().contains("channel open to all namespaces")
    })
    .await;
    let log = op.log();
    let warning = log
        .lines()
        .find(|l| l.contains("channel open to all namespaces"))
        .unwrap();
    assert!(
        warning.contains("WARN") && warning.contains("secops-slack"),
        "{warning}"
    );
    assert!(!log.contains("channel=secops-webhook"), "{log}");
    op.terminate();
}

/// A new value of the rescan annotation starts a run no sooner than
/// `scanStarts.rescanMinInterval` after the last run ended (its
/// `lastScanTime`): flipping it
/// does not buy a tenant a run at every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rescan_annotation_obeys_the_minimum_interval() {
    let mut h = Harness::start().await;
    h.config.scan_starts.rescan_min_interval = std::time::Duration::from_secs(3);
    let (ctl, first) = h.run_to_end("tenancy", scan("flipper").notify(&[])).await;
    // As the status records it, `lastScanTime`: whole seconds.
    let ended = h.ticket_of(&first).await.updated_at / 1000 * 1000;
    h.annotate("flipper", json!({"assetscan.io/rescan": "t1"}))
        .await;
    let second = h
        .wait("flipper", "the rescan's end", PATIENCE, |o| {
            is_terminal(o) && status(o).last_handled_rescan.as_deref() == Some("t1")
        })
        .await;
    let started = h.ticket_of(&second).await.created_at;
    assert!(
        started >= ended + 3000,
        "the rescan started {} ms after the last run ended",
        started.saturating_sub(ended)
    );
    ctl.stop().await;
}

/// The start bound, end to end: namespace `mass` creates 200 AssetScans,
/// then namespace `few` 5, under a bound of 10 starts per second. `few`'s
/// five are labelled while most of `mass`'s still wait for their labels
/// (labels written in order of creation would label all of `mass`'s
/// first), and finish while most of `mass`'s backlog still waits: its
/// starts are not queued behind the 200 (one line for all would finish them
/// last).
/// The bound is low enough that it, not the replica (a debug build, on a
/// machine running other tests), sets the pace: fairness is the bound's
/// (docs/tenancy.md, "Not guaranteed yet").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_new_scans_are_not_queued_behind_another_namespaces_mass_creation() {
    let mut h = Harness::start().await;
    h.watched = None;
    h.config.scan_starts.per_second = 10;
    h.config.scan_starts.burst = 5;
    namespace(&h, "mass", json!({})).await;
    namespace(&h, "few", json!({})).await;
    let mass: Api<AssetScan> = Api::namespaced(h.client.clone(), "mass");
    let few: Api<AssetScan> = Api::namespaced(h.client.clone(), "few");
    for i in 0..200 {
        create_in(&mass, &h.online(scan(&format!("m-{i:03}")).notify(&[]))).await;
    }
    let ctl = h.controller("tenancy").await;
    // The mass creation is under way: a's first runs ended.
    until("mass's first runs", PATIENCE, async || {
        finished(&mass).await >= 5
    })
    .await;
    for i in 0..5 {
        create_in(&few, &h.online(scan(&format!("f-{i}")).notify(&[]))).await;
    }
    until("few's five labelled", PATIENCE, async || {
        labelled(&few).await == 5
    })
    .await;
    let mass_labelled = labelled(&mass).await;
    println!("when few's 5 were labelled, {mass_labelled} of mass's 200 were");
    assert!(
        mass_labelled <= 100,
        "{mass_labelled} of mass's 200 were labelled before few's 5"
    );
    until("few's five runs", PATIENCE, async || {
        finished(&few).await == 5
    })
    .await;
    let mass_done = finished(&mass).await;
    println!("when few's 5 had finished, {mass_done} of mass's 200 had");
    assert!(
        mass_done <= 150,
        "{mass_done} of mass's 200 had finished when few's 5 had"
    );
    ctl.stop().await;
}

/// How many AssetScans of `api` carry their shard label.
async fn labelled(api: &Api<AssetScan>) -> usize {
    count(api, |o| o.labels().contains_key(SHARD_LABEL)).await
}

/// How many AssetScans of `api` show a terminal phase.
async fn finished(api: &Api<AssetScan>) -> usize {
    count(api, is_terminal).await
}

/// How many AssetScans of `api` are `such`.
async fn count(api: &Api<AssetScan>, such: impl Fn(&AssetScan) -> bool) -> usize {
    let list = api.list(&ListParams::default()).await.expect("list");
    list.items.iter().filter(|o| such(o)).count()
}

/// Two namespaces, one `assetId`, the bridge to the previous release's
/// layout off: each namespace has its own lock, token sequence and audit
/// stream, and deleting one's objects changes no key of the other's
/// (`controller_kit::tenants`; the e2e suite runs the same with operator
/// processes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_namespaces_with_one_asset_id_share_no_lock_token_or_history() {
    let mut h = Harness::start().await;
    h.watched = None;
    h.config.redis.identity_bridge = false.into();
    namespace(&h, "team-a", json!({})).await;
    namespace(&h, "team-b", json!({})).await;
    let ctl = h.controller("tenancy").await;
    let tenants = TwoTenants {
        a: Tenant::new(&h.client, "team-a"),
        b: Tenant::new(&h.client, "team-b"),
        redis: &h.redis,
        stubs: &h.stubs,
        store: h.store().await,
        patience: PATIENCE,
    };
    share_no_lock_token_or_history(&tenants).await;
    ctl.stop().await;
}
