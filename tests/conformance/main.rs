//! The emulator's conformance requests (`probes.rs`) sent to the API
//! emulator and compared, field by field (status code, `reason`, `message`,
//! the causes' field, reason and message, and what a client reads of a
//! successful answer), with a real API server's answers: a cluster's, given
//! a kubeconfig, or else those recorded from one (`recorded.json`, see
//! `recording.rs`). Every difference is reported.
//!
//! ```text
//! cargo test --all-features --test conformance                                 # against recorded.json (make test)
//! cargo test --all-features --test conformance -- --kubeconfig ~/.kube/config  # against a cluster (make conformance)
//! cargo test --all-features --test conformance -- --kubeconfig ~/.kube/config --record tests/conformance/recorded.json
//! ```
//!
//! The last command compares with the cluster and writes its answers as the
//! new recording. On a cluster each probe gets a namespace of its own; the
//! example CRDs are installed when absent, and what the run created is
//! removed at its end (tests/e2e/cluster.rs). A difference, and a probe the
//! recording lacks, is a failure unless [`EXCEPTIONS`] explains it: the
//! same exceptions and the same comparison for both references.

#[path = "../e2e/args.rs"]
mod args;
mod probes;
mod recording;
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
use recording::{HOW_TO_RECORD, RECORDED, Recording};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Differences the emulator keeps on purpose, each with its reason and the
/// emulator test that pins the emulator's answer: `(probe, step, field, why)`.
const EXCEPTIONS: &[(&str, &str, &str, &str)] = &[];

/// What a client reads of one answer, field by field.
type Answer = BTreeMap<String, String>;

/// One probe's answers, step by step, each with the step's name.
type Answers = Vec<(String, Answer)>;

fn main() -> ExitCode {
    let args = Args::parse();
    let selected: Vec<&Probe> = PROBES.iter().filter(|p| args.selects(p.name)).collect();
    if args.listed(selected.iter().map(|p| p.name)) {
        return ExitCode::SUCCESS;
    }
    if let Some(why) = refused(&args) {
        return failed(why);
    }
    args::runtime().block_on(async {
        match args.kubeconfig.as_deref() {
            None => against_the_recording(&selected).await,
            Some("") => failed(cluster::E2eError::NoCluster),
            Some(path) => compared(path, &selected, args.record.as_deref()).await,
        }
    })
}

/// Why `--record` cannot be done as asked: a recording is a cluster's
/// answers to every probe, so that a run without a cluster finds them all.
fn refused(args: &Args) -> Option<&'static str> {
    match args.record.as_deref() {
        None => None,
        Some("") => Some("--record needs the path to write the recording to"),
        Some(_) if args.kubeconfig.is_none() => {
            Some("--record needs --kubeconfig: the answers recorded are a cluster's")
        }
        Some(_) if !args.filters.is_empty() => {
            Some("--record writes every probe's answers: drop the names to filter by")
        }
        Some(_) => None,
    }
}

fn failed(why: impl std::fmt::Display) -> ExitCode {
    eprintln!("conformance: FAILED: {why}");
    ExitCode::FAILURE
}

/// The example CRDs the probes use.
fn crds() -> Vec<Value> {
    let mut crds = parse_manifests(common::CRD).expect("the fixture CRD parses");
    crds.extend([
        common::notes_crd(),
        common::counters_crd(),
        common::tags_crd(),
    ]);
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

/// Without a cluster: the emulator's answers compared with those recorded
/// from one, so that `make test` fails when the emulator drifts from a
/// real API server.
async fn against_the_recording(selected: &[&Probe]) -> ExitCode {
    let recording = match Recording::load(RECORDED) {
        Ok(recording) => recording,
        Err(e) => return failed(e),
    };
    let (mut tally, mut requests) = (Tally::default(), 0);
    for probe in selected {
        let emulated = on_emulator(probe).await;
        requests += emulated.len();
        match recording.answers(probe.name) {
            Some(recorded) => compare(&mut tally, probe.name, &emulated, ("recorded", &recorded)),
            None => {
                tally.unexplained += 1;
                println!(
                    "  NOT RECORDED {}: recorded.json has no answers for it; record them: {HOW_TO_RECORD}",
                    probe.name
                );
            }
        }
    }
    tally.unexplained += no_longer_probed(&recording);
    println!(
        "conformance: {} probes, {requests} requests to the emulator compared with Kubernetes {} as recorded on {}: {}",
        selected.len(),
        recording.server_version,
        recording.recorded_on,
        tally.summary()
    );
    tally.verdict()
}

/// The recorded probes `probes.rs` no longer has, each printed: a recording
/// that does not match the probes is out of date.
fn no_longer_probed(recording: &Recording) -> usize {
    let stale: Vec<&String> = (recording.probes.keys())
        .filter(|name| PROBES.iter().all(|p| p.name != name.as_str()))
        .collect();
    for name in &stale {
        println!(
            "  NO SUCH PROBE {name}: recorded, but probes.rs has no such probe; record again: {HOW_TO_RECORD}"
        );
    }
    stale.len()
}

/// With a cluster: the emulator's answers compared with the cluster's, and
/// with `record`, the cluster's written there as the new recording.
async fn compared(path: &str, selected: &[&Probe], record: Option<&str>) -> ExitCode {
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
    let (tally, answers) = match outcome {
        Ok(outcome) => outcome,
        Err(e) => return failed(e),
    };
    if let Some(path) = record
        && let Err(e) = record_answers(path.as_ref(), &cluster.version, answers)
    {
        return failed(e);
    }
    if left_behind {
        return failed("the run left objects behind (listed above)");
    }
    tally.verdict()
}

/// Runs every probe on both, prints every difference: what the comparison
/// found, and the cluster's answers.
async fn compare_all(
    cluster: &mut Cluster,
    selected: &[&Probe],
) -> Result<(Tally, Vec<(&'static str, Answers)>), cluster::E2eError> {
    cluster.install_crds(crds()).await?;
    let (mut tally, mut answers) = (Tally::default(), Vec::new());
    for probe in selected {
        let namespace = cluster::create_namespace(&cluster.admin, &cluster.ledger).await?;
        let real = run(probe, &cluster.admin, &namespace).await;
        let emulated = on_emulator(probe).await;
        compare(&mut tally, probe.name, &emulated, ("cluster", &real));
        println!(
            "conformance: {} ... compared ({} requests)",
            probe.name,
            real.len()
        );
        answers.push((probe.name, real));
    }
    println!(
        "conformance: {} probes, {}",
        selected.len(),
        tally.summary()
    );
    Ok((tally, answers))
}

/// Writes the cluster's answers as the recording; refuses one with a
/// request the cluster never answered, which would be compared as a
/// transport error forever after.
fn record_answers(
    path: &std::path::Path,
    version: &str,
    answers: Vec<(&str, Answers)>,
) -> Result<(), String> {
    let unanswered = answers.iter().find_map(|(probe, steps)| {
        let (step, answer) = steps.iter().find(|(_, a)| a.contains_key("transport"))?;
        Some(format!("{probe} / {step}: {}", answer["transport"]))
    });
    if let Some(unanswered) = unanswered {
        return Err(format!(
            "not recorded: the cluster did not answer {unanswered}"
        ));
    }
    let probes = answers.len();
    Recording::new(version, answers).save(path)?;
    println!(
        "conformance: the answers to {probes} probes recorded in {} (Kubernetes {version})",
        path.display()
    );
    Ok(())
}

/// What the comparison found, over every probe compared.
#[derive(Default)]
struct Tally {
    fields: usize,
    explained: usize,
    unexplained: usize,
}

impl Tally {
    fn summary(&self) -> String {
        format!(
            "{} fields compared: {} differences, {} explained, {} not",
            self.fields,
            self.explained + self.unexplained,
            self.explained,
            self.unexplained
        )
    }

    /// A difference [`EXCEPTIONS`] does not explain fails the run.
    fn verdict(&self) -> ExitCode {
        match self.unexplained {
            0 => ExitCode::SUCCESS,
            n => failed(format!("{n} unexplained differences (listed above)")),
        }
    }
}

/// The one comparison, of the emulator's answers to `probe` with a real
/// API server's (`reference`: a cluster's live, or the recording's, named
/// by its label), step by step: a step one side lacks or names otherwise
/// is a difference no exception explains.
fn compare(tally: &mut Tally, probe: &str, emulated: &Answers, reference: (&str, &Answers)) {
    let (label, real) = reference;
    for i in 0..emulated.len().max(real.len()) {
        match (emulated.get(i), real.get(i)) {
            (Some((what, emu)), Some((step, other))) if what == step => {
                compare_fields(tally, (probe, what), emu, (label, other));
            }
            (emu, other) => {
                tally.unexplained += 1;
                println!(
                    "  DIFFERENCE {probe} / step {}: the steps differ: emulator {}, {label} {}",
                    i + 1,
                    step_name(emu),
                    step_name(other)
                );
            }
        }
    }
}

fn step_name(step: Option<&(String, Answer)>) -> String {
    step.map_or("nothing".into(), |(what, _)| format!("\"{what}\""))
}

/// One step's answers, field by field; every difference printed, with its
/// explanation from [`EXCEPTIONS`] when it has one.
fn compare_fields(
    tally: &mut Tally,
    (probe, what): (&str, &str),
    emu: &Answer,
    (label, real): (&str, &Answer),
) {
    let label = format!("{label}:");
    let keys: std::collections::BTreeSet<&String> = emu.keys().chain(real.keys()).collect();
    for key in keys {
        tally.fields += 1;
        let (e, r) = (emu.get(key), real.get(key));
        if e == r {
            continue;
        }
        let why = EXCEPTIONS
            .iter()
            .find(|(p, s, f, _)| *p == probe && *s == what && f == key)
            .map(|(.., why)| *why);
        match why {
            Some(_) => tally.explained += 1,
            None => tally.unexplained += 1,
        }
        println!(
            "  DIFFERENCE {probe} / {what} / {key}:\n    emulator: {}\n    {label:<9} {}{}",
            e.map_or("(absent)", String::as_str),
            r.map_or("(absent)", String::as_str),
            why.map(|w| format!("\n    explained: {w}"))
                .unwrap_or_default()
        );
    }
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
        answers.push((step.what.to_owned(), normalised(answer, namespace)));
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
