//! `assetscan-operator run` as a real process against a harness: started,
//! stopped (SIGSTOP, or by its own fault drill), resumed and killed by the
//! tests, with its log kept for the failure messages.

use super::{Harness, NAMESPACE};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct OperatorProcess {
    pub child: Child,
    pub log: PathBuf,
    pub instance: String,
}

impl OperatorProcess {
    /// Starts `run` for the harness's namespace with `config` and the
    /// extra environment `env` (e.g. `FAILPOINTS` for a fault drill).
    pub fn spawn(h: &Harness, instance: &str, config: &Path, env: &[(&str, &str)]) -> Self {
        let kubeconfig = h.dir.path().join("kubeconfig");
        h.emu.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let log = h.dir.path().join(format!("operator-{instance}.log"));
        let mut command = Command::new(env!("CARGO_BIN_EXE_assetscan-operator"));
        command
            .arg("run")
            .arg("--config")
            .arg(config)
            .args(["--redis-url", &h.redis.url()])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(["--instance", instance, "--namespace", NAMESPACE])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info,kube=warn,hyper=warn")
            .env_remove("REDIS_URL")
            .env_remove("ASSETSCAN_CONFIG")
            .env_remove("FAILPOINTS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("operator starts");
        OperatorProcess {
            child,
            log,
            instance: instance.to_owned(),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
    }

    /// Whether the process is stopped (state `T` in `/proc/<pid>/stat`).
    pub fn is_stopped(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .ok()
            .and_then(|stat| {
                // The state follows the parenthesised command name.
                let (_, rest) = stat.rsplit_once(')')?;
                rest.split_whitespace().next().map(|state| state == "T")
            })
            .unwrap_or(false)
    }

    /// Waits until the process has stopped itself (a fault drill) or was
    /// stopped.
    pub async fn wait_stopped(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.is_stopped() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} never stopped; log:\n{}",
                self.instance,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn resume(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT");
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        let _ = kill(self.pid(), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
