//! The AssetScans of an upgrade run: which kind each is, and where it
//! goes among the two namespaces, with names and assetIds that meet
//! across them.

use crate::objects::{Channel, Kind, PlannedObject};
use serde_json::{Value, json};

/// The namespaces the AssetScans are spread over; the replicas watch all.
pub(super) const NAMESPACES: [&str; 2] = ["upgrade-a", "upgrade-b"];

/// The kind of the `index`th AssetScan: four in ten high risk (alerted
/// through the webhook, half of them through WeCom too), two offline,
/// four clean.
fn kind(index: usize) -> Kind {
    match index % 10 {
        0 | 1 => Kind::HighRisk {
            channels: vec![Channel::Webhook],
            log4j: index.is_multiple_of(20),
        },
        2 | 3 => Kind::HighRisk {
            channels: vec![Channel::Webhook, Channel::WeCom],
            log4j: false,
        },
        4 | 5 => Kind::Offline,
        n => Kind::Clean {
            findings: n % 2 == 0,
        },
    }
}

/// One AssetScan of the run, in one of [`NAMESPACES`].
#[derive(Clone, Debug)]
pub(super) struct Scan {
    pub namespace: &'static str,
    pub object: PlannedObject,
}

impl Scan {
    /// The `index`th AssetScan, of [`kind`]`(index)`. The namespaces
    /// alternate, and each pair `2k`, `2k + 1` has one name in both;
    /// where the pair is of one kind (high risk or offline: the first six
    /// of ten) it has one assetId too, so that two namespaces' runs meet on
    /// one asset (in 0.1.0's lock, and in the bridge's).
    pub fn new(index: usize) -> Scan {
        let asset = if index % 10 < 6 {
            index - index % 2
        } else {
            index
        };
        Scan {
            namespace: NAMESPACES[index % 2],
            object: PlannedObject {
                name: format!("scan-{:04}", index / 2),
                asset: format!("upgrade-{asset:04}.dc1.example.com"),
                kind: kind(index),
            },
        }
    }

    /// `<namespace>/<name>`: the object's identity, in the history too.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.object.name)
    }

    /// The AssetScan to create.
    pub fn manifest(&self) -> Value {
        let mut manifest = self.object.manifest();
        manifest["metadata"]["namespace"] = json!(self.namespace);
        manifest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_share_a_name_across_namespaces_and_an_asset_where_of_one_kind() {
        let (a, b) = (Scan::new(0), Scan::new(1));
        assert_eq!(
            (a.id(), b.id()),
            ("upgrade-a/scan-0000".into(), "upgrade-b/scan-0000".into())
        );
        assert_eq!(a.object.asset, b.object.asset);
        assert_eq!(b.manifest()["metadata"]["namespace"], "upgrade-b");
        assert_ne!(Scan::new(6).object.asset, Scan::new(7).object.asset);
    }
}
