//! `assetscan-operator run` as a real process, started the one way every
//! harness here starts it (the tests, the chaos run, the scale run): its
//! configuration, Redis and API server given on the command line and in
//! `KUBECONFIG`, none of the operator's own environment variables leaking
//! in from the caller's, stderr kept in a log file for failure messages.
//!
//! [`OperatorCommand`] builds the command; [`OperatorProcess`] is the one
//! handle on a started process the tests use: its log, its HTTP endpoints,
//! and the signals that stop, resume and end it.

use crate::wait;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What an operator process is started with.
#[derive(Clone, Debug)]
pub struct OperatorCommand<'a> {
    binary: &'a Path,
    /// `run` and its flags, but the namespace and the metrics address.
    run: Vec<OsString>,
    /// The namespace watched (`None`: all, as the chart's cluster-wide
    /// install runs it).
    namespace: Option<&'a str>,
    kubeconfig: &'a Path,
    instance: &'a str,
    metrics_port: Option<u16>,
    /// `METRICS_PLAIN_HTTP=true`: what the harnesses read their metrics
    /// with, unless a test asks for the secured port.
    plain_metrics: bool,
    log_filter: &'a str,
    env: Vec<(OsString, OsString)>,
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
        let mut run: Vec<OsString> = vec!["run".into(), "--config".into(), config.into()];
        for (flag, value) in [("--redis-url", redis_url), ("--instance", instance)] {
            run.extend([flag.into(), value.into()]);
        }
        OperatorCommand {
            binary,
            run,
            namespace: Some(namespace),
            kubeconfig,
            instance,
            metrics_port: None,
            plain_metrics: true,
            log_filter: "info,kube=warn,hyper=warn",
            env: Vec::new(),
        }
    }

    /// Serve `/metrics` and the probes on this loopback port.
    pub fn metrics_port(mut self, port: u16) -> Self {
        self.metrics_port = Some(port);
        self
    }

    /// Serve the metrics port as deployed: TLS, and `/metrics` only for
    /// callers the API server authenticates and authorizes (the process's
    /// `get` then no longer reads it).
    pub fn secured_metrics(mut self) -> Self {
        self.plain_metrics = false;
        self
    }

    /// Watch every namespace (no `--namespace`), as a cluster-wide install
    /// does.
    pub fn all_namespaces(mut self) -> Self {
        self.namespace = None;
        self
    }

    /// More flags for `run` (e.g. `--shard-index 1`).
    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.run.extend(args.into_iter().map(Into::into));
        self
    }

    /// `RUST_LOG` for the process.
    pub fn log_filter(mut self, filter: &'a str) -> Self {
        self.log_filter = filter;
        self
    }

    /// One more environment variable (e.g. `FAILPOINTS` for a fault drill).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The command, ready for more arguments or environment, with its
    /// stderr going to `log` (created, or truncated).
    pub fn command(&self, log: &Path) -> io::Result<Command> {
        let stderr = std::fs::File::create(log)?;
        let metrics_addr = format!("127.0.0.1:{}", self.metrics_port.unwrap_or(0));
        let mut command = Command::new(self.binary);
        command
            .args(&self.run)
            .args(self.namespace.iter().flat_map(|ns| ["--namespace", ns]))
            .args(["--metrics-addr", &metrics_addr])
            .env("KUBECONFIG", self.kubeconfig)
            .env("RUST_LOG", self.log_filter)
            .env_remove("REDIS_URL")
            .env_remove("ASSETSCAN_CONFIG")
            .env_remove("FAILPOINTS")
            .env_remove("METRICS_PLAIN_HTTP")
            .env_remove("METRICS_TLS_CERT_FILE")
            .env_remove("METRICS_TLS_KEY_FILE")
            // As the variable, not the flag: an earlier release's binary
            // (the upgrade test runs one) knows no `--metrics-plain-http`.
            .envs(self.plain_metrics.then_some(("METRICS_PLAIN_HTTP", "true")))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        Ok(command)
    }

    /// Starts the process, its stderr going to `log`.
    pub fn spawn(&self, log: &Path) -> io::Result<OperatorProcess> {
        let child = self.command(log)?.spawn()?;
        Ok(OperatorProcess {
            child,
            log: log.to_path_buf(),
            instance: self.instance.to_owned(),
            port: self.metrics_port,
        })
    }
}

/// A started operator process. Dropping it kills it (resumed first, should
/// it be stopped).
#[derive(Debug)]
pub struct OperatorProcess {
    child: Child,
    log: PathBuf,
    instance: String,
    port: Option<u16>,
}

impl OperatorProcess {
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the process wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The port of `/metrics`, `/healthz` and `/readyz`; panics when the
    /// command did not choose one.
    pub fn port(&self) -> u16 {
        self.port
            .unwrap_or_else(|| panic!("{}: started without a metrics port", self.instance))
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port())
    }

    /// `GET <path>` on the process's HTTP port: status and body.
    pub async fn get(&self, path: &str) -> io::Result<(u16, String)> {
        http_get(self.port(), path).await
    }

    /// Polls `found` until it finds something, and returns that; panics
    /// after `timeout` with `what` and the process's log.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut found: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        wait::poll(timeout, async || found().await.ok_or(()))
            .await
            .unwrap_or_else(|()| {
                panic!(
                    "{}: timed out after {timeout:?} waiting until {what}; log:\n{}",
                    self.instance,
                    self.log()
                )
            })
    }

    /// Waits until `GET <path>` answers `status`, and returns the body.
    pub async fn wait_answer(&self, path: &str, status: u16, timeout: Duration) -> String {
        let what = format!("{path} answered {status}");
        self.wait_for(&what, timeout, async || {
            self.get(path)
                .await
                .ok()
                .and_then(|(code, body)| (code == status).then_some(body))
        })
        .await
    }

    /// Whether the process is stopped (SIGSTOP, or a fault drill that
    /// stopped it).
    pub fn is_stopped(&self) -> bool {
        is_stopped(self.pid())
    }

    /// Waits until the process has stopped itself (a fault drill) or was
    /// stopped.
    pub async fn wait_stopped(&self, timeout: Duration) {
        self.wait_for("it stopped", timeout, async || {
            self.is_stopped().then_some(())
        })
        .await
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .try_wait()
            .unwrap_or_else(|e| panic!("{}: cannot wait for it: {e}", self.instance))
    }

    /// Waits until it exits, and returns how.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let exit = wait::poll(timeout, async || self.exited().ok_or(())).await;
        exit.unwrap_or_else(|()| {
            panic!(
                "{}: did not exit within {timeout:?}; log:\n{}",
                self.instance,
                self.log()
            )
        })
    }

    /// Sends `signal`; a process that is gone is not an error (its exit
    /// says why).
    pub fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.pid()).unwrap_or(i32::MAX);
        let _ = kill(Pid::from_raw(pid), signal);
    }

    /// SIGCONT: a stopped process goes on.
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }

    /// SIGTERM: the process shuts down.
    pub fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.resume();
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// A free TCP port on the loopback interface.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("no free loopback port: {e}"))
}

/// `GET <path>` on a loopback port over HTTP/1.0 (the connection closes
/// after the answer): status and body. Bounded by 5 s.
pub async fn http_get(port: u16, path: &str) -> io::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, io::Error>(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("GET {path}: no answer")))??;
    let malformed = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("GET {path}: {answer:?}"),
        )
    };
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(malformed)?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(malformed)?;
    Ok((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(command: &OperatorCommand) -> Vec<String> {
        let command = command.command(Path::new("/dev/null")).expect("command");
        (command.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn every_namespace_is_watched_without_the_namespace_flag() {
        let (binary, file) = (Path::new("assetscan-operator"), Path::new("f"));
        let one = OperatorCommand::new(binary, file, "redis://r", file, "op-0", "team-a");
        assert!(
            args(&one)
                .windows(2)
                .any(|w| w == ["--namespace", "team-a"])
        );
        assert!(!args(&one.all_namespaces()).contains(&"--namespace".to_owned()));
    }
}
