//! The emulator's conformance requests (`probes.rs`) sent to the API
//! emulator and, given a kubeconfig, to a real cluster too; the answers
//! compared field by field (status code, `reason`, `message`, the causes'
//! field, reason and message, and what a client reads of a successful
//! answer), and every difference reported.
//!
//! ```text
//! cargo test --all-features --test conformance                                 # the emulator alone
//! cargo test --all-features --test conformance -- --kubeconfig ~/.kube/config  # compared (make conformance)
//! ```
//!
//! On a cluster each probe gets a namespace of its own; the example CRDs
//! are installed when absent, and what the run created is removed at its
//! end (tests/e2e/cluster.rs). A difference is a failure unless
//! [`EXCEPTIONS`] explains it.

#[path = "../e2e/args.rs"]
mod args;
mod probes;
// The e2e suite's backend and cluster modules: this run uses their cluster
// half only.
#[allow(dead_code)]
#[path = "../e2e/backend.rs"]
mod backend;
#[allow(dead_code)]
#[path = "../e2e/cluster.rs"]
mod cluster;
#[path = "../../testkit/tests/common/mod.rs"]
mod common;
#[path = "../metrics_kit/mod.rs"]
mod metrics_kit;

use args::Args;
use assetscan_testkit::emulator::{Emulator, EmulatorOptions, parse_manifests};
use axum::http::Request;
use cluster::Cluster;
use kube::Client;
use probes::{PROBES, Probe, Step};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Differences the emulator keeps on purpose, each with its reason and the
/// emulator test that pins the emulator's answer: `(probe, step, field, why)`.
const EXCEPTIONS: &[(&str, &str, &str, &str)] = &[];

/// What a client reads of one answer, field by field.
type Answer = BTreeMap<String, String>;

/// One probe's answers, step by step.
type Answers = Vec<(&'static str, Answer)>;

fn main() -> ExitCode {
    let args = Args::parse();
    let selected: Vec<&Probe> = PROBES.iter().filter(|p| args.selects(p.name)).collect();
    if args.listed(selected.iter().map(|p| p.name)) {
        return ExitCode::SUCCESS;
    }
    args::runtime().block_on(async {
        match args.kubeconfig.as_deref() {
            None => on_the_emulator_alone(&selected).await,
            Some("") => failed(cluster::E2eError::NoCluster),
            Some(path) => compared(path, &selected).await,
        }
    })
}

fn failed(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("conformance: FAILED: {why}");
    ExitCode::FAILURE
}

/// The example CRDs the probes use.
fn crds() -> Vec<Value> {
    let mut crds = parse_manifests(common::CRD).expect("the fixture CRD parses");
    crds.extend([common::notes_crd(), common::counters_crd()]);
    crds
}

/// The probe on an emulator of its own.
async fn on_emulator(probe: &Probe) -> Answers {
    let emu = Emulator::start(EmulatorOptions {
        crds: crds(),
        namespaces: vec!["conformance".into()],
        ..Default::default()
    })
    .await
    .expect("emulator starts");
    run(probe, &emu.client().expect("client"), "conformance").await
}

async fn on_the_emulator_alone(selected: &[&Probe]) -> ExitCode {
    let mut requests = 0;
    for probe in selected {
        requests += on_emulator(probe).await.len();
    }
    println!(
        "conformance: {} probes, {requests} requests answered by the emulator; pass --kubeconfig to compare with a cluster",
        selected.len()
    );
    ExitCode::SUCCESS
}

async fn compared(path: &str, selected: &[&Probe]) -> ExitCode {
    let mut cluster = match Cluster::connect(path.as_ref()).await {
        Ok(cluster) => cluster,
        Err(e) => return failed(e),
    };
    println!(
        "conformance: cluster {} (Kubernetes {})",
        cluster.server, cluster.version
    );
    let outcome = compare_all(&mut cluster, selected).await;
    println!("conformance: cleaning up; what the run created, read back from the cluster:");
    let mut left_behind = false;
    for line in cluster.clean_up().await {
        left_behind |= line.contains("LEFT BEHIND");
        println!("  {line}");
    }
    match outcome {
        Err(e) => failed(e),
        Ok(0) if !left_behind => ExitCode::SUCCESS,
        Ok(0) => failed("the run left objects behind (listed above)"),
        Ok(n) => failed(format!("{n} unexplained differences (listed above)")),
    }
}

/// Runs every probe on both, prints every difference: how many are not
/// explained.
async fn compare_all(
    cluster: &mut Cluster,
    selected: &[&Probe],
) -> Result<usize, cluster::E2eError> {
    cluster.install_crds(crds()).await?;
    let (mut fields, mut explained, mut unexplained) = (0, 0, 0);
    for probe in selected {
        let namespace = cluster::create_namespace(&cluster.admin, &cluster.ledger).await?;
        let real = run(probe, &cluster.admin, &namespace).await;
        let emulated = on_emulator(probe).await;
        for ((what, emu), (_, cl)) in emulated.iter().zip(&real) {
            let keys: std::collections::BTreeSet<&String> = emu.keys().chain(cl.keys()).collect();
            for key in keys {
                fields += 1;
                let (e, c) = (emu.get(key), cl.get(key));
                if e == c {
                    continue;
                }
                let why = EXCEPTIONS
                    .iter()
                    .find(|(p, s, f, _)| *p == probe.name && s == what && f == key)
                    .map(|(.., why)| *why);
                match why {
                    Some(_) => explained += 1,
                    None => unexplained += 1,
                }
                println!(
                    "  DIFFERENCE {} / {what} / {key}:\n    emulator: {}\n    cluster:  {}{}",
                    probe.name,
                    e.map_or("(absent)", String::as_str),
                    c.map_or("(absent)", String::as_str),
                    why.map(|w| format!("\n    explained: {w}"))
                        .unwrap_or_default()
                );
            }
        }
        println!(
            "conformance: {} ... compared ({} requests)",
            probe.name,
            real.len()
        );
    }
    println!(
        "conformance: {} probes, {fields} fields compared: {} differences, {explained} explained, {unexplained} not",
        selected.len(),
        explained + unexplained
    );
    Ok(unexplained)
}

/// Sends the probe's requests in order; what a client reads of each answer.
async fn run(probe: &Probe, client: &Client, namespace: &str) -> Answers {
    let mut uid = String::new();
    let mut answers = Vec::new();
    for step in probe.steps {
        let (answer, body) = send(step, client, namespace, &uid).await;
        if let Some(u) = body.pointer("/metadata/uid").and_then(Value::as_str) {
            uid = u.to_owned();
        }
        answers.push((step.what, normalised(answer, namespace)));
    }
    answers
}

async fn send(step: &Step, client: &Client, namespace: &str, uid: &str) -> (Answer, Value) {
    let fill = |text: &str| text.replace("{ns}", namespace).replace("{uid}", uid);
    let path = if step.path.starts_with('/') {
        fill(step.path)
    } else {
        fill(&format!(
            "/apis/example.com/v1/namespaces/{{ns}}/{}",
            step.path
        ))
    };
    let request = Request::builder()
        .method(step.method)
        .uri(path)
        .header("content-type", step.content_type)
        .body(kube::client::Body::from(fill(step.body).into_bytes()))
        .expect("a request");
    let mut answer = Answer::new();
    let response = match client.send(request).await {
        Ok(response) => response,
        Err(e) => {
            answer.insert("transport".into(), e.to_string());
            return (answer, Value::Null);
        }
    };
    answer.insert("code".into(), response.status().as_u16().to_string());
    let bytes = response
        .into_body()
        .collect_bytes()
        .await
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let failure = body["kind"] == "Status" && body["status"] == "Failure";
    if failure {
        for field in ["reason", "message"] {
            answer.insert(
                field.into(),
                body[field].as_str().unwrap_or_default().to_owned(),
            );
        }
        let causes: Vec<String> = body
            .pointer("/details/causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| format!("{} | {} | {}", c["field"], c["reason"], c["message"]))
            .collect();
        answer.insert("causes".into(), causes.join("; "));
    } else {
        for pointer in step.read {
            answer.insert((*pointer).to_owned(), read(&body, pointer));
        }
    }
    (answer, body)
}

/// A pointer's value; `…/length` is an array's length, a trailing `?`
/// asks only whether the field is there.
fn read(body: &Value, pointer: &str) -> String {
    if let Some(p) = pointer.strip_suffix('?') {
        let present = body.pointer(p).is_some_and(|v| !v.is_null() && v != "");
        return if present { "present" } else { "absent" }.to_owned();
    }
    if let Some(p) = pointer.strip_suffix("/length") {
        return body
            .pointer(p)
            .and_then(Value::as_array)
            .map_or("(absent)".into(), |a| a.len().to_string());
    }
    body.pointer(pointer)
        .map_or("(absent)".into(), Value::to_string)
}

/// The answer with the run's own names (namespace, uids) made neutral.
fn normalised(answer: Answer, namespace: &str) -> Answer {
    let uid = regex::Regex::new("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("regex");
    answer
        .into_iter()
        .map(|(k, v)| {
            let v = v.replace(namespace, "{ns}");
            (k, uid.replace_all(&v, "{uid}").into_owned())
        })
        .collect()
}
