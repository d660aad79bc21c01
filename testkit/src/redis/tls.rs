//! Certificates for TLS tests, made with the `openssl` command line in a
//! temp dir: a CA, a server certificate for `127.0.0.1`/`localhost` and a
//! client certificate both signed by it, and a second CA that signed
//! nothing here (what an operator trusting the wrong CA holds).

use super::error::FixtureError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The files, valid for a day. P-256 keys: quick to make, and accepted by
/// both OpenSSL (redis-server) and rustls (the operator).
pub struct TlsFiles {
    dir: tempfile::TempDir,
}

impl TlsFiles {
    pub fn generate() -> Result<TlsFiles, FixtureError> {
        let files = TlsFiles {
            dir: tempfile::Builder::new().prefix("asc-tls-").tempdir()?,
        };
        files.make_ca("ca", "assetscan test CA")?;
        files.make_ca("other-ca", "an unrelated CA")?;
        files.make_signed(
            "server",
            "redis.test",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )?;
        files.make_signed("client", "assetscan", "extendedKeyUsage=clientAuth\n")?;
        Ok(files)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA that signed the server and client certificates.
    pub fn ca(&self) -> PathBuf {
        self.path("ca.crt")
    }

    /// A CA that signed neither.
    pub fn other_ca(&self) -> PathBuf {
        self.path("other-ca.crt")
    }

    pub fn server_cert(&self) -> PathBuf {
        self.path("server.crt")
    }

    pub fn server_key(&self) -> PathBuf {
        self.path("server.key")
    }

    pub fn client_cert(&self) -> PathBuf {
        self.path("client.crt")
    }

    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn make_ca(&self, name: &str, subject: &str) -> Result<(), FixtureError> {
        let mut req = openssl("req");
        req.args(["-x509", "-days", "1"])
            .args(NEW_KEY)
            .arg("-subj")
            .arg(format!("/CN={subject}"))
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .arg("-keyout")
            .arg(self.path(&format!("{name}.key")))
            .arg("-out")
            .arg(self.path(&format!("{name}.crt")));
        run(req)
    }

    fn make_signed(&self, name: &str, subject: &str, extensions: &str) -> Result<(), FixtureError> {
        let csr = self.path(&format!("{name}.csr"));
        let ext = self.path(&format!("{name}.ext"));
        std::fs::write(&ext, extensions)?;
        let mut req = openssl("req");
        req.args(NEW_KEY)
            .arg("-subj")
            .arg(format!("/CN={subject}"))
            .arg("-keyout")
            .arg(self.path(&format!("{name}.key")))
            .arg("-out")
            .arg(&csr);
        run(req)?;
        let mut sign = openssl("x509");
        sign.args(["-req", "-days", "1", "-CAcreateserial"])
            .arg("-in")
            .arg(&csr)
            .arg("-CA")
            .arg(self.ca())
            .arg("-CAkey")
            .arg(self.path("ca.key"))
            .arg("-extfile")
            .arg(&ext)
            .arg("-out")
            .arg(self.path(&format!("{name}.crt")));
        run(sign)
    }
}

/// A new P-256 key without a passphrase.
const NEW_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

fn openssl(subcommand: &str) -> Command {
    let mut command = Command::new("openssl");
    command.arg(subcommand).stdin(Stdio::null());
    command
}

fn run(mut command: Command) -> Result<(), FixtureError> {
    let output = command.output().map_err(|source| FixtureError::Spawn {
        program: "openssl",
        source,
    })?;
    if output.status.success() {
        return Ok(());
    }
    Err(FixtureError::Command {
        what: format!("{command:?}"),
        detail: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}
