//! AssetScans built one way, and what the tests ask of one.

use assetscan_operator::domain::ticket::{NotificationState, Status};
use assetscan_operator::kubernetes::controller::ConditionType;
use assetscan_operator::kubernetes::crd::{
    AssetScan, AssetScanSpec, AssetScanStatus, Package, SbomReference, Target,
};

/// Debian 10 packages the OSV stub maps to critical findings.
const HIGH_RISK_PACKAGES: [(&str, &str); 2] = [
    ("openssh", "1:7.9p1-10+deb10u2"),
    ("xz-utils", "5.2.4-1+deb10u1"),
];

/// An AssetScan under construction. By default: asset
/// `<name>.dc1.example.com`, checked through the inventory under that id,
/// no packages (no findings), notifying `secops-webhook`.
#[derive(Clone, Debug)]
pub struct ScanBuilder {
    name: String,
    spec: AssetScanSpec,
}

/// [`ScanBuilder`] of `name`.
pub fn scan(name: &str) -> ScanBuilder {
    let asset = format!("{name}.dc1.example.com");
    ScanBuilder {
        name: name.to_owned(),
        spec: AssetScanSpec {
            asset_id: asset.clone(),
            target: Target {
                inventory_ref: Some(asset),
                ..Target::default()
            },
            software: vec![],
            sbom: None,
            vex: vec![],
            policy: Default::default(),
            notify: vec!["secops-webhook".into()],
            rescan_interval: None,
            suspend: false,
            report_history_limit: None,
        },
    }
}

impl ScanBuilder {
    /// The asset id, which is also its id in the inventory.
    pub fn asset(mut self, asset: &str) -> Self {
        self.spec.asset_id = asset.to_owned();
        self.spec.target.inventory_ref = Some(asset.to_owned());
        self
    }

    /// Probed on `host` at `ports` instead of through the inventory.
    pub fn host(mut self, host: &str, ports: &[u16]) -> Self {
        self.spec.target = Target {
            host: Some(host.to_owned()),
            ports: ports.to_vec(),
            inventory_ref: None,
        };
        self
    }

    /// With the Debian 10 packages the OSV stub maps to critical findings.
    pub fn high_risk(mut self) -> Self {
        self.spec.software = HIGH_RISK_PACKAGES
            .iter()
            .map(|(name, version)| Package {
                name: Some((*name).into()),
                ecosystem: Some("Debian:10".into()),
                version: Some((*version).into()),
                purl: None,
            })
            .collect();
        self
    }

    /// With one package, by purl.
    pub fn purl(mut self, purl: &str) -> Self {
        self.spec.software = vec![Package {
            purl: Some(purl.to_owned()),
            ..Package::default()
        }];
        self
    }

    /// With its packages by reference: the SBOM at `reference` in
    /// `source`, pinned to `digest` if given (and no listed software).
    pub fn sbom(mut self, source: &str, reference: &str, digest: Option<&str>) -> Self {
        self.spec.software.clear();
        self.spec.sbom = Some(SbomReference {
            source: source.to_owned(),
            reference: reference.to_owned(),
            digest: digest.map(str::to_owned),
        });
        self
    }

    /// Notifying these channels (none: nobody).
    pub fn notify(mut self, channels: &[&str]) -> Self {
        self.spec.notify = channels.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    pub fn rescan_every(mut self, interval: &str) -> Self {
        self.spec.rescan_interval = Some(interval.to_owned());
        self
    }

    pub fn report_history_limit(mut self, limit: u32) -> Self {
        self.spec.report_history_limit = Some(limit);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn asset_id(&self) -> &str {
        &self.spec.asset_id
    }

    /// The inventory id the online check asks about, if any.
    pub fn inventory_ref(&self) -> Option<&str> {
        self.spec.target.inventory_ref.as_deref()
    }

    pub fn build(self) -> AssetScan {
        AssetScan::new(&self.name, self.spec)
    }

    /// The object as JSON, for a test that edits it past what the type
    /// allows (what the API server must refuse).
    pub fn json(self) -> serde_json::Value {
        serde_json::to_value(self.build()).expect("an AssetScan is JSON")
    }
}

pub fn status(obj: &AssetScan) -> &AssetScanStatus {
    obj.status.as_ref().expect("status")
}

pub fn phase(obj: &AssetScan) -> Option<Status> {
    obj.status.as_ref().and_then(|s| s.phase)
}

/// A terminal phase of the object's current generation.
pub fn is_terminal(obj: &AssetScan) -> bool {
    obj.status.as_ref().is_some_and(|s| {
        s.phase.is_some_and(|p| p.is_terminal()) && s.observed_generation == obj.metadata.generation
    })
}

/// `(status, reason, message)` of a condition.
pub fn condition(obj: &AssetScan, type_: ConditionType) -> Option<(String, String, String)> {
    let c = type_.find(&obj.status.as_ref()?.conditions)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// The reason of a condition.
pub fn reason(obj: &AssetScan, type_: ConditionType) -> Option<&str> {
    let c = type_.find(&obj.status.as_ref()?.conditions)?;
    Some(c.reason.as_str())
}

/// Whether a condition has this status and reason.
pub fn has_condition(obj: &AssetScan, type_: ConditionType, status: &str, reason: &str) -> bool {
    condition(obj, type_).is_some_and(|(s, r, _)| s == status && r == reason)
}

/// The run the status names, ended.
pub fn run_ended(obj: &AssetScan, run: &str) -> bool {
    obj.status
        .as_ref()
        .is_some_and(|s| s.run.as_deref() == Some(run) && s.phase.is_some_and(|p| p.is_terminal()))
}

/// The run ended `FINISHED` with its alert sent, under a token above
/// `before`'s (taken over, or started over).
pub fn assert_finished_and_notified_after(done: &AssetScan, before: &AssetScanStatus) {
    let s = status(done);
    assert_eq!(s.phase, Some(Status::Finished), "{s:#?}");
    assert!(
        s.fencing_token > before.fencing_token,
        "token {:?} after {:?}",
        s.fencing_token,
        before.fencing_token
    );
    assert_eq!(
        s.notification.as_ref().map(|n| n.state),
        Some(NotificationState::Sent),
        "{s:#?}"
    );
}
