//! `assetscan-operator run` as a real process, started the one way every
//! harness here starts it (the tests, the chaos run, the scale run): its
//! configuration, Redis and API server given on the command line and in
//! `KUBECONFIG`, none of the operator's own environment variables leaking
//! in from the caller's, stderr kept in a log file for failure messages.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

/// What an operator process is started with.
#[derive(Clone, Debug)]
pub struct OperatorCommand<'a> {
    binary: &'a Path,
    config: &'a Path,
    redis_url: &'a str,
    kubeconfig: &'a Path,
    instance: &'a str,
    namespace: &'a str,
    metrics_addr: String,
    log_filter: &'a str,
}

impl<'a> OperatorCommand<'a> {
    /// `binary run` as replica `instance`, watching `namespace`; metrics on
    /// a free loopback port, info logs (the client libraries' at warn).
    pub fn new(
        binary: &'a Path,
        config: &'a Path,
        redis_url: &'a str,
        kubeconfig: &'a Path,
        instance: &'a str,
        namespace: &'a str,
    ) -> OperatorCommand<'a> {
        OperatorCommand {
            binary,
            config,
            redis_url,
            kubeconfig,
            instance,
            namespace,
            metrics_addr: "127.0.0.1:0".to_owned(),
            log_filter: "info,kube=warn,hyper=warn",
        }
    }

    /// Serve `/metrics` and the probes on this loopback port.
    pub fn metrics_port(mut self, port: u16) -> Self {
        self.metrics_addr = format!("127.0.0.1:{port}");
        self
    }

    /// `RUST_LOG` for the process.
    pub fn log_filter(mut self, filter: &'a str) -> Self {
        self.log_filter = filter;
        self
    }

    /// The command, ready for more arguments or environment, with its
    /// stderr going to `log` (created, or truncated).
    pub fn command(&self, log: &Path) -> io::Result<Command> {
        let stderr = std::fs::File::create(log)?;
        let mut command = Command::new(self.binary);
        command
            .arg("run")
            .arg("--config")
            .arg(self.config)
            .args(["--redis-url", self.redis_url])
            .args(["--metrics-addr", &self.metrics_addr])
            .args(["--instance", self.instance, "--namespace", self.namespace])
            .env("KUBECONFIG", self.kubeconfig)
            .env("RUST_LOG", self.log_filter)
            .env_remove("REDIS_URL")
            .env_remove("ASSETSCAN_CONFIG")
            .env_remove("FAILPOINTS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        Ok(command)
    }
}

/// Whether process `pid` is stopped (SIGSTOP, or a fault drill that stopped
/// itself): state `T` in `/proc/<pid>/stat`. A process that is gone is not.
pub fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the parenthesised command name, which may
            // itself contain parentheses.
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().next().map(|state| state == "T")
        })
        .unwrap_or(false)
}
