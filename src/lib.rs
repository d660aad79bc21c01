//! assetscan-operator: fenced, crash-safe security scans per asset.

mod backoff;
pub mod cli;
pub mod config;
pub mod controller;
pub mod crd;
pub mod domain;
pub mod duration;
pub mod pipeline;
pub mod probes;
pub mod providers;
pub mod rbac;
pub mod store;
pub mod telemetry;
mod text;
pub mod ticket;
