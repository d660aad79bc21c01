//! The provider data the stubs serve: real public files kept in the
//! repository under `testkit/fixtures/` (its README says where each file
//! comes from), so the tests, the demo and a fresh clone need nothing beside
//! the checkout. `ASSETSCAN_FIXTURES` names another directory of the same
//! layout, e.g. a refreshed copy of the data.

use std::io;
use std::path::{Path, PathBuf};

/// Environment variable that overrides the fixtures directory.
pub const FIXTURES_ENV: &str = "ASSETSCAN_FIXTURES";
/// The whole CISA KEV catalog.
pub const KEV_CATALOG: &str = "kev/known_exploited_vulnerabilities.json";
/// The 15 OSV records, one JSON file each.
pub const OSV_RECORDS: &str = "osv/records";
/// FIRST's documented EPSS example response.
pub const EPSS_EXAMPLE: &str = "epss/first-api-docs-example-response.json";

/// A fixture that cannot be used. Every variant names the path it looked at,
/// so that a missing or moved data set is obvious from the message alone
/// (which therefore carries the cause, rather than a source chain repeating
/// it).
#[derive(Debug, thiserror::Error)]
pub enum FixtureDataError {
    #[error("cannot read fixture {}: {cause}", path.display())]
    Read { path: PathBuf, cause: io::Error },
    #[error("fixture {} is not valid provider data: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

/// Keeps the kind (`NotFound`, `InvalidData`) for callers that speak
/// `std::io`, as the stubs' constructors do, and the message with the path.
impl From<FixtureDataError> for io::Error {
    fn from(err: FixtureDataError) -> io::Error {
        let kind = match &err {
            FixtureDataError::Read { cause, .. } => cause.kind(),
            FixtureDataError::Invalid { .. } => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, err)
    }
}

/// A fixtures directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixtures {
    dir: PathBuf,
}

impl Fixtures {
    /// The directory in `ASSETSCAN_FIXTURES`, else the repository's own
    /// `testkit/fixtures`.
    pub fn locate() -> Fixtures {
        match std::env::var_os(FIXTURES_ENV) {
            Some(dir) => Fixtures::at(dir),
            None => Fixtures::at(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")),
        }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Fixtures {
        Fixtures { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `relative` (e.g. [`KEV_CATALOG`]) in this directory.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// The bytes of `relative`.
    pub fn read(&self, relative: &str) -> Result<Vec<u8>, FixtureDataError> {
        read_file(&self.path(relative))
    }
}

/// Reads one file, naming it in the error.
pub fn read_file(path: &Path) -> Result<Vec<u8>, FixtureDataError> {
    std::fs::read(path).map_err(|cause| FixtureDataError::Read {
        path: path.to_owned(),
        cause,
    })
}

/// The `*.json` files of `dir`, in name order.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>, FixtureDataError> {
    let unreadable = |cause| FixtureDataError::Read {
        path: dir.to_owned(),
        cause,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
