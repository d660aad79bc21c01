//! The Kubernetes adapter: the one layer that knows the API server. The
//! custom resources ([`crd`]), the controller that reconciles them
//! ([`controller`]: it converts an AssetScan into the domain's run view and
//! scan request, drives the pipeline, and mirrors the ticket into the
//! status), and the API access both need ([`rbac`]); which namespaces may
//! use which notification channel ([`channel_access`]).

pub mod channel_access;
pub mod controller;
pub mod crd;
pub mod rbac;
