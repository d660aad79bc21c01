//! One `redis-server` process on a free loopback port in its own temp dir:
//! started (plain, with a TLS port, or as a sentinel), stopped, killed,
//! paused, restarted, flushed and asked about its counters.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::error::FixtureError;
use super::tls::TlsFiles;
use super::wire::{command, parse_calls, parse_info_number, query};

/// How long a server may take to answer PING after start.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of a standalone server.
#[derive(Clone, Debug, Default)]
pub struct RedisOptions {
    /// Keep data across restarts with an append-only file.
    pub appendonly: bool,
    /// Also listen with TLS on a second port (the plain port stays, for the
    /// fixture's own commands).
    pub tls: Option<ServerTls>,
    /// Run as a sentinel (`--sentinel`) with this configuration file text
    /// (its `sentinel monitor …` lines). The file is written once, so the
    /// sentinel keeps what it learned across a restart.
    pub sentinel: Option<String>,
    /// Extra `--name value` arguments.
    pub extra: Vec<(String, String)>,
}

/// The server side of TLS: its certificate and key, and the CA that client
/// certificates must chain to.
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// Require a client certificate (`--tls-auth-clients yes`).
    pub auth_clients: bool,
}

impl ServerTls {
    /// The server certificate of `files`, trusting its CA for clients.
    pub fn from_files(files: &TlsFiles, auth_clients: bool) -> ServerTls {
        ServerTls {
            cert: files.server_cert(),
            key: files.server_key(),
            ca: files.ca(),
            auth_clients,
        }
    }
}

/// One `redis-server` process.
pub struct RedisServer {
    port: u16,
    tls_port: Option<u16>,
    dir: tempfile::TempDir,
    options: RedisOptions,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free loopback port.
    pub fn start() -> Result<RedisServer, FixtureError> {
        RedisServer::start_with(RedisOptions::default())
    }

    pub fn start_with(options: RedisOptions) -> Result<RedisServer, FixtureError> {
        let mut last = None;
        // A port found free may be taken before redis binds it: try again.
        for _ in 0..5 {
            let mut server = RedisServer {
                port: free_port()?,
                tls_port: options.tls.as_ref().map(|_| free_port()).transpose()?,
                dir: tempfile::Builder::new().prefix("asc-redis-").tempdir()?,
                options: options.clone(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or(FixtureError::Command {
            what: "start redis-server".into(),
            detail: "no attempt made".into(),
        }))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:<tls port>`, when started with [`RedisOptions::tls`].
    pub fn tls_url(&self) -> Option<String> {
        self.tls_port.map(|p| format!("rediss://127.0.0.1:{p}"))
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn spawn(&mut self) -> Result<(), FixtureError> {
        let sentinel_conf = match &self.options.sentinel {
            Some(config) => {
                let file = self.dir.path().join("sentinel.conf");
                if !file.exists() {
                    std::fs::write(&file, config)?;
                }
                Some(file)
            }
            None => None,
        };
        let child = spawn_server(
            self.port,
            self.dir.path(),
            sentinel_conf.as_deref(),
            &self.args(),
        )?;
        self.child = Some(child);
        if let Err(err) = wait_ready(self.port, self.dir.path()) {
            self.kill();
            return Err(err);
        }
        Ok(())
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--appendonly".into(),
            if self.options.appendonly { "yes" } else { "no" }.into(),
        ];
        if let (Some(tls), Some(port)) = (&self.options.tls, self.tls_port) {
            args.push("--tls-port".into());
            args.push(port.to_string());
            for (flag, path) in [
                ("--tls-cert-file", &tls.cert),
                ("--tls-key-file", &tls.key),
                ("--tls-ca-cert-file", &tls.ca),
            ] {
                args.push(flag.into());
                args.push(path.display().to_string());
            }
            args.push("--tls-auth-clients".into());
            args.push(if tls.auth_clients { "yes" } else { "no" }.into());
        }
        for (k, v) in &self.options.extra {
            args.push(format!("--{k}"));
            args.push(v.clone());
        }
        args
    }

    /// Graceful shutdown (`SHUTDOWN NOSAVE`), then wait for the process.
    pub fn stop(&mut self) {
        let _ = command(self.port, &["SHUTDOWN", "NOSAVE"]);
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGKILL: the server dies without a word, like a crashed node.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the server freezes, connections hang.
    pub fn pause(&self) -> Result<(), FixtureError> {
        self.signal(Signal::SIGSTOP)
    }

    /// SIGCONT after [`RedisServer::pause`].
    pub fn resume(&self) -> Result<(), FixtureError> {
        self.signal(Signal::SIGCONT)
    }

    fn signal(&self, signal: Signal) -> Result<(), FixtureError> {
        let pid = self.pid().ok_or_else(|| FixtureError::Command {
            what: format!("signal {signal}"),
            detail: "server is not running".into(),
        })?;
        kill(Pid::from_raw(pid as i32), signal).map_err(|e| FixtureError::Command {
            what: format!("signal {signal}"),
            detail: e.to_string(),
        })
    }

    /// Starts the server again on the same port and dir (data survives only
    /// with `appendonly`).
    pub fn restart(&mut self) -> Result<(), FixtureError> {
        if self.child.is_some() {
            self.stop();
        }
        self.spawn()
    }

    /// `FLUSHALL`: every key gone, as after a restart without persistence.
    pub fn flushall(&self) -> Result<(), FixtureError> {
        self.command(&["FLUSHALL"]).map(|_| ())
    }

    /// Sends one command and returns the raw RESP reply (for checks such as
    /// `INFO commandstats` without a client).
    pub fn command(&self, args: &[&str]) -> Result<String, FixtureError> {
        command(self.port, args)
    }

    /// `calls` of one command from `INFO commandstats` (e.g. `evalsha`).
    pub fn command_calls(&self, name: &str) -> Result<u64, FixtureError> {
        let info = self.command(&["INFO", "commandstats"])?;
        Ok(parse_calls(&info, name))
    }

    /// One numeric field of `INFO <section>` (e.g. `stats`,
    /// `total_connections_received`), 0 when absent.
    pub fn info_number(&self, section: &str, field: &str) -> Result<u64, FixtureError> {
        let info = self.command(&["INFO", section])?;
        Ok(parse_info_number(&info, field))
    }

    /// Lines of the server's log that contain `needle` (e.g. `Error
    /// accepting a client connection`: a failed TLS handshake, which
    /// `INFO stats` does not count as a connection).
    pub fn log_lines(&self, needle: &str) -> Result<usize, FixtureError> {
        let log = std::fs::read_to_string(self.dir.path().join("redis.log"))?;
        Ok(log.lines().filter(|l| l.contains(needle)).count())
    }

    /// Failed authentications so far, from `ACL LOG` (each entry counts the
    /// repeats of one user's failures).
    pub fn auth_failures(&self) -> Result<u64, FixtureError> {
        let entries: Vec<HashMap<String, redis::Value>> =
            self.query(redis::cmd("ACL").arg("LOG"))?;
        Ok(entries
            .iter()
            .filter(
                |e| matches!(e.get("reason"), Some(redis::Value::BulkString(r)) if r == b"auth"),
            )
            .filter_map(|e| match e.get("count") {
                Some(redis::Value::Int(n)) => u64::try_from(*n).ok(),
                _ => None,
            })
            .sum())
    }

    /// Runs one command as the default user with the `redis` client, for
    /// replies that [`RedisServer::command`] cannot read (arrays, maps).
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, FixtureError> {
        query(self.port, cmd)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.resume();
        self.kill();
    }
}

fn free_port() -> Result<u16, FixtureError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `redis-server`, as a sentinel with `sentinel_conf`; `extra`
/// arguments come last, so they override the defaults.
fn spawn_server(
    port: u16,
    dir: &Path,
    sentinel_conf: Option<&Path>,
    extra: &[String],
) -> Result<Child, FixtureError> {
    let mut command = Command::new("redis-server");
    if let Some(conf) = sentinel_conf {
        command.arg(conf).arg("--sentinel");
    }
    command
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--daemonize", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(dir)
        .args(["--logfile", "redis.log"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|source| FixtureError::Spawn {
            program: "redis-server",
            source,
        })
}

fn wait_ready(port: u16, dir: &Path) -> Result<(), FixtureError> {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if command(port, &["PING"]).is_ok_and(|r| r.contains("PONG")) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log: PathBuf = dir.join("redis.log");
    Err(FixtureError::NotReady {
        port,
        timeout: START_TIMEOUT,
        log: std::fs::read_to_string(log).unwrap_or_default(),
    })
}
