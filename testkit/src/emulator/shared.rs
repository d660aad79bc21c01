//! What the server's tasks share: the state behind its lock, fault
//! injection, watch settings and bookkeeping, and the request counters.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use parking_lot::Mutex;

use super::counters::Counters;
use super::error::ApiError;
use super::faults::Faults;
use super::request::Reply;
use super::state::{Locked, State};
use super::watch::WatchSettings;

/// What the server tasks share.
pub struct Shared {
    pub state: Mutex<State>,
    pub faults: Faults,
    pub watch: WatchSettings,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub open_watches: Arc<AtomicUsize>,
    /// Watches answered with `410 Expired`.
    pub expired_watches: AtomicUsize,
    /// `host:port`, for `/api`'s serverAddressByClientCIDRs.
    pub address: String,
    pub requests: Counters,
}

impl Shared {
    pub fn lock(&self) -> Locked<'_> {
        self.state.lock()
    }

    /// An update or patch, redone from the stored object when another write
    /// to the same object landed while this one was validated (see
    /// `update::finish_update`), as the API server's storage layer does;
    /// after [`WRITE_ATTEMPTS`] such races the client gets the 409.
    pub fn write(
        &self,
        write: impl Fn(&mut Locked<'_>) -> Result<Reply, ApiError>,
    ) -> Result<Reply, ApiError> {
        let mut attempt = 1;
        loop {
            match write(&mut self.lock()) {
                Err(ApiError::Raced { .. }) if attempt < WRITE_ATTEMPTS => attempt += 1,
                result => return result,
            }
        }
    }
}

/// Attempts of one update or patch that keeps meeting concurrent writes.
/// Each redo means another write to the object landed, so the writers as a
/// whole always progress; the bound only keeps one writer from starving
/// for ever (the API server's storage layer redoes without a bound).
const WRITE_ATTEMPTS: u32 = 100;
