//! A real operator process for the GitOps checks, and running the
//! `helm test` hook's script against it.

use assetscan_testkit::process::{OperatorCommand, OperatorProcess, free_port};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// `assetscan-operator run` on a free loopback port, served as the chart
/// serves it (TLS, self-signed), watching namespace `default` through
/// `kubeconfig`, with one attempt per step and its vulnerability source at
/// `127.0.0.1:<vuln_port>`; its files in `dir`.
pub fn start_operator(
    dir: &Path,
    redis_url: &str,
    kubeconfig: &Path,
    vuln_port: u16,
) -> OperatorProcess {
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "redis: {{timeout: 1s}}\n\
             lock: {{ttl: 3s}}\n\
             steps:\n  onlineCheck: {{timeout: 2s, maxAttempts: 1}}\n  vulnQuery: {{timeout: 2s, maxAttempts: 1}}\n\
             providers:\n  online: {{tcp: {{timeout: 2s, egress: {{allow: [127.0.0.1/32]}}}}}}\n  \
             vulnerabilities: {{kind: osv, baseUrl: \"http://127.0.0.1:{vuln_port}\", timeout: 2s}}\n  \
             threatIntel: {{kev: {{enabled: false}}, epss: {{enabled: false}}}}\n"
        ),
    )
    .unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_assetscan-operator"));
    OperatorCommand::new(binary, &config, redis_url, kubeconfig, "gitops", "default")
        .metrics_port(free_port())
        .secured_metrics()
        .spawn(&dir.join("operator.log"))
        .expect("operator starts")
}

/// Runs the `helm test` pod's command here, as the pod would, with its
/// environment and READYZ_URL pointing at `port` (its scheme kept).
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
    let mut scheme = "http";
    for var in container["env"].as_array().unwrap() {
        let (name, value) = (
            var["name"].as_str().unwrap(),
            var["value"].as_str().unwrap(),
        );
        if name == "READYZ_URL" {
            scheme = value.split_once("://").unwrap().0;
        }
        cmd.env(name, value);
    }
    cmd.env("READYZ_URL", format!("{scheme}://127.0.0.1:{port}/readyz"));
    cmd.output().expect("the hook's command runs")
}
