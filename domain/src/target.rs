//! Where the online check looks for the asset.

/// One of two ways to reach an asset, so "a host, or an inventory id, but
/// not both" needs no runtime check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Online when a TCP connect to any of the ports succeeds.
    Tcp { host: String, ports: Vec<u16> },
    /// Online as the inventory says.
    Inventory { id: String },
}
