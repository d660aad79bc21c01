//! assetscan-operator: fenced, crash-safe security scans per asset.

pub mod cli;
pub mod config;
pub mod controller;
pub mod crd;
pub mod domain;
pub mod duration;
pub mod http;
pub mod pipeline;
pub mod providers;
pub mod store;
pub mod telemetry;
mod text;
pub mod ticket;
