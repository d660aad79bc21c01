//! VEX documents: what a supplier or a security team states about the
//! vulnerabilities of a product, in OpenVEX (v0.0.1, v0.2.0) or CycloneDX
//! VEX (JSON, 1.4 to 1.7), read into the domain's [`Statement`]s. Only the
//! statements that clear a finding are taken: `not_affected` and `fixed`
//! (OpenVEX), `not_affected`, `false_positive`, `resolved` and
//! `resolved_with_pedigree` (CycloneDX); `affected`, `exploitable`,
//! `under_investigation` and `in_triage` leave the finding as it is.
//!
//! A statement names packages by purl. A product that names no package (an
//! image, `pkg:oci/…`) and has no subcomponents makes the statement about
//! the whole asset: the AssetScan names the document for its asset.

use assetscan_domain::advisory;
use assetscan_domain::{Statement, TriageState};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Statements read from one document, at most.
pub const MAX_STATEMENTS: usize = 10_000;

/// Why a VEX document was refused. Bounded: never quotes the document.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum VexError {
    #[error("not JSON of the expected shape, or cut short: {0}")]
    NotJson(String),
    #[error("neither an OpenVEX nor a CycloneDX VEX document")]
    UnknownFormat,
    #[error("more than {MAX_STATEMENTS} statements")]
    TooMany,
}

impl VexError {
    /// What went wrong, without any of the document's text.
    pub fn summary(&self) -> &'static str {
        match self {
            VexError::NotJson(_) => "not JSON of the expected shape, or cut short",
            VexError::UnknownFormat => "neither an OpenVEX nor a CycloneDX VEX document",
            VexError::TooMany => "too many statements",
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(rename = "@context")]
    context: Option<String>,
    #[serde(default)]
    statements: Vec<OpenVexStatement>,
    bom_format: Option<String>,
    #[serde(default)]
    vulnerabilities: Vec<CdxVulnerability>,
    #[serde(default)]
    components: Vec<CdxComponent>,
}

#[derive(Deserialize)]
struct OpenVexStatement {
    vulnerability: Option<OneOrObject<OpenVexVulnerability>>,
    #[serde(default)]
    products: Vec<OneOrObject<OpenVexProduct>>,
    /// v0.0.1's statement-level subcomponents.
    #[serde(default)]
    subcomponents: Vec<OneOrObject<OpenVexProduct>>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    justification: String,
    #[serde(default)]
    impact_statement: String,
}

/// v0.0.1 writes a string where v0.2.0 writes an object.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrObject<T> {
    Id(String),
    Object(T),
}

#[derive(Deserialize)]
struct OpenVexVulnerability {
    #[serde(default)]
    name: String,
    #[serde(rename = "@id", default)]
    id: String,
    #[serde(default)]
    aliases: Vec<String>,
}

#[derive(Deserialize)]
struct OpenVexProduct {
    #[serde(rename = "@id", default)]
    id: String,
    #[serde(default)]
    identifiers: BTreeMap<String, String>,
    #[serde(default)]
    subcomponents: Vec<OneOrObject<OpenVexProduct>>,
}

#[derive(Deserialize)]
struct CdxVulnerability {
    #[serde(default)]
    id: String,
    #[serde(default)]
    references: Vec<CdxReference>,
    analysis: Option<CdxAnalysis>,
    #[serde(default)]
    affects: Vec<CdxAffects>,
}

#[derive(Deserialize)]
struct CdxReference {
    #[serde(default)]
    id: String,
}

#[derive(Deserialize)]
struct CdxAnalysis {
    #[serde(default)]
    state: String,
    #[serde(default)]
    justification: String,
    #[serde(default)]
    detail: String,
}

#[derive(Deserialize)]
struct CdxAffects {
    #[serde(rename = "ref", default)]
    reference: String,
}

#[derive(Deserialize)]
struct CdxComponent {
    #[serde(rename = "bom-ref")]
    bom_ref: Option<String>,
    purl: Option<String>,
    #[serde(default)]
    components: Vec<CdxComponent>,
}

/// The statements of `body` that clear findings, each named `by` its
/// place (`<name> #<n>`, `n` counting the document's statements from 1).
pub fn read(body: &[u8], name: &str) -> Result<Vec<Statement>, VexError> {
    let document: Document = serde_json::from_slice(body).map_err(|e| {
        VexError::NotJson(assetscan_domain::text::truncate_chars(&e.to_string(), 160))
    })?;
    let is_openvex = document
        .context
        .as_deref()
        .is_some_and(|c| c.starts_with("https://openvex.dev/ns"));
    let statements = if is_openvex {
        openvex(document.statements, name)
    } else if document.bom_format.as_deref() == Some("CycloneDX") {
        let refs = bom_refs(&document.components);
        cyclonedx(document.vulnerabilities, &refs, name)
    } else {
        return Err(VexError::UnknownFormat);
    };
    if statements.len() > MAX_STATEMENTS {
        return Err(VexError::TooMany);
    }
    Ok(statements)
}

fn openvex(statements: Vec<OpenVexStatement>, name: &str) -> Vec<Statement> {
    let mut read = Vec::new();
    for (n, statement) in statements.into_iter().enumerate() {
        let state = match statement.status.as_str() {
            "not_affected" => TriageState::NotAffected,
            "fixed" => TriageState::Fixed,
            _ => continue,
        };
        let vulnerabilities = match statement.vulnerability {
            Some(OneOrObject::Id(id)) => vec![id],
            Some(OneOrObject::Object(v)) => {
                let mut ids = vec![v.name, v.id];
                ids.extend(v.aliases);
                ids
            }
            None => Vec::new(),
        };
        // A product that names no package and has no subcomponents is the
        // whole asset: the statement then names no package.
        let mut packages = Vec::new();
        for product in statement
            .products
            .into_iter()
            .chain(statement.subcomponents)
        {
            let (id, identifiers, subcomponents) = match product {
                OneOrObject::Id(id) => (id, BTreeMap::new(), Vec::new()),
                OneOrObject::Object(p) => (p.id, p.identifiers, p.subcomponents),
            };
            let subcomponents: Vec<String> = (subcomponents.into_iter())
                .map(|s| match s {
                    OneOrObject::Id(id) => id,
                    OneOrObject::Object(p) => p.identifiers.get("purl").cloned().unwrap_or(p.id),
                })
                .collect();
            let product = identifiers.get("purl").cloned().unwrap_or(id);
            match subcomponents.is_empty() {
                false => packages.extend(subcomponents),
                true if advisory::names_a_package(&product) => packages.push(product),
                true => {}
            }
        }
        read.push(Statement {
            by: format!("{name} #{}", n + 1),
            vulnerabilities: vulnerabilities
                .into_iter()
                .filter(|v| !v.is_empty())
                .collect(),
            packages,
            state,
            justification: joined(&statement.justification, &statement.impact_statement),
            owner: None,
            expires_ms: None,
        });
    }
    read
}

fn cyclonedx(
    vulnerabilities: Vec<CdxVulnerability>,
    refs: &BTreeMap<String, String>,
    name: &str,
) -> Vec<Statement> {
    let mut read = Vec::new();
    for (n, vulnerability) in vulnerabilities.into_iter().enumerate() {
        let Some(analysis) = vulnerability.analysis else {
            continue;
        };
        let state = match analysis.state.as_str() {
            "not_affected" => TriageState::NotAffected,
            "false_positive" => TriageState::FalsePositive,
            "resolved" | "resolved_with_pedigree" => TriageState::Fixed,
            _ => continue,
        };
        let mut ids = vec![vulnerability.id];
        ids.extend(vulnerability.references.into_iter().map(|r| r.id));
        let packages = (vulnerability.affects.into_iter())
            .map(|a| affected(&a.reference, refs))
            .collect();
        read.push(Statement {
            by: format!("{name} #{}", n + 1),
            vulnerabilities: ids.into_iter().filter(|v| !v.is_empty()).collect(),
            packages,
            state,
            justification: joined(&analysis.justification, &analysis.detail),
            owner: None,
            expires_ms: None,
        });
    }
    read
}

/// A `bom-ref` of this document's components, a BOM-Link
/// (`urn:cdx:<serial>/<version>#<bom-ref>`), or a purl: the purl when it can
/// be told, else the reference as given (which names no package).
fn affected(reference: &str, refs: &BTreeMap<String, String>) -> String {
    let fragment = reference.rsplit_once('#').map_or(reference, |(_, f)| f);
    for candidate in [reference, fragment] {
        if let Some(purl) = refs.get(candidate) {
            return purl.clone();
        }
        if candidate.starts_with("pkg:") {
            return candidate.to_owned();
        }
    }
    reference.to_owned()
}

fn bom_refs(components: &[CdxComponent]) -> BTreeMap<String, String> {
    let mut refs = BTreeMap::new();
    let mut pending: Vec<&CdxComponent> = components.iter().collect();
    while let Some(component) = pending.pop() {
        if let (Some(bom_ref), Some(purl)) = (&component.bom_ref, &component.purl) {
            refs.insert(bom_ref.clone(), purl.clone());
        }
        pending.extend(component.components.iter());
    }
    refs
}

fn joined(justification: &str, detail: &str) -> String {
    let text = match (justification.is_empty(), detail.is_empty()) {
        (false, false) => format!("{justification}: {detail}"),
        (false, true) => justification.to_owned(),
        _ => detail.to_owned(),
    };
    assetscan_domain::text::truncate_chars(&text, 512)
}

#[cfg(test)]
mod tests;
