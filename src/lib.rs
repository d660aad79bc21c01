//! assetscan-operator: fenced, crash-safe security scans per asset.
//!
//! The layers, each depending only on those below it: [`cli`], then
//! [`kubernetes`], then [`pipeline`] and [`providers`], then [`store`],
//! then [`ports`] (the controller's doors to the store, which the store
//! implements), then [`domain`]. What each module holds is mapped once, in
//! docs/development.md ("The layout"), which `tests/code_map.rs` checks
//! against the tree.
//!
//! Each layer owns its sections of the configuration file (their types,
//! defaults and rules); [`cli::config`] puts them side by side and reads
//! the file.

/// The domain (tickets, the fence, scan requests, verdicts): its own crate,
/// which knows neither Kubernetes nor Redis nor HTTP.
pub use assetscan_domain as domain;

mod backoff;
pub mod cli;
pub mod duration;
pub mod fair;
pub mod http_access;
pub mod kubernetes;
pub mod pipeline;
pub mod ports;
pub mod probes;
pub mod providers;
pub mod store;
pub mod telemetry;
pub mod yaml;
