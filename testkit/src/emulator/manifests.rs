//! Kubernetes manifests as the emulator reads them: multi-document YAML (or
//! JSON), from text or from a directory of files, for CRDs to register at
//! start and for tests' fixtures.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::EmulatorError;

/// Reads CRD manifests from a directory, in file-name order.
pub fn read_crd_dir(dir: &Path) -> Result<Vec<Value>, EmulatorError> {
    let io = |source| EmulatorError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| EmulatorError::Io {
            path: file.display().to_string(),
            source,
        })?;
        out.extend(
            parse_manifests(&text).map_err(|source| EmulatorError::Yaml {
                path: file.display().to_string(),
                source: Box::new(source),
            })?,
        );
    }
    Ok(out)
}

/// Parses a multi-document YAML (or JSON) manifest, skipping empty documents.
pub fn parse_manifests(text: &str) -> Result<Vec<Value>, serde_saphyr::Error> {
    crate::yaml::from_multiple(text)
}
