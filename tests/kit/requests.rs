//! The pipeline's requests the tests send, built the one way: a run of an
//! asset found through the inventory, for one holder, of no AssetScan (no
//! owner, no origin), read before it is claimed, with no packages, no
//! channels and nothing to resolve. A test says what its point needs with
//! struct update syntax (`ScanRequest { channels, ..request(…) }`).

use super::tickets::asset_id;
use assetscan_operator::domain::{Policy, ScanRequest, Target, TriageRequest};

pub fn request(asset: &str, run: &str, holder: &str) -> ScanRequest {
    ScanRequest {
        asset: asset_id(asset),
        run: run.into(),
        target: Target::Inventory { id: asset.into() },
        software: Vec::new(),
        sbom: None,
        policy: Policy::default(),
        channels: Vec::new(),
        token_floor: 0,
        holder: holder.into(),
        owner: None,
        supersedes: None,
        expect_open: false,
        resolves_alert: false,
        origin: None,
        triage: TriageRequest::default(),
    }
}
