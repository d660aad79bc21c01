//! Secrets (webhook URLs, the WeCom key, HMAC keys, bearer tokens) and where
//! they come from. The configuration file never holds a secret, only its
//! source: `{env: NAME}` or `{file: /path}` (a mounted Kubernetes Secret).

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// A secret value. `Debug` and `Display` print `***`, so a secret cannot leak
/// through a log line, an error message or a `{:?}` of a config struct; the
/// value is reachable only through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself. Call it where the value is put on the wire, nowhere
    /// else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where a secret is read from. YAML: `{env: NAME}` or `{file: /path}`,
/// exactly one of the two. Leading and trailing whitespace (the newline
/// of a file) is trimmed.
///
/// Secrets are read once, when the provider is built: rotating one means
/// restarting the operator.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "SecretFromKeys")]
pub enum SecretFrom {
    /// The name of an environment variable.
    Env(String),
    /// The path of a file.
    File(PathBuf),
    /// A value the operator read itself, named by where it came from (`key
    /// url of Secret team-a/alerts`): a key of a team's Secret, for a
    /// channel the team defined. Never read from configuration.
    Given { source: String, value: Secret },
}

/// The shape [`SecretFromKeys`] accepts, for the chart's values schema:
/// exactly one of the two keys, non-empty.
impl JsonSchema for SecretFrom {
    fn schema_name() -> Cow<'static, str> {
        "SecretFrom".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Where a secret comes from: {env: NAME} or {file: /path}, never the secret itself.",
            "type": "object",
            "additionalProperties": false,
            "minProperties": 1,
            "maxProperties": 1,
            "properties": {
                "env": { "type": "string", "minLength": 1 },
                "file": { "type": "string", "minLength": 1 },
            },
        })
    }
}

/// The YAML shape of [`SecretFrom`]: a map with one of two keys, checked
/// here so that a wrong shape gets one message that says what is expected
/// (and `!env NAME`, a YAML tag, is not a second way to write it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretFromKeys {
    env: Option<String>,
    file: Option<PathBuf>,
}

impl TryFrom<SecretFromKeys> for SecretFrom {
    type Error = &'static str;

    fn try_from(keys: SecretFromKeys) -> Result<SecretFrom, Self::Error> {
        match (keys.env, keys.file) {
            (Some(env), None) if !env.is_empty() => Ok(SecretFrom::Env(env)),
            (None, Some(file)) if !file.as_os_str().is_empty() => Ok(SecretFrom::File(file)),
            _ => Err("a secret source needs exactly one non-empty key: `env` or `file`"),
        }
    }
}

/// Files larger than this are not secrets but a mistake in the config.
const MAX_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// Why a secret could not be loaded. Names the variable or the path, never
/// the value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("environment variable {0} is not set")]
    EnvMissing(String),
    #[error("environment variable {0} is not valid UTF-8")]
    EnvNotUnicode(String),
    #[error("cannot read secret file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("the secret from {0} is empty")]
    Empty(String),
}

impl SecretFrom {
    /// Reads the secret now.
    pub fn load(&self) -> Result<Secret, SecretError> {
        let raw = match self {
            SecretFrom::Env(name) => std::env::var(name).map_err(|e| match e {
                std::env::VarError::NotPresent => SecretError::EnvMissing(name.clone()),
                std::env::VarError::NotUnicode(_) => SecretError::EnvNotUnicode(name.clone()),
            })?,
            SecretFrom::File(path) => read_small_file(path)?,
            SecretFrom::Given { value, .. } => value.expose().to_owned(),
        };
        let value = raw.trim();
        if value.is_empty() {
            return Err(SecretError::Empty(self.describe()));
        }
        Ok(Secret::new(value))
    }

    /// `env NAME` or `file /path`, for messages.
    pub fn describe(&self) -> String {
        match self {
            SecretFrom::Env(name) => format!("env {name}"),
            SecretFrom::File(path) => format!("file {}", path.display()),
            SecretFrom::Given { source, .. } => source.clone(),
        }
    }
}

fn read_small_file(path: &Path) -> Result<String, SecretError> {
    let fail = |reason: String| SecretError::File {
        path: path.to_path_buf(),
        reason,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| fail(e.kind().to_string()))?
        .len();
    if len > MAX_SECRET_FILE_BYTES {
        return Err(fail(format!(
            "{len} bytes is more than the {MAX_SECRET_FILE_BYTES} a secret may have"
        )));
    }
    // The error kind is all an operator needs; the message stays free of
    // anything read from the file.
    std::fs::read_to_string(path).map_err(|e| fail(e.kind().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn yaml_shapes() {
        let env: SecretFrom = crate::yaml::from_str("{env: SLACK_URL}").unwrap();
        assert_eq!(env, SecretFrom::Env("SLACK_URL".into()));
        let file: SecretFrom = crate::yaml::from_str("file: /run/secrets/key").unwrap();
        assert_eq!(file, SecretFrom::File("/run/secrets/key".into()));
        for bad in [
            "{}",
            "{env: A, file: /b}",
            "{env: ''}",
            "{path: /x}",
            "!env A",
        ] {
            assert!(crate::yaml::from_str::<SecretFrom>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn file_secret_is_trimmed_and_errors_name_the_source_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        let secret = SecretFrom::File(path.clone()).load().unwrap();
        assert_eq!(secret.expose(), "s3cr3t-value");

        std::fs::write(&path, "  \n").unwrap();
        let err = SecretFrom::File(path.clone()).load().unwrap_err();
        assert!(matches!(err, SecretError::Empty(_)), "{err}");

        let missing = SecretFrom::File(dir.path().join("nope"))
            .load()
            .unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");

        let unset = SecretFrom::Env("ASSETSCAN_TEST_SURELY_UNSET_VAR".into()).load();
        assert!(matches!(unset, Err(SecretError::EnvMissing(_))));
    }
}
