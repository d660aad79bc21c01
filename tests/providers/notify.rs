use super::*;

pub(super) fn notification(findings: Vec<Finding>) -> Notification {
    Notification {
        ticket_id: "web-1/run-7".into(),
        asset: "web-1".into(),
        run: "run-7".into(),
        fencing_token: 42,
        risk: RiskFacts {
            high_risk: true,
            reasons: vec!["UBUNTU-CVE-2024-3094 (CVE-2024-3094) CVSS 10.0 >= 7.0".into()],
            confirmed_at: None,
        },
        vulnerabilities: VulnFacts {
            total: findings.len() as u32,
            max_cvss: findings.iter().filter_map(|f| f.cvss).reduce(f64::max),
            findings,
            ..VulnFacts::default()
        }
        .into(),
        threat_intel: None,
        origin: Some(Origin {
            namespace: "team-a".into(),
            name: "web-1-scan".into(),
            uid: "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11".into(),
        }),
        resend: None,
    }
}

/// What every channel says of who asked.
const ORIGIN_LINE: &str =
    "requested by team-a/web-1-scan, uid 0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11";

pub(super) fn xz() -> Finding {
    Finding {
        id: "UBUNTU-CVE-2024-3094".into(),
        cves: vec!["CVE-2024-3094".into()],
        package: "Ubuntu:22.04:LTS/xz-utils@5.2.5".into(),
        cvss: Some(10.0),
        severity: Severity::Critical,
        summary: "xz-utils backdoor".into(),
    }
}

/// Standard Webhooks secrets: `whsec_` + base64 of 24 or more bytes.
const RIGHT_SECRET: &str = "whsec_dGhlLXJpZ2h0LXNlY3JldC0yNGJ5dGVz";
const WRONG_SECRET: &str = "whsec_dGhlLXdyb25nLXNlY3JldC0yNGJ5dGVz";

fn webhook_config(dir: &Path, url: &str, secret: &str, legacy: bool) -> WebhookConfig {
    WebhookConfig {
        url_from: secret_file(dir, "url", url),
        secret_from: secret_file(dir, "hmac", secret),
        additional_secrets_from: Vec::new(),
        legacy_signature: legacy,
        legacy_secret_from: None,
        http: http_settings(1_000),
    }
}

fn webhook(dir: &Path, url: &str, secret: &str) -> WebhookNotifier {
    WebhookNotifier::new(&webhook_config(dir, url, secret, false)).unwrap()
}

#[tokio::test]
async fn webhook_is_signed_and_deduplicated_by_the_receiver() {
    let dir = tempfile::tempdir().unwrap();
    let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
    let notifier = webhook(dir.path(), &sink.hook_url(), RIGHT_SECRET);
    let n = notification(vec![xz()]);

    let receipt = notifier.send(&n).await.unwrap();
    assert!(receipt.starts_with("HTTP 200"), "{receipt}");
    notifier.send(&n).await.unwrap(); // a takeover re-sends with the same key

    assert_eq!(sink.rejected(), 0, "signatures verified");
    let deliveries = sink.deliveries();
    assert_eq!(deliveries.len(), 2);
    assert_eq!(sink.effects(), 1, "one effect at an idempotent receiver");
    let d = &deliveries[0];
    assert_eq!(d.header("Idempotency-Key"), Some("web-1/run-7"));
    assert_eq!(d.header("X-AssetScan-Ticket"), Some("web-1/run-7"));
    assert_eq!(d.header("X-AssetScan-Fencing-Token"), Some("42"));
    // The re-send is the same message: the same webhook-id.
    for d in &deliveries {
        assert_eq!(d.header("webhook-id"), Some("web-1/run-7"));
        let timestamp: u64 = d.header("webhook-timestamp").unwrap().parse().unwrap();
        assert!(timestamp > 1_700_000_000, "{timestamp}");
        assert_eq!(d.header("X-AssetScan-Signature"), None, "legacy is opt-in");
    }
    assert_eq!(d.json()["ticket_id"], "web-1/run-7");
    assert_eq!(
        d.json()["origin"],
        serde_json::json!({"namespace": "team-a", "name": "web-1-scan",
            "uid": "0b7c6a52-3d1e-4f59-9a51-2f1c7d0e9b11"}),
        "who asked, under the signature the sink verified"
    );
    assert_eq!(
        d.json()["vulnerabilities"]["findings"][0]["severity"],
        "CRITICAL"
    );
    assert!(!deliveries[1].new_effect);
}

/// The webhook's signature as a receiver checks it with the Standard
/// Webhooks library: the receiver of docs/security.md (`examples/webhook-receiver`),
/// a real Python process, over real HTTP. It accepts the operator's
/// delivery, dedups a re-send by its `webhook-id`, and refuses a captured
/// delivery replayed past its tolerance and one whose id, timestamp or
/// body was changed.
mod standard_webhooks {
    use super::*;
    use assetscan_testkit::stubs::Delivery;
    use assetscan_testkit::webhook_receiver::WebhookReceiver;

    /// `whsec_` + base64 of 32 random bytes, as the specification asks.
    const SECRET: &str = "whsec_q0rCt0dOwnjFkUaKbSZ/1QGh3EzGNA8gQsoN2U2bDDE=";

    /// Sends `delivery` again, with `change` applied to its headers and body:
    /// what an attacker who captured it can do. The receiver's status and
    /// answer.
    async fn replay(
        url: &str,
        delivery: &Delivery,
        change: impl FnOnce(&mut Vec<(String, String)>, &mut Vec<u8>),
    ) -> (u16, String) {
        let mut headers: Vec<(String, String)> =
            ["webhook-id", "webhook-timestamp", "webhook-signature"]
                .iter()
                .map(|name| (name.to_string(), delivery.header(name).unwrap().to_owned()))
                .collect();
        let mut body = delivery.body.clone();
        change(&mut headers, &mut body);
        let request = headers.into_iter().fold(
            reqwest::Client::new().post(url).body(body),
            |request, (name, value)| request.header(name, value),
        );
        let answer = request.send().await.unwrap();
        (answer.status().as_u16(), answer.text().await.unwrap())
    }

    /// A change to a captured delivery's headers and body.
    type Change = dyn FnOnce(&mut Vec<(String, String)>, &mut Vec<u8>);

    fn set(headers: &mut [(String, String)], name: &str, value: String) {
        for (n, v) in headers.iter_mut() {
            if n == name {
                *v = value.clone();
            }
        }
    }

    #[tokio::test]
    async fn a_standard_webhooks_library_accepts_deliveries_and_refuses_replays_and_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let mut receiver = WebhookReceiver::start(SECRET, None).await.unwrap();
        // The same receiver, its clock six minutes ahead: the library's
        // tolerance is five.
        let mut later = WebhookReceiver::start(SECRET, Some("+6m")).await.unwrap();

        // The operator's delivery is accepted.
        let receipt = webhook(dir.path(), &receiver.url(), SECRET)
            .send(&notification(vec![xz()]))
            .await
            .unwrap();
        assert_eq!(receipt, "HTTP 200");
        assert_eq!(receiver.next_line().await.unwrap(), "accepted web-1/run-7");
        let acted = receiver.next_line().await.unwrap();
        assert!(acted.starts_with("high risk on web-1"), "{acted}");

        // A re-send of the same notification (captured here by the sink) keeps
        // its webhook-id: the receiver acknowledges it and does not act again.
        let sink = WebhookSink::start(SECRET).await.unwrap();
        webhook(dir.path(), &sink.hook_url(), SECRET)
            .send(&notification(vec![xz()]))
            .await
            .unwrap();
        let captured = sink.deliveries().remove(0);
        assert_eq!(captured.header("webhook-id"), Some("web-1/run-7"));
        let (status, answer) = replay(&receiver.url(), &captured, |_, _| ()).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(receiver.next_line().await.unwrap(), "duplicate web-1/run-7");

        // Past the tolerance, the captured delivery is refused.
        let (status, answer) = replay(&later.url(), &captured, |_, _| ()).await;
        assert_eq!(
            (status, answer.contains("too old")),
            (401, true),
            "{answer}"
        );
        assert_eq!(
            later.next_line().await.unwrap(),
            "refused: Message timestamp too old"
        );

        // A changed id, timestamp or body no longer matches the signature.
        let timestamp: u64 = captured
            .header("webhook-timestamp")
            .unwrap()
            .parse()
            .unwrap();
        let tampered: [(&str, Box<Change>); 3] = [
            (
                "id",
                Box::new(|h, _| set(h, "webhook-id", "web-1/run-8".into())),
            ),
            (
                "timestamp",
                Box::new(move |h, _| set(h, "webhook-timestamp", (timestamp + 60).to_string())),
            ),
            (
                "body",
                Box::new(|_, b| {
                    *b = String::from_utf8_lossy(b)
                        .replace("web-1", "web-2")
                        .into_bytes()
                }),
            ),
        ];
        for (what, change) in tampered {
            let (status, answer) = replay(&receiver.url(), &captured, change).await;
            assert_eq!(status, 401, "tampered {what}: {answer}");
            assert_eq!(
                receiver.next_line().await.unwrap(),
                "refused: No matching signature found",
                "tampered {what}"
            );
        }
    }

    /// The secret a rotation moves to.
    const NEXT_SECRET: &str = "whsec_0f23ckyjk8jDSS4E7xGApW4PzXFNm5WMzS3NvvwbsEM=";

    /// A rotation: the channel signs with the current and the next
    /// secret, and the library accepts the delivery with either one.
    /// An upgrade from 0.1.0: the receiver holding both secrets accepts
    /// a delivery signed only as 0.1.0 signs and one signed only as
    /// Standard Webhooks; one holding only the new secret refuses the
    /// first, and one holding only 0.1.0's refuses a tampered body.
    #[tokio::test]
    async fn the_receiver_accepts_a_rotation_and_both_schemes_during_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let rotating = |url: &str| WebhookConfig {
            additional_secrets_from: vec![secret_file(d, "next", NEXT_SECRET)],
            ..webhook_config(d, url, SECRET, false)
        };
        for held in [SECRET, NEXT_SECRET] {
            let mut receiver = WebhookReceiver::start(held, None).await.unwrap();
            let receipt = WebhookNotifier::new(&rotating(&receiver.url()))
                .unwrap()
                .send(&notification(vec![xz()]))
                .await
                .unwrap();
            assert_eq!(receipt, "HTTP 200");
            assert_eq!(receiver.next_line().await.unwrap(), "accepted web-1/run-7");
        }

        let old_way = |url: &str| webhook_config(d, url, "the-0.1.0-secret", true);
        let both = SinkKeys {
            standard: Some(SECRET),
            legacy: Some("the-0.1.0-secret"),
        };
        let mut receiver = WebhookReceiver::start_with(both, None).await.unwrap();
        WebhookNotifier::new(&old_way(&receiver.url()))
            .unwrap()
            .send(&notification(vec![xz()]))
            .await
            .unwrap();
        assert_eq!(receiver.next_line().await.unwrap(), "accepted web-1/run-7");
        receiver.next_line().await.unwrap(); // what it acted on
        webhook(d, &receiver.url(), SECRET)
            .send(&notification(vec![xz()]))
            .await
            .unwrap();
        assert_eq!(receiver.next_line().await.unwrap(), "duplicate web-1/run-7");

        let mut new_only = WebhookReceiver::start(SECRET, None).await.unwrap();
        let err = WebhookNotifier::new(&old_way(&new_only.url()))
            .unwrap()
            .send(&notification(vec![xz()]))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, NotifyError::Http(e) if e.status() == Some(401)),
            "{err}"
        );
        assert_eq!(
            new_only.next_line().await.unwrap(),
            "refused: Missing required headers"
        );

        // 0.1.0's signature covers the body: a changed body is refused.
        let sink = WebhookSink::start_with(SinkKeys {
            standard: None,
            legacy: Some("the-0.1.0-secret"),
        })
        .await
        .unwrap();
        WebhookNotifier::new(&old_way(&sink.hook_url()))
            .unwrap()
            .send(&notification(vec![xz()]))
            .await
            .unwrap();
        let captured = sink.deliveries().remove(0);
        let old_only = SinkKeys {
            standard: None,
            legacy: Some("the-0.1.0-secret"),
        };
        let mut receiver = WebhookReceiver::start_with(old_only, None).await.unwrap();
        let body = String::from_utf8_lossy(&captured.body).replace("web-1", "web-2");
        let answer = reqwest::Client::new()
            .post(receiver.url())
            .header(
                "X-AssetScan-Signature",
                captured.header("X-AssetScan-Signature").unwrap(),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 401);
        assert_eq!(
            receiver.next_line().await.unwrap(),
            "refused: No matching 0.1.0 signature"
        );
    }
}

#[tokio::test]
async fn webhook_with_the_wrong_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
    let err = webhook(dir.path(), &sink.hook_url(), WRONG_SECRET)
        .send(&notification(vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, NotifyError::Http(e) if e.status() == Some(401)),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert_eq!((sink.rejected(), sink.effects()), (1, 0));
}

#[tokio::test]
async fn legacy_signature_is_sent_only_when_set() {
    let dir = tempfile::tempdir().unwrap();
    let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
    let config = webhook_config(dir.path(), &sink.hook_url(), RIGHT_SECRET, true);
    WebhookNotifier::new(&config)
        .unwrap()
        .send(&notification(vec![xz()]))
        .await
        .unwrap();
    let d = &sink.deliveries()[0];
    assert!(signature_is_valid(
        RIGHT_SECRET.as_bytes(),
        &d.body,
        d.header("X-AssetScan-Signature")
    ));
    assert_eq!(
        d.header("X-AssetScan-Timestamp"),
        d.header("webhook-timestamp")
    );
}

/// 0.1.0's secret, as a 0.1.0 configuration holds it: any text.
const SECRET_OF_0_1_0: &str = "s3cr3t-of-the-0.1.0-receiver";

/// What a receiver of each kind answers one delivery of `config`'s:
/// one verifying 0.1.0's signature with 0.1.0's secret, one verifying
/// Standard Webhooks with RIGHT_SECRET.
async fn accepted_by(config: impl Fn(&str) -> WebhookConfig) -> (bool, bool) {
    let mut accepted = Vec::new();
    for keys in [
        SinkKeys {
            standard: None,
            legacy: Some(SECRET_OF_0_1_0),
        },
        SinkKeys {
            standard: Some(RIGHT_SECRET),
            legacy: None,
        },
    ] {
        let sink = WebhookSink::start_with(keys).await.unwrap();
        let sent = WebhookNotifier::new(&config(&sink.hook_url()))
            .unwrap()
            .send(&notification(vec![xz()]))
            .await;
        assert_eq!(sent.is_ok(), sink.effects() == 1, "{sent:?}");
        accepted.push(sent.is_ok());
    }
    (accepted[0], accepted[1])
}

/// The upgrade from 0.1.0: its configuration with `legacySignature: true`
/// signs as 0.1.0 did, so the receiver of 0.1.0 accepts this release's
/// deliveries during the roll; `legacySecretFrom` beside a `whsec_`
/// secret sends both, so either receiver accepts them, and the receiver
/// may switch at any moment; without legacy, only the new receiver does.
#[tokio::test]
async fn each_receiver_accepts_the_scheme_it_verifies_during_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old_way = |url: &str| webhook_config(d, url, SECRET_OF_0_1_0, true);
    assert_eq!(accepted_by(old_way).await, (true, false));
    let both = |url: &str| WebhookConfig {
        legacy_secret_from: Some(secret_file(d, "old", SECRET_OF_0_1_0)),
        ..webhook_config(d, url, RIGHT_SECRET, true)
    };
    assert_eq!(accepted_by(both).await, (true, true));
    let new_way = |url: &str| webhook_config(d, url, RIGHT_SECRET, false);
    assert_eq!(accepted_by(new_way).await, (false, true));
}

#[test]
fn a_secret_outside_the_specification_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = WebhookNotifier::new(&webhook_config(
        dir.path(),
        "http://127.0.0.1:9/hook",
        "plain-text-secret-of-old",
        false,
    ))
    .unwrap_err()
    .to_string();
    assert!(err.contains("whsec_"), "{err}");
    assert!(!err.contains("plain-text-secret-of-old"), "{err}");
}

#[tokio::test]
async fn secrets_never_show_in_errors_or_debug() {
    let dir = tempfile::tempdir().unwrap();
    // The secret: whsec_ + base64 of "hmac-SECRET-1-of-24-bytes".
    let hook_secret = "whsec_aG1hYy1TRUNSRVQtMS1vZi0yNC1ieXRlcw==";
    let sink = WebhookSink::start(hook_secret).await.unwrap();
    let url = format!("{}?token=URL-SECRET-2", sink.hook_url());
    let notifier = webhook(dir.path(), &url, hook_secret);
    sink.faults().fail_next(1, Fault::Status(503));
    let unavailable = notifier.send(&notification(vec![])).await.unwrap_err();
    assert!(unavailable.is_retryable());
    sink.faults().always(Fault::Hang);
    let timeout = notifier.send(&notification(vec![])).await.unwrap_err();
    drop(sink);
    let refused = notifier.send(&notification(vec![])).await.unwrap_err();

    let wecom_stub = WeComStub::start("KEY-SECRET-3").await.unwrap();
    let wecom = WeComNotifier::new(&WeComConfig {
        key_from: secret_file(dir.path(), "wecom", "KEY-SECRET-3"),
        base_url: wecom_stub.url(),
        http: http_settings(1_000),
    })
    .unwrap();
    wecom_stub.faults().fail_next(1, Fault::Status(502));
    let wecom_err = wecom.send(&notification(vec![])).await.unwrap_err();

    let texts = [
        format!("{unavailable} {unavailable:?}"),
        format!("{timeout} {timeout:?}"),
        format!("{refused} {refused:?}"),
        format!("{wecom_err} {wecom_err:?}"),
        format!("{notifier:?} {wecom:?}"),
    ];
    for text in texts {
        for secret in ["aG1hYy1TRUNSRVQ", "SECRET-2", "SECRET-3", "/hook"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(text.contains("127.0.0.1"), "the host is shown: {text}");
    }
}

fn wecom(dir: &Path, stub: &WeComStub, key: &str) -> WeComNotifier {
    WeComNotifier::new(&WeComConfig {
        key_from: secret_file(dir, "wecom-key", key),
        base_url: stub.url(),
        http: http_settings(1_000),
    })
    .unwrap()
}

#[tokio::test]
async fn wecom_branches_on_errcode() {
    let dir = tempfile::tempdir().unwrap();
    let stub = WeComStub::start("the-key").await.unwrap();
    let robot = wecom(dir.path(), &stub, "the-key");
    let n = notification(vec![xz()]);

    assert_eq!(robot.send(&n).await.unwrap(), "errcode 0");
    let content = &stub.messages()[0];
    assert!(
        content.contains("web-1/run-7") && content.contains("UBUNTU-CVE-2024-3094"),
        "{content}"
    );
    assert!(content.contains(ORIGIN_LINE), "{content}");

    for (errcode, retryable) in [
        (45009, true),
        (-1, true),
        (93004, false),
        (93008, false),
        (44004, false),
    ] {
        stub.errcode_next(1, errcode);
        let err = robot.send(&n).await.unwrap_err();
        assert!(
            matches!(err, NotifyError::WeCom { errcode: e, .. } if e == errcode),
            "{err}"
        );
        assert_eq!(err.is_retryable(), retryable, "{errcode}");
    }
    // A wrong key: the robot's real "invalid webhook url" answer, HTTP 200.
    let err = wecom(dir.path(), &stub, "other-key")
        .send(&n)
        .await
        .unwrap_err();
    assert!(
        matches!(err, NotifyError::WeCom { errcode: 93000, .. }),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert!(!err.to_string().contains("other-key"));

    stub.faults().fail_next(1, Fault::Status(502));
    assert!(robot.send(&n).await.unwrap_err().is_retryable());
    stub.faults().fail_next(1, Fault::Malformed);
    assert!(!robot.send(&n).await.unwrap_err().is_retryable());
}

#[tokio::test]
async fn wecom_content_is_cut_to_4096_bytes_on_a_char_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let stub = WeComStub::start("k").await.unwrap();
    let many: Vec<Finding> = (0..80)
        .map(|i| Finding {
            id: format!("UBUNTU-CVE-2024-{i:04}"),
            summary: "严重漏洞：远程代码执行（后门）".repeat(12),
            ..xz()
        })
        .collect();
    wecom(dir.path(), &stub, "k")
        .send(&notification(many))
        .await
        .unwrap();
    let content = &stub.messages()[0];
    assert!(
        content.len() <= 4096 && content.len() > 4000,
        "{} bytes",
        content.len()
    );
    assert!(content.ends_with('…'));
    assert!(
        content.contains("web-1/run-7"),
        "the ticket id survives truncation"
    );
}

/// Markup a tenant (package strings) or a provider (OSV ids, summaries,
/// the reasons) could slip into a chat message: links, mentions,
/// formatting, entities, a new line that starts a heading or a quote.
const HOSTILE: &str = "<!channel> <@U024BE7LH> <@all> <https://evil.example/a|click> [click](https://evil.example/b) **bold** `code` &lt;@all&gt; <font color=\"info\">x</font>\n# heading\n> quote http://evil.example/c";

fn hostile_notification() -> Notification {
    let mut n = notification(vec![Finding {
        id: format!("OSV-1 {HOSTILE}"),
        cves: vec![format!("CVE-2024-1 {HOSTILE}")],
        package: format!("PyPI/{HOSTILE}@1.0"),
        cvss: Some(9.8),
        severity: Severity::Critical,
        summary: HOSTILE.into(),
    }]);
    n.risk.reasons = vec![format!("OSV-1 {HOSTILE} CVSS 9.8 >= 7.0")];
    n.threat_intel = Some(ThreatIntelFacts {
        known_exploited: vec![format!("CVE-2024-1 {HOSTILE}")],
        ..ThreatIntelFacts::default()
    });
    n
}

/// No link or mention from the hostile strings survives into what a
/// chat client renders, nor the channel's own `markup`.
fn assert_inert(channel: &str, rendered: &str, markup: &[&str]) {
    for live in ["<!", "<@", "<http", "p://", "s://"].iter().chain(markup) {
        assert!(
            !rendered.contains(live),
            "{channel}: {live:?} is live in {rendered}"
        );
    }
    assert!(
        rendered.contains("evil.example"),
        "{channel}: the text is kept: {rendered}"
    );
}

#[tokio::test]
async fn hostile_strings_stay_text_in_every_channel() {
    let dir = tempfile::tempdir().unwrap();
    let n = hostile_notification();

    let wecom_stub = WeComStub::start("KEY").await.unwrap();
    wecom(dir.path(), &wecom_stub, "KEY")
        .send(&n)
        .await
        .unwrap();
    let content = wecom_stub.messages().remove(0);
    // Only the template's markup is left: its heading, font tag, quote
    // and bold titles.
    let template = content
        .replacen("## <font color=\"warning\">", "", 1)
        .replacen("</font>\n> ", "\n", 1)
        .replacen("\n> requested by", "\nrequested by", 1)
        .replacen("\n> known exploited:", "\nknown exploited:", 1)
        .replace("**Why**", "")
        .replace("**Top findings**", "");
    let wecom_markup = [
        "](",
        "**bold",
        "`code",
        "&lt;",
        "<font color=\"info",
        "\n#",
        "\n>",
    ];
    assert_inert("wecom", &template, &wecom_markup);
    assert!(
        !template.contains('<') && !template.contains('['),
        "{template}"
    );

    let slack_stub = SlackStub::start().await.unwrap();
    slack(dir.path(), &slack_stub).send(&n).await.unwrap();
    let message = slack_stub.messages().remove(0);
    let mut texts = vec![message["text"].as_str().unwrap().to_owned()];
    for block in message["blocks"].as_array().unwrap() {
        texts.push(
            block["text"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        for element in block["elements"].as_array().into_iter().flatten() {
            texts.push(element["text"].as_str().unwrap().to_owned());
        }
    }
    let rendered = texts.join("\n");
    // Slack's own bold titles are the template's.
    let rendered = rendered
        .replace("*Why*", "")
        .replace("*Top findings*", "")
        .replace("*Known exploited:*", "");
    assert_inert("slack", &rendered, &["\n>", "\n&gt; quote"]);
    assert!(!rendered.contains('<'), "{rendered}");

    // The webhook's body is data, not markup: the strings arrive as
    // written, for the receiver to escape where it renders them.
    let sink = WebhookSink::start(RIGHT_SECRET).await.unwrap();
    webhook(dir.path(), &sink.hook_url(), RIGHT_SECRET)
        .send(&n)
        .await
        .unwrap();
    let body = sink.deliveries()[0].json();
    assert_eq!(body["vulnerabilities"]["findings"][0]["summary"], HOSTILE);
    assert_eq!(
        body["vulnerabilities"]["findings"][0]["package"],
        format!("PyPI/{HOSTILE}@1.0")
    );
}

/// A send that may repeat an earlier one says so on both chat
/// channels, with the first attempt's time when the ticket has it.
#[tokio::test]
async fn chat_channels_mark_a_resend_with_the_first_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let (slack_stub, wecom_stub) = (
        SlackStub::start().await.unwrap(),
        WeComStub::start("k").await.unwrap(),
    );
    let (hook, robot) = (
        slack(dir.path(), &slack_stub),
        wecom(dir.path(), &wecom_stub, "k"),
    );
    let first = notification(vec![xz()]);
    let resent = Notification {
        resend: Some(Resend {
            first_attempt_at: Some(1_765_000_000_000),
        }),
        ..first.clone()
    };
    let from_older = Notification {
        resend: Some(Resend {
            first_attempt_at: None,
        }),
        ..first.clone()
    };
    for n in [&first, &resent, &from_older] {
        hook.send(n).await.unwrap();
        robot.send(n).await.unwrap();
    }
    let slack = slack_stub.messages();
    let texts: Vec<&str> = slack.iter().map(|m| m["text"].as_str().unwrap()).collect();
    let wecom = wecom_stub.messages();
    let mark = "re-sent: may repeat the message first attempted at 2025-12-06T05:46:40Z";
    let unknown = "re-sent: may repeat an earlier message";
    for (channel, sent) in [
        ("slack", texts),
        ("wecom", wecom.iter().map(String::as_str).collect()),
    ] {
        assert!(!sent[0].contains("re-sent"), "{channel}: {}", sent[0]);
        assert!(sent[1].contains(mark), "{channel}: {}", sent[1]);
        assert!(sent[2].contains(unknown), "{channel}: {}", sent[2]);
    }
    // In Slack's blocks too, beside the ticket id.
    let context = slack[1]["blocks"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        context.contains(mark) && context.contains("web-1/run-7"),
        "{context}"
    );
}

fn slack(dir: &Path, stub: &SlackStub) -> SlackNotifier {
    SlackNotifier::new(&SlackConfig {
        url_from: secret_file(dir, "slack-url", &stub.webhook_url()),
        http: http_settings(1_000),
    })
    .unwrap()
}

#[tokio::test]
async fn slack_ok_rate_limits_and_plain_text_errors() {
    let dir = tempfile::tempdir().unwrap();
    let stub = SlackStub::start().await.unwrap();
    let hook = slack(dir.path(), &stub);
    let n = notification(vec![xz()]);

    assert_eq!(hook.send(&n).await.unwrap(), "ok");
    let message = &stub.messages()[0];
    assert!(message["text"].as_str().unwrap().contains("web-1/run-7"));
    assert!(message["text"].as_str().unwrap().contains(ORIGIN_LINE));
    let context = message["blocks"].as_array().unwrap().last().unwrap();
    assert_eq!(context["elements"][1]["text"], ORIGIN_LINE, "{message}");
    assert_eq!(message["blocks"][0]["type"], "header");

    stub.rate_limit_next(1, 7);
    let err = hook.send(&n).await.unwrap_err();
    assert!(err.is_retryable());
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));

    for (status, code, expected, retryable) in [
        (400, "invalid_payload", SlackError::InvalidPayload, false),
        (404, "channel_not_found", SlackError::ChannelNotFound, false),
        (
            410,
            "channel_is_archived",
            SlackError::ChannelIsArchived,
            false,
        ),
        (403, "invalid_token", SlackError::InvalidToken, false),
        (500, "rollup_error", SlackError::RollupError, true),
    ] {
        stub.reject_next(1, status, code);
        let err = hook.send(&n).await.unwrap_err();
        assert!(
            matches!(&err, NotifyError::Slack { status: s, code: c, .. } if *s == status && *c == expected),
            "{err}"
        );
        assert_eq!(err.is_retryable(), retryable, "{code}");
        assert!(!err.to_string().contains("XXXX"), "{err}");
    }
    // 200 with anything but `ok` is not a delivery.
    stub.faults().fail_next(1, Fault::WrongShape);
    assert!(matches!(
        hook.send(&n).await.unwrap_err(),
        NotifyError::Slack { status: 200, .. }
    ));
    assert_eq!(stub.messages().len(), 1);
}
