//! assetscan-operator: fenced, crash-safe security scans per asset.

pub mod crd;
pub mod store;
pub mod ticket;
pub mod config;
pub mod pipeline;
pub mod telemetry;
pub mod controller;
pub mod http;
pub mod providers;
pub mod cli;
