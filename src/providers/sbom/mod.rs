//! SBOM sources: where the platform team keeps the SBOMs its CI produces
//! (an object store, Dependency-Track, an artifact server), each configured
//! by name with its base URL, credential and limits. An AssetScan names a
//! source and a reference in it, never a URL: the document is read from
//! `GET <baseUrl>/<ref>` (each segment of the reference percent-encoded),
//! without redirects, within the source's `timeout` and `maxBodyBytes`,
//! checked against the pinned digest when there is one, and its packages
//! taken from its purls ([`document`]).
//!
//! ```yaml
//! sbomSources:
//!   artifacts:
//!     baseUrl: https://artifacts.internal/sbom
//!     bearerTokenFrom: {file: /var/run/secrets/sbom/token}
//!     maxBodyBytes: 16777216
//!     timeout: 20s
//! ```

mod document;
mod vex;

pub use document::DocumentError;

/// What an SBOM document names, as a run reads it: its format, the distinct
/// packages asked about, and the coverage of its entries.
pub struct Inspection {
    pub format: String,
    pub packages: Vec<assetscan_domain::Package>,
    pub coverage: assetscan_domain::Coverage,
}

/// Reads `body` as a run reads an SBOM, without fetching it.
pub fn inspect(body: &[u8]) -> Result<Inspection, DocumentError> {
    document::read(body).map(|c| Inspection {
        format: c.format,
        packages: c.packages,
        coverage: c.coverage,
    })
}
pub use vex::VexError;

use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpError, HttpProfile, HttpSettings};
use crate::providers::http::{join_path, parse_http_url};
use assetscan_domain::{Digest, NotAsked, SbomFacts, SbomProblem, SbomRead, SbomRef, Statement};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Defaults: an image's SBOM is a few MB at most (a Syft CycloneDX of a
/// 600-package Ubuntu image is about 3 MB).
const PROFILE: HttpProfile = HttpProfile::document("sbom", Duration::from_secs(10), 16 << 20);

/// The media types of the formats read ([`document`]), any other last.
const ACCEPTED: &str = "application/vnd.cyclonedx+json, application/vnd.cyclonedx+xml, \
    application/spdx+json, text/spdx, application/json;q=0.9, application/xml;q=0.9, \
    text/plain;q=0.5, */*;q=0.1";

/// One source: `baseUrl`, and `timeout` (default `10s`), `maxBodyBytes`
/// (default 16 MiB), `bearerTokenFrom`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SbomSourceConfig {
    pub base_url: String,
    #[serde(flatten)]
    pub http: HttpSettings,
}

/// The configured sources, by name.
#[derive(Debug, Default)]
pub struct SbomSources {
    sources: BTreeMap<String, Source>,
}

#[derive(Debug)]
enum Source {
    /// `GET <baseUrl>/<ref>`.
    Http { http: HttpClient, base: Url },
    /// A local file the CLI was given (`scan --sbom FILE`), read whatever
    /// the reference, within the same size bound as a source's default.
    File { path: PathBuf },
}

/// Why an SBOM could not be read. Names the source and the reference, never
/// the base URL's credentials nor the document's content.
#[derive(Debug, thiserror::Error)]
pub enum SbomError {
    #[error("sbom {name}/{reference}: the source {name:?} is not configured")]
    UnknownSource { name: String, reference: String },
    #[error("{path}: {error}")]
    File {
        path: String,
        #[source]
        error: std::io::Error,
    },
    #[error("{path} is larger than {limit} bytes")]
    FileTooLarge { path: String, limit: u64 },
    #[error("sbom {name}/{reference}: {error}")]
    Http {
        name: String,
        reference: String,
        error: HttpError,
    },
    #[error("sbom {name}/{reference}: {error}")]
    Document {
        name: String,
        reference: String,
        error: DocumentError,
    },
    #[error("vex {name}/{reference}: {error}")]
    Vex {
        name: String,
        reference: String,
        error: VexError,
    },
    #[error("sbom {name}/{reference}: the document's digest is {actual}, not the pinned {pinned}")]
    DigestMismatch {
        name: String,
        reference: String,
        pinned: Digest,
        actual: Digest,
    },
}

impl SbomError {
    /// The error as a tenant reads it in the status: which SBOM and the
    /// error's class, never the source's answer or the document's text.
    pub fn summary(&self) -> String {
        match self {
            SbomError::Http {
                name,
                reference,
                error,
            } => format!("sbom {name}/{reference}: {}", error.summary()),
            SbomError::Document {
                name,
                reference,
                error,
            } => format!("sbom {name}/{reference}: {}", error.summary()),
            SbomError::Vex {
                name,
                reference,
                error,
            } => format!("vex {name}/{reference}: {}", error.summary()),
            other => other.to_string(),
        }
    }

    /// Only a source that failed or did not answer may do better later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, SbomError::Http { error, .. } if error.is_retryable())
    }

    /// The condition reason's kind.
    pub fn problem(&self) -> SbomProblem {
        match self {
            SbomError::UnknownSource { .. } => SbomProblem::SourceUnknown,
            SbomError::File { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
                SbomProblem::NotFound
            }
            SbomError::File { .. } => SbomProblem::Unavailable,
            SbomError::FileTooLarge { .. } => SbomProblem::TooLarge,
            SbomError::Http { error, .. } => match error {
                HttpError::Status {
                    status: 404 | 410, ..
                } => SbomProblem::NotFound,
                HttpError::BodyTooLarge { .. } => SbomProblem::TooLarge,
                HttpError::Malformed { .. } => SbomProblem::Malformed,
                _ => SbomProblem::Unavailable,
            },
            SbomError::Document { .. } | SbomError::Vex { .. } => SbomProblem::Malformed,
            SbomError::DigestMismatch { .. } => SbomProblem::DigestMismatch,
        }
    }
}

impl SbomSources {
    pub fn from_config(
        config: &BTreeMap<String, SbomSourceConfig>,
    ) -> Result<SbomSources, ProviderConfigError> {
        let sources = config
            .iter()
            .map(|(name, source)| {
                let named = |e: ProviderConfigError| e.of("sbomSources", name);
                let built = Source::Http {
                    http: HttpClient::new(&PROFILE, &source.http).map_err(named)?,
                    base: parse_http_url(PROFILE.provider, "baseUrl", &source.base_url)
                        .map_err(named)?,
                };
                Ok((name.clone(), built))
            })
            .collect::<Result<_, ProviderConfigError>>()?;
        Ok(SbomSources { sources })
    }

    /// Adds the local file `path` as the source `name`: the CLI's `--sbom`
    /// and `--vex` are read through the same code as an AssetScan's.
    pub fn add_file(&mut self, name: &str, path: PathBuf) {
        self.sources.insert(name.to_owned(), Source::File { path });
    }

    /// Reads `sbom`: fetched, checked against its pinned digest, parsed.
    pub async fn read(&self, sbom: &SbomRef) -> Result<SbomRead, SbomError> {
        let (body, actual) = self.fetch(sbom).await?;
        let contents = document::read(&body).map_err(|error| SbomError::Document {
            name: sbom.source().to_owned(),
            reference: sbom.path().to_owned(),
            error,
        })?;
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let coverage = contents.coverage;
        let skipped = coverage
            .not_asked
            .get(&NotAsked::NoPurl)
            .copied()
            .unwrap_or(0);
        Ok(SbomRead {
            facts: SbomFacts {
                digest: Some(actual),
                packages: count(contents.packages.len()),
                skipped,
                unsupported: coverage.not_asked_total().saturating_sub(skipped),
                format: Some(contents.format),
                ..SbomFacts::of(sbom)
            },
            packages: contents.packages,
            coverage,
            origins: contents.origins,
        })
    }

    /// Reads the VEX document `vex` names, from a source as an SBOM is
    /// read: its statements that clear findings, each named by the
    /// document's place and its number in it.
    pub async fn read_vex(&self, vex: &SbomRef) -> Result<Vec<Statement>, SbomError> {
        let (body, _) = self.fetch(vex).await?;
        let name = format!("VEX {}/{}", vex.source(), vex.path());
        vex::read(&body, &name).map_err(|error| SbomError::Vex {
            name: vex.source().to_owned(),
            reference: vex.path().to_owned(),
            error,
        })
    }

    /// The document `sbom` names and its digest, checked against the
    /// pinned one.
    async fn fetch(&self, sbom: &SbomRef) -> Result<(Vec<u8>, Digest), SbomError> {
        let source = self
            .sources
            .get(sbom.source())
            .ok_or_else(|| SbomError::UnknownSource {
                name: sbom.source().to_owned(),
                reference: sbom.path().to_owned(),
            })?;
        let body = match source {
            Source::Http { http, base } => Self::get(http, base, sbom).await?,
            Source::File { path } => {
                read_capped(path, PROFILE.max_body_bytes).map_err(|error| match error {
                    Unread::Io(error) => SbomError::File {
                        path: path.display().to_string(),
                        error,
                    },
                    Unread::TooLarge(limit) => SbomError::FileTooLarge {
                        path: path.display().to_string(),
                        limit,
                    },
                })?
            }
        };
        let actual = Digest::from_sha256(Sha256::digest(&body).into());
        if let Some(pinned) = sbom.digest().filter(|pinned| **pinned != actual) {
            return Err(SbomError::DigestMismatch {
                name: sbom.source().to_owned(),
                reference: sbom.path().to_owned(),
                pinned: pinned.clone(),
                actual,
            });
        }
        Ok((body, actual))
    }

    /// `GET <base>/<ref>`, without redirects, within the source's limits.
    async fn get(http: &HttpClient, base: &Url, sbom: &SbomRef) -> Result<Vec<u8>, SbomError> {
        let http_error = |error| SbomError::Http {
            name: sbom.source().to_owned(),
            reference: sbom.path().to_owned(),
            error,
        };
        let url = join_path(base, &sbom.segments());
        let request = http.get(url).header(reqwest::header::ACCEPT, ACCEPTED);
        let reply = http
            .send(request)
            .await
            .and_then(|reply| reply.success())
            .map_err(http_error)?;
        Ok(reply.body.to_vec())
    }
}

/// Why a local document was not read.
enum Unread {
    Io(std::io::Error),
    TooLarge(u64),
}

/// A local document, at most `limit` bytes.
fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, Unread> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(Unread::Io)?;
    let mut body = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut body)
        .map_err(Unread::Io)?;
    if body.len() as u64 > limit {
        return Err(Unread::TooLarge(limit));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_source_is_named_with_the_ref() {
        let sources = SbomSources::default();
        let sbom = SbomRef::new("nowhere", "images/web/1.cdx.json", None).unwrap();
        let err = sources.read(&sbom).await.unwrap_err();
        assert_eq!(err.problem(), SbomProblem::SourceUnknown);
        assert_eq!(
            err.summary(),
            "sbom nowhere/images/web/1.cdx.json: the source \"nowhere\" is not configured"
        );
    }

    #[test]
    fn sources_are_checked_when_built() {
        let good: BTreeMap<String, SbomSourceConfig> = crate::yaml::from_str(
            "{artifacts: {baseUrl: 'http://127.0.0.1:9/sbom', timeout: 2s, maxBodyBytes: 4096}}",
        )
        .unwrap();
        assert!(SbomSources::from_config(&good).is_ok());
        let bad: BTreeMap<String, SbomSourceConfig> =
            crate::yaml::from_str("{a: {baseUrl: 'ftp://x'}}").unwrap();
        let err = SbomSources::from_config(&bad).unwrap_err();
        assert!(err.to_string().contains("baseUrl"), "{err}");
        assert!(
            crate::yaml::from_str::<BTreeMap<String, SbomSourceConfig>>(
                "{a: {baseUrl: 'http://x', url: 'http://y'}}"
            )
            .is_err()
        );
    }
}
