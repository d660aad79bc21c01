//! assetscan-operator: fenced, crash-safe security scans per asset.

/// The domain (tickets, the fence, scan requests, verdicts): its own crate,
/// which knows neither Kubernetes nor Redis nor HTTP.
pub use assetscan_domain as domain;

mod backoff;
pub mod cli;
pub mod config;
pub mod controller;
pub mod crd;
pub mod duration;
pub mod pipeline;
pub mod probes;
pub mod providers;
pub mod rbac;
pub mod store;
pub mod telemetry;
