//! The receivers the notification tests check deliveries with, each the
//! ecosystem's own software, installed by `scripts/ensure-receivers.sh`:
//! Python with the CloudEvents SDK and jsonschema ([`CloudEventsReceiver`],
//! [`validate`]), and Prometheus Alertmanager ([`Alertmanager`]).

use crate::process::{free_port, http_get};
use crate::tools::repo;
use crate::wait::until_ok;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long a receiver may take to start: a guard against hangs only.
const START: Duration = Duration::from_secs(30);

/// Runs the install script once when `ready` says what it installs is
/// missing, and demands it afterwards.
fn ensure(what: &str, ready: impl Fn() -> bool) {
    if ready() {
        return;
    }
    let status = std::process::Command::new("bash")
        .arg(repo().join("scripts/ensure-receivers.sh"))
        .status();
    assert!(
        status.is_ok_and(|s| s.success()) && ready(),
        "scripts/ensure-receivers.sh could not install {what}"
    );
}

/// The receivers' virtualenv Python, with every library installed.
pub(crate) fn python() -> PathBuf {
    let python = repo().join("target/tools/receivers-py/bin/python");
    ensure("the receivers' Python libraries", || {
        std::process::Command::new(&python)
            .args([
                "-c",
                "import standardwebhooks, cloudevents.core.bindings.http, jsonschema",
            ])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    python
}

/// Validates each of `documents` against the schema at `pointer` (a JSON
/// pointer, `""` for the whole file) of the published schema or OpenAPI
/// document `schema`, with jsonschema (`tests/receivers/validate.py`): one
/// verdict per document, `"ok"` or the errors.
pub async fn validate(
    schema: &Path,
    pointer: &str,
    documents: &[Value],
) -> io::Result<Vec<String>> {
    let mut child = Command::new(python())
        .arg(repo().join("tests/receivers/validate.py"))
        .arg(schema)
        .arg(pointer)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no stdin"))?;
    let input: String = documents.iter().map(|d| format!("{d}\n")).collect();
    stdin.write_all(input.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "validate.py failed: {}",
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// A receiver's output, line by line.
pub(crate) type Output = Lines<BufReader<ChildStdout>>;

/// Spawns a receiver process (killed when dropped) whose first line of
/// output says where it listens: the process, the rest of its output, and
/// that line.
pub(crate) async fn spawn_announcing(command: &mut Command) -> io::Result<(Child, Output, String)> {
    let mut child = command.stdout(Stdio::piped()).kill_on_drop(true).spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next_line().await?.unwrap_or_default();
    Ok((child, lines, first))
}

/// A CloudEvents sink reading every delivery with the SDK
/// (`tests/receivers/cloudevents_receiver.py`); killed when dropped.
pub struct CloudEventsReceiver {
    port: u16,
    lines: Output,
    _child: Child,
}

impl CloudEventsReceiver {
    pub async fn start() -> io::Result<CloudEventsReceiver> {
        let mut command = Command::new(python());
        command.arg(repo().join("tests/receivers/cloudevents_receiver.py"));
        let (child, lines, first) = spawn_announcing(&mut command).await?;
        let port = serde_json::from_str::<Value>(&first)
            .ok()
            .and_then(|v| v["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| io::Error::other(format!("the receiver said {first:?}")))?;
        Ok(CloudEventsReceiver {
            port,
            lines,
            _child: child,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/events", self.port)
    }

    /// What the SDK made of the next delivery: `{"mode", "attributes",
    /// "data"}`, or `{"refused": …}`.
    pub async fn next(&mut self) -> io::Result<Value> {
        let line = self.lines.next_line().await?.unwrap_or_default();
        serde_json::from_str(&line).map_err(|e| io::Error::other(format!("{line:?}: {e}")))
    }
}

/// Debian's Alertmanager binary.
const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

/// A real Alertmanager on a free loopback port, alone (no cluster peers),
/// its data in a temporary folder, routing every alert to `webhook` with
/// the given group wait; killed when dropped.
pub struct Alertmanager {
    port: u16,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl Alertmanager {
    /// `webhook`: where its one receiver posts notifications (Alertmanager's
    /// webhook format), with `send_resolved: true`.
    pub async fn start(webhook: &str) -> io::Result<Alertmanager> {
        ensure("Prometheus Alertmanager", || {
            Path::new(ALERTMANAGER).is_file()
        });
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            format!(
                "route:\n  receiver: sink\n  group_by: [namespace, asset]\n  group_wait: 1s\n  \
                 group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n- name: sink\n  \
                 webhook_configs:\n  - url: {webhook:?}\n    send_resolved: true\n"
            ),
        )?;
        let port = free_port();
        let child = Command::new(ALERTMANAGER)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let alertmanager = Alertmanager {
            port,
            _child: child,
            _dir: dir,
        };
        until_ok("Alertmanager ready", START, async || {
            match http_get(port, "/-/ready").await {
                Ok((200, _)) => Ok(()),
                Ok((status, body)) => Err(format!("HTTP {status}: {body}")),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        Ok(alertmanager)
    }

    /// Its base URL, as a channel's `urlFrom` names it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every alert it holds, firing or resolved within its retention
    /// (`GET /api/v2/alerts`, gettableAlerts).
    pub async fn alerts(&self) -> io::Result<Vec<Value>> {
        let (status, body) = http_get(self.port, "/api/v2/alerts").await?;
        if status != 200 {
            return Err(io::Error::other(format!(
                "GET /api/v2/alerts: HTTP {status}: {body}"
            )));
        }
        serde_json::from_str(&body).map_err(|e| io::Error::other(format!("{body:?}: {e}")))
    }
}
