//! The ACL user of docs/redis.md, TLS with a private CA and client
//! certificates, and what a refusal looks like.

use super::*;

pub(super) const USER: &str = "assetscan";
pub(super) const PASSWORD: &str = "correct horse battery staple";
/// A package the stubs map to a critical finding (CVSS 10).
const XZ: &str = "Debian:10/xz-utils@5.2.4-1+deb10u1";

/// The `ACL SETUSER` line of docs/redis.md, with the test's password: what a
/// platform team copies is what is tested.
fn documented_acl_line() -> Vec<String> {
    let doc = std::fs::read_to_string(repo().join("docs/redis.md")).unwrap();
    let line = doc
        .lines()
        .find(|l| l.starts_with(&format!("ACL SETUSER {USER} ")))
        .expect("docs/redis.md documents the ACL line");
    line.split_whitespace()
        .map(|word| match word {
            ">CHANGE-ME" => format!(">{PASSWORD}"),
            other => other.to_owned(),
        })
        .collect()
}

/// The commands the documented line grants (`+get` → `get`).
fn documented_commands() -> Vec<String> {
    documented_acl_line()
        .iter()
        .filter_map(|w| w.strip_prefix('+'))
        .map(str::to_owned)
        .collect()
}

/// Creates the documented user on `server`, then applies `more` rules.
pub(super) fn create_acl_user(server: &RedisServer, more: &[&str]) {
    let mut line = documented_acl_line();
    line.extend(more.iter().map(|r| (*r).to_owned()));
    let args: Vec<&str> = line.iter().map(String::as_str).collect();
    server
        .command(&args)
        .expect("the documented ACL line is valid");
}

/// `redis://assetscan:<password>@127.0.0.1:<port>` (the password escaped).
fn user_url(server: &RedisServer) -> String {
    format!(
        "redis://{USER}:{}@127.0.0.1:{}",
        PASSWORD.replace(' ', "%20"),
        server.port()
    )
}

/// `assetscan-operator <args>` with the harness's config file, nothing
/// inherited from the test's environment, and `env`.
fn operator(h: &Harness, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
    let mut cmd = cli(&h.config_path, args);
    cmd.envs(env.iter().copied());
    cmd
}

/// A high-risk `scan` of `asset` (online through the inventory stub).
async fn high_risk_scan(h: &Harness, asset: &str, env: &[(&str, &str)]) -> std::process::Output {
    h.stubs.inventory.set_online(asset, true);
    let args = [
        "scan",
        "--asset",
        asset,
        "--inventory",
        asset,
        "--package",
        XZ,
        "--notify",
        "secops-webhook",
    ];
    operator(h, &args, env).output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `scan`'s exit code for a confirmed, notified high risk.
const EXIT_HIGH_RISK: i32 = 3;
/// Exit code of an error before or outside a scan (flags, config, Redis).
const EXIT_ERROR: i32 = 1;

/// The controller, `scan` and `ticket` as the documented ACL user: a high-risk
/// scan with the watchdog renewing its lock, the notification, the audit
/// history, the ticket list, and the deletion that retires the runs. No
/// reconcile fails and nothing is left in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_user_runs_the_whole_lifecycle() {
    let h = Harness::start().await;
    create_acl_user(&h.redis, &[]);
    let acl = h.online(scan("acl-01").high_risk());
    let asset = acl.spec.asset_id.as_str();
    // Slow enough for the watchdog to renew (every ttl/3 = 500 ms).
    h.stubs
        .osv
        .faults()
        .set_latency(Duration::from_millis(1200));
    let as_acl_user = RedisTarget::Standalone(user_url(&h.redis));
    let ctl = h.controller_on("ctl-acl", &as_acl_user).await;
    h.create(&acl).await;
    let done = h.wait_terminal("acl-01", PATIENCE).await;
    let s = done.status.as_ref().unwrap();
    assert_eq!(s.phase, Some(Status::Finished));
    assert_eq!(s.high_risk, Some(true));
    assert_eq!(h.stubs.sink.effects(), 1);
    assert!(
        ctl.store
            .watchdog()
            .stats()
            .renewals
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    h.stubs.osv.faults().set_latency(Duration::ZERO);

    let as_user = [
        ("REDIS_URL", format!("redis://127.0.0.1:{}", h.redis.port())),
        ("REDIS_USERNAME", USER.to_owned()),
        ("REDIS_PASSWORD", PASSWORD.to_owned()),
    ];
    let env: Vec<(&str, &str)> = as_user.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = high_risk_scan(&h, "acl-cli-01.dc1.example.com", &env).await;
    assert_eq!(
        out.status.code(),
        Some(EXIT_HIGH_RISK),
        "{}",
        text(&out.stderr)
    );
    let history = ["ticket", "history", "--asset", asset];
    let out = operator(&h, &history, &env).output().await.unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("FINISHED"),
        "{}",
        text(&out.stdout)
    );
    let out = operator(&h, &["ticket", "list"], &env)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("acl-cli-01"),
        "{}",
        text(&out.stdout)
    );

    h.api().delete("acl-01", &Default::default()).await.unwrap();
    h.wait_gone("acl-01").await;
    let left: Vec<String> = h
        .redis
        .query(redis::cmd("KEYS").arg(format!("asc:{{{asset}}}:ticket:*")))
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
    let failures: f64 = ["RedisUnavailable", "RedisConfig"]
        .iter()
        .map(|r| {
            ctl.counter(&format!(
                "assetscan_reconcile_failures_total{{reason=\"{r}\"}}"
            ))
        })
        .sum();
    assert_eq!(failures, 0.0, "no command was refused");
    ctl.stop().await;
}

/// Every store operation the operator performs, once: what the ACL must
/// allow (the controller's paths and the `ticket` commands').
async fn every_operation(store: &TicketStore, asset: &str) -> Result<(), StoreError> {
    let asset = AssetId::new(asset)?;
    store.ping().await?;
    assert!(store.get_ticket(&asset, "r1").await?.is_none());
    let claimed = claim(store, &asset, "r1").owner("owner").holder("h1");
    let claimed = claimed.try_acquire().await?;
    // Another holder meets the lock (the LOCKED reply carries its ttl).
    match store.acquire(&asset, "r1", "h2", 0).await {
        Err(StoreError::Locked { .. }) => {}
        Err(other) => return Err(other),
        Ok(_) => panic!("two holders at once"),
    }
    assert!(store.renew(&asset, "h1").await?);
    let online = Patch::default()
        .completes(Step::OnlineCheck)
        .fact(Fact::Online, true);
    claimed.try_advance(Status::AssetOnline, &online).await?;
    // The end of the run: the facts then live as long as the ticket.
    claimed
        .try_advance(Status::Failed, &Patch::default())
        .await?;
    assert!(store.release(&asset, &claimed.lease).await?);
    assert!(!store.audit(&asset, 100).await?.is_empty());
    let runs = store.runs(&asset).await?;
    assert_eq!(store.retire(&asset, "owner", &runs, "h1").await?, 1);
    // The replicas' membership: a heartbeat, then a graceful leave.
    let group = format!("acl-{asset}");
    let live = store
        .heartbeat(&group, "h1", Duration::from_secs(10))
        .await?;
    assert_eq!(live.len(), 1, "{live:?}");
    store.leave(&group, "h1").await?;
    Ok(())
}

/// The documented line is minimal: without any one of its commands some
/// operation of the operator fails, with an error that names the command
/// (the scripts are flushed before each try, so `SCRIPT LOAD` is needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_of_the_acl_line_is_needed() {
    let server = RedisServer::start().unwrap();
    create_acl_user(&server, &[]);
    let store = TicketStore::connect(
        &RedisTarget::Standalone(user_url(&server)),
        StoreConfig::default(),
    )
    .await
    .unwrap();
    // Terminal tickets kept until deleted: their facts are made persistent.
    let forever = TicketStore::connect(
        &RedisTarget::Standalone(user_url(&server)),
        StoreConfig {
            terminal_retention: Duration::ZERO,
            ..StoreConfig::default()
        },
    )
    .await
    .unwrap();
    let both = async |tag: &str| match every_operation(&store, tag).await {
        Ok(()) => every_operation(&forever, &format!("{tag}-forever")).await,
        Err(err) => Err(err),
    };
    both("all-granted")
        .await
        .expect("the documented line allows every operation");
    let commands = documented_commands();
    assert!(commands.contains(&"evalsha".to_owned()), "{commands:?}");
    for command in &commands {
        create_acl_user(&server, &[&format!("-{command}")]);
        server.command(&["SCRIPT", "FLUSH"]).unwrap();
        let err = both(&format!("without-{}", command.replace('|', "-")))
            .await
            .expect_err(&format!("{command} is needed"));
        // A command sent directly is named; one a script calls, by the
        // script and its line. Either way the reason and the remedy are said.
        let message = err.to_string();
        let named = message.contains(&format!("'{command}'"));
        let in_script = message.contains("@user_script:");
        assert!(
            (named || in_script) && message.contains("grant the ACL rules in docs/redis.md"),
            "without {command}: {message}"
        );
        assert_eq!(err.reason(), "RedisPermissionDenied", "{message}");
        assert!(!err.is_unavailable(), "{message}");
    }
    // The same refusal through the CLI: one line that says what is missing.
    create_acl_user(&server, &["-evalsha"]);
    let h = Harness::start().await;
    let url = format!("redis://127.0.0.1:{}", server.port());
    let env = [
        ("REDIS_URL", url.as_str()),
        ("REDIS_USERNAME", USER),
        ("REDIS_PASSWORD", PASSWORD),
    ];
    let out = high_risk_scan(&h, "cli-without-evalsha", &env).await;
    let error = the_one_error(&out, EXIT_ERROR);
    assert!(
        error.contains("'evalsha'") && error.contains("grant the ACL rules"),
        "{error}"
    );
}

/// A server with a TLS port that requires client certificates, and the
/// documented ACL user.
fn tls_server(files: &TlsFiles) -> RedisServer {
    let server = RedisServer::start_with(RedisOptions {
        tls: Some(ServerTls::from_files(files, true)),
        ..RedisOptions::default()
    })
    .expect("redis-server with TLS starts (Debian's build supports it)");
    create_acl_user(&server, &[]);
    server
}

/// Certificates, a TLS server with the ACL user, and a harness for the
/// stubs and the config.
async fn tls_setup() -> (TlsFiles, RedisServer, Harness) {
    let files = TlsFiles::generate().expect("openssl makes the certificates");
    let server = tls_server(&files);
    (files, server, Harness::start().await)
}

/// The flags of a production setup, as environment variables.
fn tls_env(server: &RedisServer, files: &TlsFiles) -> Vec<(&'static str, String)> {
    vec![
        ("REDIS_URL", server.tls_url().unwrap()),
        ("REDIS_USERNAME", USER.to_owned()),
        ("REDIS_PASSWORD", PASSWORD.to_owned()),
        ("REDIS_CA_FILE", files.ca().display().to_string()),
        ("REDIS_CERT_FILE", files.client_cert().display().to_string()),
        ("REDIS_KEY_FILE", files.client_key().display().to_string()),
    ]
}

/// `env` with `key` set to `value`, or removed.
fn with(
    env: &[(&'static str, String)],
    key: &'static str,
    value: Option<String>,
) -> Vec<(&'static str, String)> {
    let mut env: Vec<_> = env.iter().filter(|(k, _)| *k != key).cloned().collect();
    env.extend(value.map(|v| (key, v)));
    env
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// `rediss://` with a private CA, a client certificate (the server requires
/// one) and the ACL user: a full high-risk scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_over_tls_with_a_private_ca_a_client_certificate_and_the_acl_user() {
    let (files, server, h) = tls_setup().await;
    let env = tls_env(&server, &files);
    let out = high_risk_scan(&h, "tls-01.dc1.example.com", &borrowed(&env)).await;
    assert_eq!(
        out.status.code(),
        Some(EXIT_HIGH_RISK),
        "{}",
        text(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["status"], "FINISHED");
    let stored: Vec<String> = server
        .query(redis::cmd("KEYS").arg("asc:{tls-01.dc1.example.com}:ticket:*"))
        .unwrap();
    assert_eq!(stored.len(), 1, "the ticket is on the TLS server");
    assert_eq!(h.stubs.sink.effects(), 1);
}

/// A refusal at start-up is one attempt and one clear line, whatever the
/// cause: a CA that did not sign the server's certificate, no client
/// certificate for a server that requires one, a wrong password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_or_a_wrong_password_is_one_clear_error() {
    let (files, server, h) = tls_setup().await;
    let good = tls_env(&server, &files);
    let tls_target = format!("cannot connect to redis at {}", server.tls_url().unwrap());
    let cases = [
        (
            "untrusted CA",
            with(
                &good,
                "REDIS_CA_FILE",
                Some(files.other_ca().display().to_string()),
            ),
            vec![tls_target.as_str(), "UnknownIssuer"],
        ),
        (
            "the system's CAs",
            with(&good, "REDIS_CA_FILE", None),
            vec![tls_target.as_str(), "UnknownIssuer"],
        ),
        (
            "no client certificate",
            with(
                &with(&good, "REDIS_CERT_FILE", None),
                "REDIS_KEY_FILE",
                None,
            ),
            vec![tls_target.as_str()],
        ),
        (
            "wrong password",
            with(&good, "REDIS_PASSWORD", Some("not the password".into())),
            vec![tls_target.as_str(), "Password authentication failed"],
        ),
    ];
    // Connection attempts seen by the server: connections it accepted, and
    // TLS handshakes it failed (which it logs, but does not count).
    const HANDSHAKE_FAILED: &str = "Error accepting a client connection";
    let seen = || {
        // The fixture's own INFO connection is counted before INFO answers.
        let accepted = server
            .info_number("stats", "total_connections_received")
            .unwrap();
        accepted + server.log_lines(HANDSHAKE_FAILED).unwrap() as u64
    };
    for (name, env, expected) in cases {
        let auth_failures = server.auth_failures().unwrap();
        let before = seen();
        let out = high_risk_scan(&h, "refused-01", &borrowed(&env)).await;
        let attempts = seen() - before - 1;
        let stderr = text(&out.stderr);
        let error = the_one_error(&out, EXIT_ERROR);
        for needle in expected {
            assert!(error.contains(needle), "{name}: {error}");
        }
        assert!(
            !stderr.contains(PASSWORD) && !stderr.contains("not the password"),
            "{name}: {stderr}"
        );
        assert_eq!(attempts, 1, "{name}: one attempt, no retries");
        let expected_auth = u64::from(name == "wrong password");
        assert_eq!(
            server.auth_failures().unwrap() - auth_failures,
            expected_auth,
            "{name}"
        );
    }
    assert!(
        server
            .query::<Vec<String>>(redis::cmd("KEYS").arg("asc:*"))
            .unwrap()
            .is_empty()
    );
}

/// Log lines captured in memory (for one test's thread).
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    fn lines_with(&self, needles: &[&str]) -> usize {
        let bytes = self.0.lock().unwrap().clone();
        text(&bytes)
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The user's password is changed while the operator runs (its connection
/// is killed): every command fails at once with the server's reason, the
/// attempts to reconnect back off (most commands never reach Redis), each
/// attempt is logged once, `/readyz` says why; when the password is right
/// again the next attempt reconnects.
#[tokio::test]
async fn revoked_credentials_back_off_and_readiness_says_why() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    // This test's runtime is single-threaded: every task logs here.
    let _logging = tracing::subscriber::set_default(subscriber);
    let server = RedisServer::start().unwrap();
    create_acl_user(&server, &[]);
    let target = RedisTarget::Standalone(user_url(&server));
    let store = TicketStore::connect(&target, StoreConfig::default())
        .await
        .unwrap();
    let port = free_port();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let probes = tokio::spawn(assetscan_operator::probes::serve(
        ([127, 0, 0, 1], port).into(),
        assetscan_operator::probes::Exposure::Plain,
        std::sync::Arc::new(assetscan_operator::telemetry::Metrics::new()),
        std::sync::Arc::new(std::sync::OnceLock::from(store.clone())),
        shutdown.clone(),
    ));
    let readyz = format!("http://127.0.0.1:{port}/readyz");
    until("/readyz answers", Duration::from_secs(5), async || {
        http_get(&readyz, &[])
            .await
            .is_ok_and(|(code, _)| code == 200)
    })
    .await;

    let failed_before = server.auth_failures().unwrap();
    server
        .command(&["ACL", "SETUSER", USER, "resetpass", ">rotated"])
        .unwrap();
    server.command(&["CLIENT", "KILL", "USER", USER]).unwrap();
    let attempts = || server.auth_failures().unwrap() - failed_before;
    // The first command meets the killed connection; the next ones the
    // reason the server gives for refusing a new one.
    store.ping().await.expect_err("the connection was killed");
    let mut calls = 0;
    while attempts() < 4 {
        let err = store.ping().await.expect_err("the password was changed");
        assert!(
            err.to_string().contains("Password authentication failed"),
            "{err}"
        );
        calls += 1;
        tokio::task::yield_now().await;
    }
    let attempts = attempts();
    assert!(
        calls > 10 * attempts,
        "{calls} commands made {attempts} connection attempts"
    );
    let target_shown = target.redacted();
    assert_eq!(
        logs.lines_with(&[
            "cannot connect to redis",
            &target_shown,
            "Password authentication failed",
        ]) as u64,
        attempts,
        "one log line per attempt"
    );
    let (code, body) = http_get(&readyz, &[]).await.unwrap();
    assert_eq!(code, 503);
    assert!(body.contains("Password authentication failed"), "{body}");
    assert!(!body.contains(PASSWORD), "{body}");

    server
        .command(&["ACL", "SETUSER", USER, "resetpass", &format!(">{PASSWORD}")])
        .unwrap();
    until(
        "the operator reconnects",
        Duration::from_secs(15),
        async || store.ping().await.is_ok(),
    )
    .await;
    assert_eq!(
        logs.lines_with(&["connected to redis again", &target_shown]),
        1
    );
    assert_eq!(http_get(&readyz, &[]).await.unwrap().0, 200);
    shutdown.cancel();
    probes.await.unwrap().unwrap();
}
