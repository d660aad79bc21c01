use super::notify::{notification, xz};
use super::*;
use assetscan_operator::providers::notify::{
    ALERT_NAME, AlertmanagerConfig, AlertmanagerNotifier, CARD_VERSION, CloudEventsConfig,
    CloudEventsMode, CloudEventsNotifier, EVENT_TYPE, Notifier, NotifierConfig, PagerDutyConfig,
    PagerDutyNotifier, TeamsConfig, TeamsNotifier,
};
use assetscan_testkit::receivers::{Alertmanager, CloudEventsReceiver, validate};
use assetscan_testkit::stubs::{Answer, ReceiverStub};
use std::collections::BTreeMap;

/// PagerDuty's Events API v2 OpenAPI document and Adaptive Cards' schema
/// 1.5.0, as published (tests/receivers/schemas/README.md).
const PAGERDUTY_SCHEMA: &str = "tests/receivers/schemas/pagerduty-events-v2.openapiv3.json";
const PAGERDUTY_EVENT: &str = "/paths/~1enqueue/post/requestBody/content/application~1json/schema";
const ADAPTIVE_CARD_SCHEMA: &str = "tests/receivers/schemas/adaptive-card-1.5.0.json";

fn schema(path: &str) -> std::path::PathBuf {
    assetscan_testkit::tools::repo().join(path)
}

/// The run of `notification()`, again under a later run id.
fn later_run() -> Notification {
    Notification {
        ticket_id: "web-1/run-8".into(),
        run: "run-8".into(),
        fencing_token: 43,
        ..notification(vec![xz()])
    }
}

fn resent(n: &Notification) -> Notification {
    Notification {
        resend: Some(Resend {
            first_attempt_at: Some(1_765_000_000_000),
        }),
        ..n.clone()
    }
}

fn alertmanager_config(dir: &Path, url: &str) -> AlertmanagerConfig {
    AlertmanagerConfig {
        url_from: secret_file(dir, "am-url", url),
        active_for: None,
        labels: BTreeMap::from([("team".to_owned(), "secops".to_owned())]),
        http: http_settings(5_000),
    }
}

/// A real Alertmanager takes the run's alert with the labels it routes on,
/// and merges a re-send and a later run of the same asset into that one
/// alert (its labels are the identity); another asset is another alert.
/// Read back with Alertmanager's own API, and seen on its webhook receiver.
#[tokio::test]
async fn a_real_alertmanager_holds_one_alert_per_asset_incident() {
    let dir = tempfile::tempdir().unwrap();
    let webhook = ReceiverStub::start(Answer::Ok).await.unwrap();
    let alertmanager = Alertmanager::start(&webhook.receiver_url()).await.unwrap();
    let notifier =
        AlertmanagerNotifier::new(&alertmanager_config(dir.path(), &alertmanager.url())).unwrap();

    let first = notification(vec![xz()]);
    assert_eq!(notifier.send(&first).await.unwrap(), "HTTP 200");
    notifier.send(&resent(&first)).await.unwrap();
    notifier.send(&later_run()).await.unwrap();
    let alerts = alertmanager.alerts().await.unwrap();
    assert_eq!(
        alerts.len(),
        1,
        "a re-send and a later run merge: {alerts:#?}"
    );
    let alert = &alerts[0];
    assert_eq!(
        alert["labels"],
        json!({"alertname": ALERT_NAME, "namespace": "team-a", "asset": "web-1",
               "severity": "critical", "team": "secops"}),
        "CVSS 10.0 is critical (CVSS v3.1 qualitative rating: 9.0-10.0)"
    );
    assert_eq!(alert["status"]["state"], "active");
    let annotations = &alert["annotations"];
    assert_eq!(
        annotations["ticket"], "web-1/run-8",
        "the latest run's words"
    );
    assert_eq!(annotations["fencing_token"], "43");
    assert_eq!(annotations["assetscan"], "web-1-scan");
    assert_eq!(annotations["uid"], "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11");
    assert_eq!(
        annotations["summary"],
        "High risk on web-1: 1 findings, max CVSS 10.0"
    );
    let ends: k8s_openapi::jiff::Timestamp = alert["endsAt"].as_str().unwrap().parse().unwrap();
    let left = ends.duration_since(k8s_openapi::jiff::Timestamp::now());
    assert!(
        left > k8s_openapi::jiff::SignedDuration::from_hours(23),
        "activeFor defaults to 24h: {left}"
    );

    let other = Notification {
        asset: "db-1".into(),
        ticket_id: "db-1/run-1".into(),
        ..notification(vec![xz()])
    };
    notifier.send(&other).await.unwrap();
    let alerts = alertmanager.alerts().await.unwrap();
    let mut assets: Vec<&str> = alerts
        .iter()
        .map(|a| a["labels"]["asset"].as_str().unwrap())
        .collect();
    assets.sort();
    assert_eq!(assets, ["db-1", "web-1"]);

    // Alertmanager routed them: its webhook receiver was told of both
    // groups (grouped by namespace and asset), firing.
    let told = until_some("Alertmanager notifies both groups", PATIENCE, async || {
        let groups: Vec<Value> = (webhook.received().into_iter())
            .map(|r| r.body)
            .filter(|b| b["status"] == "firing")
            .collect();
        let mut assets: Vec<String> = (groups.iter())
            .map(|g| {
                g["groupLabels"]["asset"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        assets.sort();
        assets.dedup();
        (assets == ["db-1", "web-1"]).then_some(groups)
    })
    .await;
    let web = told
        .iter()
        .find(|g| g["groupLabels"]["asset"] == "web-1")
        .unwrap();
    assert_eq!(web["alerts"].as_array().unwrap().len(), 1, "{web:#}");
    assert_eq!(web["commonLabels"]["namespace"], "team-a");

    // A clean run resolves web-1's alert, whatever its severity was: it is
    // no longer active, and Alertmanager tells its receiver it resolved.
    // db-1's stays.
    assert_eq!(
        notifier.resolve(&resolution("web-1")).await.unwrap(),
        "HTTP 200"
    );
    let alerts = alertmanager.alerts().await.unwrap();
    let active: Vec<&str> = (alerts.iter())
        .filter(|a| a["status"]["state"] == "active")
        .map(|a| a["labels"]["asset"].as_str().unwrap())
        .collect();
    assert_eq!(active, ["db-1"]);
    let resolved = until_some(
        "Alertmanager tells of the resolution",
        PATIENCE,
        async || webhook.alertmanager_told("resolved", "web-1"),
    )
    .await;
    let alert = &resolved["alerts"][0];
    assert_eq!(alert["labels"]["severity"], "critical", "the alert raised");
    assert_eq!(alert["status"], "resolved");
}

/// What a clean run of web-1 in team-a says to the channels that resolve.
fn resolution(asset: &str) -> Resolution {
    Resolution {
        asset: asset.into(),
        ticket_id: format!("{asset}/run-9"),
        fencing_token: 44,
        origin: notification(vec![]).origin,
    }
}

/// Every event validates against PagerDuty's published OpenAPI document,
/// whose checker is first shown refusing an event it must refuse. The
/// `dedup_key` names the asset's incident: a re-send and a later run of
/// the asset carry the same key, so PagerDuty folds them into one alert.
#[tokio::test]
async fn pagerduty_events_match_the_published_schema_and_share_the_incidents_key() {
    let dir = tempfile::tempdir().unwrap();
    let stub = ReceiverStub::start(Answer::PagerDuty).await.unwrap();
    let config = PagerDutyConfig {
        routing_key_from: secret_file(dir.path(), "pd", "e93facc04764012d7bfb002500d5d1a6"),
        url: Some(stub.receiver_url()),
        http: http_settings(5_000),
    };
    let notifier = PagerDutyNotifier::new(&config).unwrap();
    let first = notification(vec![xz()]);
    assert_eq!(notifier.send(&first).await.unwrap(), "HTTP 202");
    notifier.send(&resent(&first)).await.unwrap();
    notifier.send(&later_run()).await.unwrap();
    let events: Vec<Value> = stub.received().into_iter().map(|r| r.body).collect();
    assert_eq!(events.len(), 3);

    let schema = schema(PAGERDUTY_SCHEMA);
    let mut wrong = events[0].clone();
    wrong["payload"]["severity"] = "high".into();
    let mut no_action = events[0].clone();
    no_action.as_object_mut().unwrap().remove("event_action");
    let verdicts = validate(&schema, PAGERDUTY_EVENT, &[wrong, no_action])
        .await
        .unwrap();
    assert!(
        verdicts.iter().all(|v| v != "ok"),
        "the checker refuses: {verdicts:?}"
    );
    let verdicts = validate(&schema, PAGERDUTY_EVENT, &events).await.unwrap();
    assert_eq!(verdicts, ["ok", "ok", "ok"]);

    for event in &events {
        assert_eq!(event["event_action"], "trigger");
        assert_eq!(event["routing_key"], "e93facc04764012d7bfb002500d5d1a6");
        assert_eq!(event["dedup_key"], "assetscan/team-a/web-1");
        assert_eq!(event["payload"]["severity"], "critical");
        assert_eq!(event["payload"]["source"], "web-1");
        assert_eq!(event["payload"]["group"], "team-a");
        assert_eq!(event["payload"]["component"], "web-1-scan");
        let details = &event["payload"]["custom_details"];
        assert_eq!(
            details["origin"]["uid"],
            "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11"
        );
    }
    assert_eq!(
        events[0]["payload"]["custom_details"]["ticket"],
        "web-1/run-7"
    );
    assert_eq!(events[2]["payload"]["custom_details"]["fencing_token"], 43);

    // A clean run resolves the incident under the same key, in the
    // documented shape.
    assert_eq!(
        notifier.resolve(&resolution("web-1")).await.unwrap(),
        "HTTP 202"
    );
    let resolve = stub.received().last().unwrap().body.clone();
    assert_eq!(
        resolve,
        json!({"routing_key": "e93facc04764012d7bfb002500d5d1a6", "event_action": "resolve",
               "dedup_key": "assetscan/team-a/web-1"})
    );
    let verdicts = validate(&schema, PAGERDUTY_EVENT, &[resolve])
        .await
        .unwrap();
    assert_eq!(verdicts, ["ok"]);

    // PagerDuty cuts `summary` at 1024 characters: the event never needs it to.
    let long = Notification {
        asset: "a".repeat(128),
        ..notification(vec![xz()])
    };
    notifier.send(&long).await.unwrap();
    let summary = stub.received().last().unwrap().body["payload"]["summary"].clone();
    assert!(summary.as_str().unwrap().chars().count() <= 1024);
}

/// The Teams message carries one Adaptive Card that validates against the
/// published schema (its checker first shown refusing a broken card), with
/// the run's identity as facts and an advisory's words kept from becoming
/// a link.
#[tokio::test]
async fn the_teams_card_matches_the_adaptive_card_schema() {
    let dir = tempfile::tempdir().unwrap();
    let stub = ReceiverStub::start(Answer::Accepted).await.unwrap();
    let config = TeamsConfig {
        url_from: secret_file(dir.path(), "teams", &stub.receiver_url()),
        http: http_settings(5_000),
    };
    let notifier = TeamsNotifier::new(&config).unwrap();
    let lure = Finding {
        summary: "see [the fix](https://evil.example/x) **now**".into(),
        ..xz()
    };
    assert_eq!(
        notifier
            .send(&resent(&notification(vec![lure])))
            .await
            .unwrap(),
        "HTTP 202"
    );
    let message = stub.received().remove(0).body;
    assert_eq!(message["type"], "message");
    let attachment = &message["attachments"][0];
    assert_eq!(
        attachment["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    let card = attachment["content"].clone();
    assert_eq!(card["version"], CARD_VERSION);

    let schema = schema(ADAPTIVE_CARD_SCHEMA);
    let mut broken = card.clone();
    broken["body"][0]["type"] = "TextBlok".into();
    let mut no_facts = card.clone();
    no_facts["body"][1]["facts"][0] = json!({"title": "Asset"});
    let verdicts = validate(&schema, "", &[broken, no_facts]).await.unwrap();
    assert!(
        verdicts.iter().all(|v| v != "ok"),
        "the checker refuses: {verdicts:?}"
    );
    assert_eq!(
        validate(&schema, "", std::slice::from_ref(&card))
            .await
            .unwrap(),
        ["ok"]
    );

    let facts: BTreeMap<String, String> = (card["body"][1]["facts"].as_array().unwrap().iter())
        .map(|f| {
            (
                f["title"].as_str().unwrap().to_owned(),
                f["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(facts["Asset"], "web-1");
    assert_eq!(facts["Requested by"], "team-a/web-1-scan");
    assert_eq!(facts["UID"], "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11");
    assert_eq!(facts["Ticket"], "web-1/run-7");
    assert_eq!(facts["Fencing token"], "42");
    assert!(
        facts["Re-sent"].starts_with("re-sent: may repeat"),
        "{facts:?}"
    );
    let text = card.to_string();
    assert!(
        !text.contains("](") && !text.contains("https://") && !text.contains("**"),
        "{text}"
    );
}

/// Both modes of the HTTP binding, read by the CloudEvents SDK: the
/// attributes the specification requires, `id` the ticket id (a re-send is
/// the same event), the data the webhook's body. The SDK is first shown
/// refusing a request that is no event.
#[tokio::test]
async fn cloudevents_in_both_modes_are_read_by_the_sdk() {
    let dir = tempfile::tempdir().unwrap();
    let mut receiver = CloudEventsReceiver::start().await.unwrap();
    let refused = reqwest::Client::new()
        .post(receiver.url())
        .header("ce-specversion", "1.0")
        .header("ce-type", EVENT_TYPE)
        .json(&json!({"no": "id, no source"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert!(receiver.next().await.unwrap()["refused"].is_string());

    // A source with characters the binding percent-encodes in a header,
    // and an asset id outside ASCII.
    let n = Notification {
        asset: "网站-1".into(),
        ticket_id: "网站-1/run-7".into(),
        ..notification(vec![xz()])
    };
    for mode in [CloudEventsMode::Binary, CloudEventsMode::Structured] {
        let config = CloudEventsConfig {
            url_from: secret_file(dir.path(), "bus", &receiver.url()),
            mode,
            source: Some("//prod-eu/100%".into()),
            http: http_settings(5_000),
        };
        let notifier = CloudEventsNotifier::new(&config).unwrap();
        assert_eq!(notifier.send(&n).await.unwrap(), "HTTP 202");
        notifier.send(&resent(&n)).await.unwrap();
        let events = [
            receiver.next().await.unwrap(),
            receiver.next().await.unwrap(),
        ];
        for event in &events {
            let expected_mode = match mode {
                CloudEventsMode::Binary => "binary",
                CloudEventsMode::Structured => "structured",
            };
            assert_eq!(event["mode"], expected_mode, "{event:#}");
            let a = &event["attributes"];
            assert_eq!(a["specversion"], "1.0");
            assert_eq!(a["id"], "网站-1/run-7");
            assert_eq!(
                a["source"],
                "//prod-eu/100%/namespaces/team-a/assetscans/web-1-scan"
            );
            assert_eq!(a["type"], EVENT_TYPE);
            assert_eq!(a["subject"], "网站-1");
            assert_eq!(a["datacontenttype"], "application/json");
            assert_eq!(a["fencingtoken"].to_string().trim_matches('"'), "42");
            let time: Result<k8s_openapi::jiff::Timestamp, _> = a["time"].as_str().unwrap().parse();
            assert!(time.is_ok(), "an RFC 3339 time: {a}");
            assert_eq!(event["data"], serde_json::to_value(&n).unwrap());
        }
        assert_eq!(
            events[0]["attributes"]["id"], events[1]["attributes"]["id"],
            "a re-send is the same event"
        );
    }
}

/// A receiver's 4xx is permanent (the run records it, no retry storm); 429
/// and 5xx are retried, for every new kind.
#[tokio::test]
async fn four_hundreds_are_permanent_and_five_hundreds_are_retried() {
    let dir = tempfile::tempdir().unwrap();
    let stub = ReceiverStub::start(Answer::Accepted).await.unwrap();
    let url = stub.receiver_url();
    let n = notification(vec![xz()]);
    let fail_next = |status: u16| {
        stub.faults().fail_next(
            1,
            Fault::Reply {
                status,
                headers: vec![],
                body: b"{\"status\":\"invalid event\"}".to_vec(),
            },
        )
    };
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        json!({"file": path})
    };
    let (receiver, alertmanager) = (file("u", &url), file("am", &stub.url()));
    let key = file("k", "e93facc04764012d7bfb002500d5d1a6");
    let configs = [
        json!({"kind": "teams", "urlFrom": receiver}),
        json!({"kind": "pagerduty", "routingKeyFrom": key, "url": url}),
        json!({"kind": "cloudevents", "urlFrom": receiver}),
        // Alertmanager's path is fixed under its base URL.
        json!({"kind": "alertmanager", "urlFrom": alertmanager}),
    ];
    for config in configs {
        let kind = config["kind"].clone();
        let config: NotifierConfig = serde_json::from_value(config).unwrap();
        let notifier = Notifier::from_config(&config).unwrap();
        for (status, retryable) in [(400, false), (404, false), (429, true), (503, true)] {
            fail_next(status);
            let err = notifier.send(&n).await.unwrap_err();
            assert_eq!(err.is_retryable(), retryable, "{kind} {status}: {err}");
            assert!(
                err.summary().contains(&status.to_string()),
                "{kind}: {}",
                err.summary()
            );
            assert!(
                !err.summary().contains("invalid event"),
                "the receiver's words stay in the log"
            );
        }
    }
}

/// A channel under the egress policy (a team's) dials no address the
/// policy refuses, whether its URL names the address or a host that
/// resolves to it (checked at the connection, so a name cannot change its
/// answer after a check); the refusal is permanent and names the rule.
#[tokio::test]
async fn a_guarded_channel_dials_no_address_the_policy_refuses() {
    use assetscan_operator::providers::egress::{EgressConfig, EgressPolicy};
    use assetscan_operator::providers::http::EgressGuard;
    use assetscan_testkit::listener::dialled_before;

    let dir = tempfile::tempdir().unwrap();
    let inside = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = inside.local_addr().unwrap().port();
    let policy = EgressPolicy::new(&EgressConfig::default()).unwrap();
    let guard = EgressGuard::new(std::sync::Arc::new(policy));
    for url in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
    ] {
        let config = TeamsConfig {
            url_from: secret_file(dir.path(), "u", &url),
            http: HttpSettings {
                egress: Some(guard.clone()),
                ..http_settings(5_000)
            },
        };
        let err = TeamsNotifier::new(&config)
            .unwrap()
            .send(&notification(vec![xz()]))
            .await
            .unwrap_err();
        assert!(!err.is_retryable(), "{url}: {err}");
        assert!(
            err.summary().contains("rule loopback (127.0.0.0/8)")
                || err.summary().contains("rule loopback (::1/128)"),
            "{url}: {}",
            err.summary()
        );
    }
    assert!(!dialled_before(&inside).await.unwrap(), "never dialled");

    // The same client without the guard reaches it: the refusal above is
    // the policy's, not the address's.
    let sink = ReceiverStub::start(Answer::Accepted).await.unwrap();
    let open = TeamsConfig {
        url_from: secret_file(dir.path(), "u", &sink.receiver_url()),
        http: http_settings(5_000),
    };
    let sent = TeamsNotifier::new(&open)
        .unwrap()
        .send(&notification(vec![xz()]))
        .await;
    assert_eq!(sent.unwrap(), "HTTP 202");
}
