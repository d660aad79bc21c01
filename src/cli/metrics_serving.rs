//! How `run` serves its metrics port: TLS and the API server's access
//! checks by default, plain HTTP only when asked for.

use crate::http_access::tls::{CertificateSource, server_config};
use crate::http_access::{AccessGuard, CachePolicy, ReviewBudget};
use crate::probes::Exposure;
use clap::Args;
use std::path::PathBuf;
use tracing::warn;

#[derive(Args, Debug)]
pub struct MetricsServing {
    /// Serve /metrics over plain HTTP to anyone who reaches the port,
    /// without TLS and without asking the API server who the caller is.
    #[arg(long, env = "METRICS_PLAIN_HTTP")]
    metrics_plain_http: bool,
    /// The metrics port's certificate chain (PEM), e.g. a mounted TLS
    /// Secret's tls.crt. Without it: a self-signed certificate made at start.
    #[arg(long, env = "METRICS_TLS_CERT_FILE", requires = "metrics_tls_key_file")]
    metrics_tls_cert_file: Option<PathBuf>,
    /// The key of --metrics-tls-cert-file (PEM).
    #[arg(long, env = "METRICS_TLS_KEY_FILE", requires = "metrics_tls_cert_file")]
    metrics_tls_key_file: Option<PathBuf>,
}

impl MetricsServing {
    /// The exposure these flags ask for; access checks go through `client`.
    pub fn exposure(&self, client: &kube::Client) -> Result<Exposure, String> {
        if self.metrics_plain_http && self.metrics_tls_cert_file.is_some() {
            // Not clap's `conflicts_with`: it counts METRICS_PLAIN_HTTP=false as given.
            return Err("--metrics-plain-http serves no TLS: drop --metrics-tls-cert-file".into());
        }
        if self.metrics_plain_http {
            warn!(
                "metrics served over plain HTTP to anyone who reaches the port (--metrics-plain-http)"
            );
            return Ok(Exposure::Plain);
        }
        let source = match (&self.metrics_tls_cert_file, &self.metrics_tls_key_file) {
            (Some(cert), Some(key)) => CertificateSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => CertificateSource::SelfSigned {
                names: vec!["localhost".into()],
            },
        };
        Ok(Exposure::Secured {
            tls: server_config(&source).map_err(|e| e.to_string())?,
            guard: AccessGuard::new(
                client.clone(),
                CachePolicy::default(),
                ReviewBudget::default(),
            ),
        })
    }
}
