//! The `POST /v1/querybatch` exchange: one query per package (by purl, or
//! by name, ecosystem and version), and the ids each one matched.

use crate::providers::vulns::findings::null_as_empty;
use assetscan_domain::Package;
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
pub(super) struct BatchRequest<'a> {
    pub(super) queries: Vec<Query<'a>>,
}

#[derive(Serialize)]
pub(super) struct Query<'a> {
    package: PackageRef<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    page_token: Option<&'a str>,
}

#[derive(Serialize)]
struct PackageRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ecosystem: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    purl: Option<&'a str>,
}

impl<'a> Query<'a> {
    pub(super) fn new(software: &'a Package, page_token: Option<&'a str>) -> Query<'a> {
        let (package, version) = match software {
            Package::Purl(purl) => (
                PackageRef {
                    name: None,
                    ecosystem: None,
                    purl: Some(purl.as_str()),
                },
                None,
            ),
            Package::Coordinates(c) => (
                PackageRef {
                    name: Some(c.name()),
                    ecosystem: Some(c.ecosystem()),
                    purl: None,
                },
                Some(c.version()),
            ),
        };
        Query {
            package,
            version,
            page_token,
        }
    }
}

#[derive(Deserialize)]
pub(super) struct BatchResponse {
    pub(super) results: Vec<BatchResult>,
}

/// One query's answer; `{}` when nothing matched.
#[derive(Deserialize)]
pub(super) struct BatchResult {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub(super) vulns: Vec<VulnRef>,
    #[serde(default)]
    pub(super) next_page_token: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct VulnRef {
    pub(super) id: String,
    #[serde(default)]
    pub(super) modified: Option<String>,
}
