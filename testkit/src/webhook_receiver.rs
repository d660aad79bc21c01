//! The webhook receiver of docs/security.md (`examples/webhook-receiver/receiver.py`)
//! as a real process: Python with the Standard Webhooks library, from
//! `scripts/ensure-receivers.sh`. Started with its clock ahead
//! (libfaketime preloaded), it sees a delivery as older than it is: how a test replays a
//! captured delivery past the library's tolerance without waiting for it.

use crate::receivers::{Output, python, spawn_announcing};
use crate::stubs::SinkKeys;
use crate::tools::repo;
use std::io;
use std::path::PathBuf;
use tokio::process::{Child, Command};

/// A running receiver; killed when dropped.
pub struct WebhookReceiver {
    port: u16,
    lines: Output,
    _child: Child,
}

/// Debian's libfaketime (`/usr/lib/<triplet>/faketime/libfaketime.so.1`),
/// installed by the script when missing. Preloaded into the receiver itself
/// rather than run through the `faketime` wrapper, which would leave the
/// receiver running when the wrapper is killed.
fn libfaketime() -> PathBuf {
    let find = || {
        std::fs::read_dir("/usr/lib")
            .ok()?
            .flatten()
            .find_map(|dir| {
                let lib = dir.path().join("faketime/libfaketime.so.1");
                lib.is_file().then_some(lib)
            })
    };
    if let Some(lib) = find() {
        return lib;
    }
    let status = std::process::Command::new("bash")
        .arg(repo().join("scripts/ensure-receivers.sh"))
        .status();
    match (status, find()) {
        (Ok(s), Some(lib)) if s.success() => lib,
        _ => panic!("scripts/ensure-receivers.sh could not install libfaketime"),
    }
}

impl WebhookReceiver {
    /// A receiver verifying with `secret`, its clock moved by `clock_offset`
    /// (libfaketime's `FAKETIME`, such as `+6m`) when given.
    pub async fn start(secret: &str, clock_offset: Option<&str>) -> io::Result<WebhookReceiver> {
        Self::start_with(
            SinkKeys {
                standard: Some(secret),
                legacy: None,
            },
            clock_offset,
        )
        .await
    }

    /// A receiver holding `keys`: the Standard Webhooks secret
    /// (`WEBHOOK_SECRET`), 0.1.0's (`WEBHOOK_LEGACY_SECRET`), or both.
    pub async fn start_with(
        keys: SinkKeys<'_>,
        clock_offset: Option<&str>,
    ) -> io::Result<WebhookReceiver> {
        let script = repo().join("examples/webhook-receiver/receiver.py");
        let mut command = Command::new(python());
        for (variable, key) in [
            ("WEBHOOK_SECRET", keys.standard),
            ("WEBHOOK_LEGACY_SECRET", keys.legacy),
        ] {
            if let Some(key) = key {
                command.env(variable, key);
            }
        }
        if let Some(offset) = clock_offset {
            command
                .env("LD_PRELOAD", libfaketime())
                .env("FAKETIME", offset);
        }
        let (child, lines, first) = spawn_announcing(command.arg(script)).await?;
        let port = first
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| io::Error::other(format!("the receiver said {first:?}")))?;
        Ok(WebhookReceiver {
            port,
            lines,
            _child: child,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// The receiver's next line of output (`accepted ID`, `refused: …`).
    pub async fn next_line(&mut self) -> io::Result<String> {
        Ok(self.lines.next_line().await?.unwrap_or_default())
    }
}
