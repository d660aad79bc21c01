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

impl Target {
    /// An inventory target; `id` becomes one path segment of the
    /// inventory's URL, so it must be one ([`crate::reference::segment`]).
    pub fn inventory(id: &str) -> Result<Target, crate::reference::RefError> {
        crate::reference::segment(id)?;
        Ok(Target::Inventory { id: id.to_owned() })
    }
}
