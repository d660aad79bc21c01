//! The metrics port's TLS: the certificate and key of a mounted Secret
//! (`tls.crt`/`tls.key`, e.g. from cert-manager), or else a self-signed
//! certificate made at start, as controller-runtime does; Prometheus then
//! verifies with the Secret's CA or skips verification, as the chart's
//! values say.

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::debug;

/// A certificate that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("metrics TLS certificate {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("self-signed metrics certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    #[error("metrics TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum CertificateSource {
    Files {
        cert: PathBuf,
        key: PathBuf,
    },
    /// Made at start for these DNS names.
    SelfSigned {
        names: Vec<String>,
    },
}

/// The server configuration for `source` (HTTP/1.1 and HTTP/2).
pub fn server_config(source: &CertificateSource) -> Result<Arc<ServerConfig>, TlsError> {
    let (chain, key) = match source {
        CertificateSource::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
        CertificateSource::SelfSigned { names } => self_signed(names)?,
    };
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_error(path, e))?;
    if chain.is_empty() {
        return Err(file_error(path, "no certificate in the file"));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error(path, e))
}

fn file_error(path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn self_signed(
    names: &[String],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let made = rcgen::generate_simple_self_signed(names.to_vec())?;
    let key = PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((vec![made.cert.der().clone()], key.into()))
}

/// Longest a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshaken connections waiting for the server to take them.
const READY_QUEUE: usize = 64;

/// A listener whose connections are TLS streams. Handshakes run on their
/// own tasks, so that a slow or silent client holds up no other.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts on `tcp` until the returned listener is dropped.
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        let (sender, ready) = mpsc::channel(READY_QUEUE);
        tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), sender));
        Ok(Self { ready, local })
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            _ = ready.closed() => return,
            accepted = tcp.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    debug!(error = %err, "metrics accept failed");
                    // As axum's listener does: the error is often a full
                    // file table, which a pause lets drain.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (acceptor, ready) = (acceptor.clone(), ready.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(err)) => debug!(error = %err, %peer, "metrics TLS handshake failed"),
                Err(_) => debug!(%peer, "metrics TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_makes_a_server_config() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let source = CertificateSource::SelfSigned {
            names: vec!["localhost".into()],
        };
        assert!(server_config(&source).is_ok());
    }

    #[test]
    fn a_missing_certificate_file_is_named_in_the_error() {
        let source = CertificateSource::Files {
            cert: "/nonexistent/tls.crt".into(),
            key: "/nonexistent/tls.key".into(),
        };
        let err = server_config(&source).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("/nonexistent/tls.crt")));
    }
}
