//! `assetscan-operator run` as a real process against a harness: started,
//! stopped (SIGSTOP, or by its own fault drill), resumed and killed by the
//! tests, with its log kept for the failure messages.

use super::{Harness, NAMESPACE};
use assetscan_testkit::process::{OperatorCommand, is_stopped};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Child;
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
        let url = h.redis.url();
        let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
        let mut command =
            OperatorCommand::new(binary, config, &url, &kubeconfig, instance, NAMESPACE)
                .command(&log)
                .expect("log file");
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

    /// Waits until the process has stopped itself (a fault drill) or was
    /// stopped.
    pub async fn wait_stopped(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !is_stopped(self.child.id()) {
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
