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

pub use document::DocumentError;

use crate::providers::error::ProviderConfigError;
use crate::providers::http::{HttpClient, HttpError, HttpProfile, HttpSettings};
use crate::providers::http::{join_path, parse_http_url};
use assetscan_domain::{Digest, NotAsked, SbomFacts, SbomProblem, SbomRead, SbomRef};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
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
struct Source {
    http: HttpClient,
    base: Url,
}

/// Why an SBOM could not be read. Names the source and the reference, never
/// the base URL's credentials nor the document's content.
#[derive(Debug, thiserror::Error)]
pub enum SbomError {
    #[error("sbom source {0:?} is not configured")]
    UnknownSource(String),
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
            SbomError::UnknownSource(_) => SbomProblem::SourceUnknown,
            SbomError::Http { error, .. } => match error {
                HttpError::Status {
                    status: 404 | 410, ..
                } => SbomProblem::NotFound,
                HttpError::BodyTooLarge { .. } => SbomProblem::TooLarge,
                HttpError::Malformed { .. } => SbomProblem::Malformed,
                _ => SbomProblem::Unavailable,
            },
            SbomError::Document { .. } => SbomProblem::Malformed,
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
                let built = Source {
                    http: HttpClient::new(&PROFILE, &source.http)?,
                    base: parse_http_url(PROFILE.provider, "baseUrl", &source.base_url)?,
                };
                Ok((name.clone(), built))
            })
            .collect::<Result<_, ProviderConfigError>>()?;
        Ok(SbomSources { sources })
    }

    /// Reads `sbom`: fetched, checked against its pinned digest, parsed.
    pub async fn read(&self, sbom: &SbomRef) -> Result<SbomRead, SbomError> {
        let source = self
            .sources
            .get(sbom.source())
            .ok_or_else(|| SbomError::UnknownSource(sbom.source().to_owned()))?;
        let http_error = |error| SbomError::Http {
            name: sbom.source().to_owned(),
            reference: sbom.path().to_owned(),
            error,
        };
        let url = join_path(&source.base, &sbom.segments());
        let request = source
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, ACCEPTED);
        let reply = source
            .http
            .send(request)
            .await
            .and_then(|reply| reply.success())
            .map_err(http_error)?;
        let actual = Digest::from_sha256(Sha256::digest(&reply.body).into());
        if let Some(pinned) = sbom.digest().filter(|pinned| **pinned != actual) {
            return Err(SbomError::DigestMismatch {
                name: sbom.source().to_owned(),
                reference: sbom.path().to_owned(),
                pinned: pinned.clone(),
                actual,
            });
        }
        let contents = document::read(&reply.body).map_err(|error| SbomError::Document {
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
