//! An operator replica as the demo runs it: its own process of the real
//! operator binary, with a fault drill armed or not, stopped and resumed
//! with signals, and stopped for good when dropped.

use anyhow::{Context as _, Result, ensure};
use nix::sys::signal::Signal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The operator binary in this example's own target directory (the parent
/// of `examples/`), wherever `CARGO_TARGET_DIR` put it: `make demo` builds
/// it with the fault-drill feature before running this.
pub fn operator_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .context("cannot locate the target directory")?;
    let binary = dir.join("assetscan-operator");
    ensure!(
        binary.exists(),
        "{} is missing: run `make demo` (it builds the operator with the fault-drill feature)",
        binary.display()
    );
    Ok(binary)
}

/// A running operator replica.
pub struct Replica {
    name: &'static str,
    child: Child,
}

impl Replica {
    /// Starts `binary` as replica `name` with the config and kubeconfig in
    /// `work` (its log goes there too); with `drill`, it stops itself
    /// (SIGSTOP) right before that write (`<asset>:<status>`).
    pub fn start(
        name: &'static str,
        binary: &Path,
        work: &Path,
        redis_url: &str,
        drill: Option<String>,
    ) -> Result<Replica> {
        let log = std::fs::File::create(work.join(format!("{name}.log")))?;
        let mut cmd = Command::new(binary);
        cmd.args(["run", "--metrics-addr", "127.0.0.1:0", "--instance", name])
            .arg("--config")
            .arg(work.join("config.yaml"))
            .env("REDIS_URL", redis_url)
            .env("KUBECONFIG", work.join("kubeconfig"))
            .env("RUST_LOG", "info,kube=warn,hyper=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(drill) = drill {
            cmd.env("FAILPOINTS", format!("stop-before-write=return({drill})"));
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(Replica { name, child })
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether the process is stopped (state `T` in /proc).
    pub fn is_stopped(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next())
            })
            .is_some_and(|state| state == 'T')
    }

    pub fn signal(&self, signal: Signal) -> Result<()> {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal)
            .with_context(|| format!("signal {signal} to {}", self.name))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.signal(Signal::SIGCONT);
        let _ = self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
