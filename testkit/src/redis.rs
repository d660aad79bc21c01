//! Real `redis-server` fixtures: a standalone server (optionally with a TLS
//! port), a 3-master Cluster, and a Sentinel group ([`SentinelGroup`]), each
//! on free loopback ports in its own temp dir, that tests can stop, kill,
//! pause, restart and flush. Nothing here talks to a server it did not start.

mod cluster;
mod error;
mod sentinel;
mod server;
mod tls;
mod wire;

pub use cluster::RedisCluster;
pub use error::FixtureError;
pub use sentinel::SentinelGroup;
pub use server::{RedisOptions, RedisServer, ServerTls};
pub use tls::TlsFiles;
