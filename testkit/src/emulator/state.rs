//! The emulator's state: the resource registry and the object store, kept
//! behind one lock. Every verb, the garbage collector and the `Emulator`
//! handle's direct reads work on it.

use serde_json::Value;

use super::error::ApiError;
use super::rbac::Tokens;
use super::registry::Registry;
use super::store::Store;

/// The emulator's state as its writers hold it: locked, and unlocked again
/// while a write is validated (see `update::finish_update`).
pub type Locked<'a> = parking_lot::MutexGuard<'a, State>;

/// Everything the emulator keeps, behind one lock: the registry and the store.
#[derive(Debug)]
pub struct State {
    pub registry: Registry,
    pub store: Store,
    /// Bumped when the set of served resources changes (OpenAPI hash).
    pub generation: u64,
    /// The ServiceAccount tokens issued through TokenRequest.
    pub tokens: Tokens,
}

impl State {
    /// The built-in resources, no objects; the change log keeps
    /// `watch_history` changes, and every object's writes when
    /// `write_history`.
    pub fn new(watch_history: usize, write_history: bool) -> Self {
        Self {
            registry: Registry::default(),
            store: Store::new(watch_history, write_history),
            generation: 1,
            tokens: Tokens::new(),
        }
    }

    /// Serves the resources of a CRD just stored, as a real server does
    /// once it is established.
    pub fn register_crd(&mut self, crd: &Value) -> Result<(), ApiError> {
        self.registry
            .add_crd(crd)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        self.generation += 1;
        Ok(())
    }
}
