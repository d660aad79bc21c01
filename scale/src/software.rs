//! The packages of the run's assets: none beyond the high-risk ones (the
//! default, the figures of earlier runs), or `--packages N` per asset,
//! listed in `spec.software` or named by reference to an SBOM the stub
//! source serves (`--software sbom`).
//!
//! A fleet's assets are built from a few images that share a base: each
//! asset runs one of [`IMAGES`] images, whose packages are a base common to
//! all (four in five) and its own. Every 50th asset (high risk) adds the
//! vulnerable Debian packages the OSV stub knows. By reference, each image
//! has one CycloneDX 1.6 document (and one with the vulnerable packages);
//! each asset names its image's, and reads it at each run.

use assetscan_operator::kubernetes::crd::{Package, SbomReference};
use assetscan_testkit::stubs::SbomStub;
use serde_json::{Value, json};

/// Images the assets are built from.
pub const IMAGES: usize = 20;

/// Where the packages are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Listing {
    /// In `spec.software` (at most 500).
    Inline,
    /// In an SBOM the AssetScan names (`spec.sbom`).
    Sbom,
}

/// The packages per asset and where they are.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub packages: usize,
    pub listing: Listing,
}

/// An asset's software: what its spec says.
pub enum AssetSoftware {
    Inline(Vec<Package>),
    Sbom(SbomReference),
}

impl Mix {
    /// The software of the `index`th asset; `vulnerable` are the high-risk
    /// packages it adds (empty for most).
    pub fn of(&self, index: usize, vulnerable: &[(&str, &str)]) -> AssetSoftware {
        let image = index % IMAGES;
        if self.packages > 0 && self.listing == Listing::Sbom {
            return AssetSoftware::Sbom(SbomReference {
                source: "artifacts".into(),
                reference: document_ref(image, !vulnerable.is_empty()),
                digest: None,
            });
        }
        let purls = image_purls(image, self.packages);
        let listed = purls.into_iter().map(|purl| Package {
            purl: Some(purl),
            ..Package::default()
        });
        let high_risk = vulnerable.iter().map(|(name, version)| Package {
            name: Some((*name).into()),
            ecosystem: Some("Debian:10".into()),
            version: Some((*version).into()),
            purl: None,
        });
        AssetSoftware::Inline(listed.chain(high_risk).collect())
    }

    /// Puts every image's documents in the stub source (by reference only).
    pub fn serve(&self, source: &SbomStub, vulnerable: &[(&str, &str)]) {
        if self.packages == 0 || self.listing != Listing::Sbom {
            return;
        }
        for image in 0..IMAGES {
            let purls = image_purls(image, self.packages);
            source.put(&document_ref(image, false), document(&purls, &[]));
            source.put(&document_ref(image, true), document(&purls, vulnerable));
        }
    }

    pub fn describe(&self) -> String {
        match (self.packages, self.listing) {
            (0, _) => "no packages (the high-risk assets' 4)".to_owned(),
            (n, Listing::Inline) => format!("{n} packages per asset, listed in spec.software"),
            (n, Listing::Sbom) => format!("{n} packages per asset, by SBOM reference"),
        }
    }
}

fn document_ref(image: usize, vulnerable: bool) -> String {
    let suffix = if vulnerable { "-vulnerable" } else { "" };
    format!("images/image-{image:02}{suffix}.cdx.json")
}

/// `packages` purls of `image`: four in five from the shared base.
fn image_purls(image: usize, packages: usize) -> Vec<String> {
    let base = packages * 4 / 5;
    let shared = (0..base).map(|j| format!("pkg:pypi/base-package-{j:03}@1.{}.0", j % 7));
    let own = (base..packages).map(|j| format!("pkg:npm/image-{image:02}-package-{j:03}@2.0.{j}"));
    shared.chain(own).collect()
}

/// A CycloneDX 1.6 document of `purls` and the `vulnerable` Debian 10
/// packages, in the shape Syft writes.
fn document(purls: &[String], vulnerable: &[(&str, &str)]) -> Vec<u8> {
    let debian = vulnerable.iter().map(|(name, version)| {
        format!("pkg:deb/debian/{name}@{version}?arch=amd64&distro=debian-10")
    });
    let components: Vec<Value> = purls
        .iter()
        .cloned()
        .chain(debian)
        .map(|purl| {
            let name = purl.split('/').next_back().unwrap_or_default().to_owned();
            json!({"type": "library", "name": name, "purl": purl,
                "properties": [{"name": "syft:package:foundBy", "value": "scale"}]})
        })
        .collect();
    let bom = json!({
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {"tools": {"components": [{"type": "application", "name": "assetscan-scale"}]}},
        "components": components,
    });
    serde_json::to_vec(&bom).unwrap_or_default()
}
