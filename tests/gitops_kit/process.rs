//! A real operator process, and running the `helm test` hook's script
//! against it.

use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_testkit::process::OperatorCommand;
use kube::api::Api;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

pub struct Operator {
    child: Child,
    log: PathBuf,
    /// Where /metrics, /healthz and /readyz are served.
    pub port: u16,
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The status code of `GET path`, or `None` when nothing answers.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = String::new();
    stream.read_to_string(&mut head).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

impl Operator {
    /// `assetscan-operator run` on a free loopback port, watching namespace
    /// `default` through `kubeconfig`, with one attempt per step and its
    /// vulnerability source at `127.0.0.1:<vuln_port>`; its files in `dir`.
    pub fn start(dir: &Path, redis_url: &str, kubeconfig: &Path, vuln_port: u16) -> Operator {
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "redis: {{timeout: 1s}}\n\
                 lock: {{ttl: 3s}}\n\
                 steps:\n  onlineCheck: {{timeout: 2s, maxAttempts: 1}}\n  vulnQuery: {{timeout: 2s, maxAttempts: 1}}\n\
                 providers:\n  online: {{tcp: {{timeout: 2s}}}}\n  \
                 vulnerabilities: {{kind: osv, baseUrl: \"http://127.0.0.1:{vuln_port}\", timeout: 2s}}\n  \
                 threatIntel: {{kev: {{enabled: false}}, epss: {{enabled: false}}}}\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = dir.join("operator.log");
        let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
        let child =
            OperatorCommand::new(binary, &config, redis_url, kubeconfig, "gitops", "default")
                .metrics_port(port)
                .command(&log)
                .unwrap()
                .spawn()
                .expect("operator starts");
        Operator { child, log, port }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn wait_readyz(&self, want: u16) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while http_status(self.port, "/readyz") != Some(want) {
            assert!(
                Instant::now() < deadline,
                "/readyz never answered {want}; operator log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Runs the `helm test` pod's command here, as the pod would, with its
/// environment and READYZ_URL pointing at `port`.
pub fn run_hook(hook: &Value, port: u16) -> Output {
    let container = &hook["spec"]["containers"][0];
    let command: Vec<&str> = container["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let mut cmd = Command::new(command[0]);
    cmd.args(&command[1..]);
    for var in container["env"].as_array().unwrap() {
        cmd.env(
            var["name"].as_str().unwrap(),
            var["value"].as_str().unwrap(),
        );
    }
    cmd.env("READYZ_URL", format!("http://127.0.0.1:{port}/readyz"));
    cmd.output().expect("the hook's command runs")
}

/// Polls the object until `done` holds.
pub async fn wait_for(
    api: &Api<AssetScan>,
    name: &str,
    what: &str,
    done: impl Fn(&AssetScan) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let obj = api.get_opt(name).await.ok().flatten();
        if let Some(obj) = &obj
            && done(obj)
        {
            return serde_json::to_value(obj).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "{name} never became {what}; last seen: {:#?}",
            obj.map(|o| o.status)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn condition<'a>(obj: &'a AssetScan, type_: &str) -> Option<&'a str> {
    obj.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.as_str())
}

pub fn scan(name: &str, port: u16, software: bool) -> AssetScan {
    let packages = if software {
        json!([{"purl": "pkg:pypi/jinja2@3.1.4"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "apiVersion": "assetscan.io/v1alpha1",
        "kind": "AssetScan",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "assetId": format!("{name}.example.com"),
            "target": {"host": "127.0.0.1", "ports": [port]},
            "software": packages,
        },
    }))
    .unwrap()
}
