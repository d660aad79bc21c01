//! A real cluster's answers to the probes, kept in the repository
//! (`recorded.json`), so that a run without a cluster still compares the
//! emulator with a real API server instead of only counting its answers.
//!
//! The file holds exactly what the comparison looks at (each step's
//! [`Answer`], normalised as the live comparison normalises it) and where it
//! came from: the server's `gitVersion` and the day of the recording. To
//! record it again, from a cluster the run may create namespaces (and, when
//! absent, the example CRDs) in:
//!
//! ```text
//! cargo test --all-features --test conformance -- --kubeconfig PATH --record tests/conformance/recorded.json
//! ```

use crate::{Answer, Answers};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The recording a run without a cluster compares with.
pub const RECORDED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/conformance/recorded.json"
);

/// How to make the recording, for the file itself and for the error when it
/// is missing.
pub const HOW_TO_RECORD: &str = "cargo test --all-features --test conformance -- --kubeconfig PATH --record tests/conformance/recorded.json";

/// The file's content.
#[derive(Serialize, Deserialize)]
pub struct Recording {
    /// What the file is and how to make it again, for its reader.
    about: String,
    /// The `gitVersion` the recorded API server reported, as it reported it.
    pub server_version: String,
    /// The day of the recording (UTC).
    pub recorded_on: String,
    /// Each probe's steps in order, by the probe's name.
    pub probes: BTreeMap<String, Vec<Recorded>>,
}

/// One step's answer: the step named as `probes.rs` names it, so that a
/// step added, removed or renamed there shows as a difference.
#[derive(Serialize, Deserialize)]
pub struct Recorded {
    step: String,
    answer: Answer,
}

impl Recording {
    /// The answers of a cluster running `server_version`, recorded today.
    pub fn new(server_version: &str, answers: Vec<(&str, Answers)>) -> Recording {
        let probes = answers
            .into_iter()
            .map(|(probe, steps)| {
                let steps = steps
                    .into_iter()
                    .map(|(step, answer)| Recorded { step, answer })
                    .collect();
                (probe.to_owned(), steps)
            })
            .collect();
        Recording {
            about: format!(
                "A real API server's answers to tests/conformance/probes.rs, compared with the emulator's when the conformance suite runs without a cluster. Recorded with: {HOW_TO_RECORD}"
            ),
            server_version: server_version.to_owned(),
            recorded_on: k8s_openapi::jiff::Timestamp::now()
                .strftime("%Y-%m-%d")
                .to_string(),
            probes,
        }
    }

    /// Reads the recording; the error says how to make it when it is missing.
    pub fn load(path: &str) -> Result<Recording, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!("cannot read {path} ({e}); record it from a cluster: {HOW_TO_RECORD}")
        })?;
        serde_json::from_str(&text).map_err(|e| format!("{path} is not a recording: {e}"))
    }

    /// Writes the recording, as a reviewable diff: pretty, keys sorted.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The recorded answers of `probe`, in the shape the comparison takes.
    pub fn answers(&self, probe: &str) -> Option<Answers> {
        let steps = self.probes.get(probe)?;
        Some(
            steps
                .iter()
                .map(|r| (r.step.clone(), r.answer.clone()))
                .collect(),
        )
    }
}
