//! SPDX 2.2 and 2.3 tag-value: `Tag: value` lines. A package starts at
//! `PackageName:`; its purl is an `ExternalRef: PACKAGE-MANAGER purl <purl>`
//! line (`PACKAGE_MANAGER` in 2.2); the packages the document describes
//! (`Relationship: SPDXRef-DOCUMENT DESCRIBES <id>`, or 2.2's
//! `DocumentDescribes:`) are its subjects. A multi-line `<text>…</text>`
//! value is skipped whole, so a line inside it is never taken for a tag.

use super::{DocumentError, Entry, spdx2_version};
use std::collections::BTreeSet;

struct Package {
    id: String,
    entry: Entry,
}

pub(super) fn read(body: &[u8]) -> Result<(String, Vec<Entry>), DocumentError> {
    let text = std::str::from_utf8(body).map_err(|_| DocumentError::UnknownFormat)?;
    let mut version = None;
    let mut packages: Vec<Package> = Vec::new();
    let mut described = BTreeSet::new();
    let mut in_text = false;
    for line in text.lines() {
        if in_text {
            in_text = !line.contains("</text>");
            continue;
        }
        let Some((tag, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if value.starts_with("<text>") && !value.contains("</text>") {
            in_text = true;
            continue;
        }
        match tag.trim() {
            "SPDXVersion" if version.is_none() => version = Some(value.to_owned()),
            "PackageName" => packages.push(Package {
                id: String::new(),
                entry: Entry {
                    name: value.to_owned(),
                    ..Entry::default()
                },
            }),
            "SPDXID" => {
                if let Some(package) = packages.last_mut().filter(|p| p.id.is_empty()) {
                    package.id = value.to_owned();
                }
            }
            "ExternalRef" => {
                let mut words = value.split_whitespace();
                let (_category, kind, locator) = (words.next(), words.next(), words.next());
                if let (Some("purl"), Some(locator), Some(package)) =
                    (kind, locator, packages.last_mut())
                {
                    package.entry.purl.get_or_insert_with(|| locator.to_owned());
                }
            }
            "Relationship" => {
                let words: Vec<&str> = value.split_whitespace().collect();
                if let ["SPDXRef-DOCUMENT", "DESCRIBES", id] = words.as_slice() {
                    described.insert((*id).to_owned());
                }
            }
            "DocumentDescribes" => {
                described.extend(value.split(',').map(|id| id.trim().to_owned()));
            }
            _ => {}
        }
    }
    let version = version.ok_or(DocumentError::UnknownFormat)?;
    spdx2_version(&version)?;
    let entries = packages
        .into_iter()
        .map(|p| Entry {
            subject: described.contains(&p.id),
            ..p.entry
        })
        .collect();
    Ok((format!("{version} tag-value"), entries))
}
