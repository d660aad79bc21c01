//! A shared cluster: what one team's AssetScans cannot make the operator do
//! on its behalf. The real controller against the API emulator, a real
//! redis-server, the provider stubs and real listeners.
//!
//! This file: the online check's egress policy.

mod controller_kit;

use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::controller::ConditionType;
use controller_kit::*;
use tokio::net::{TcpListener, TcpStream};

/// Whether anything connected to `listener` since the last call: the
/// test's own connection is accepted first only if nothing is queued before
/// it. Accepts up to its own, so the next call starts afresh.
async fn dialled_before(listener: &TcpListener) -> bool {
    let ours = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let mut others = false;
    while listener.accept().await.unwrap().1 != ours.local_addr().unwrap() {
        others = true;
    }
    others
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
    let line = format!("requested by {NAMESPACE}/asker (uid {uid})");

    let deliveries = h.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(h.stubs.sink.rejected(), 0, "the signature covers the body");
    assert_eq!(
        deliveries[0].json()["origin"],
        serde_json::json!({"namespace": NAMESPACE, "name": "asker", "uid": uid})
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
