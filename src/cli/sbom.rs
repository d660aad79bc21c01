//! `sbom`: what a run would ask about for an SBOM file, without Redis,
//! Kubernetes or a vulnerability source: the document's format, its
//! entries listed and asked, asked by ecosystem, not asked by reason, and
//! (with `--packages`) each package's advisory coordinates. The same code
//! reads an AssetScan's `spec.sbom`. Several files print a Markdown table,
//! a row each (`make sbom-corpus` prints the corpus's so).

use crate::providers::sbom::inspect;
use assetscan_domain::Coverage;
use clap::Args;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct SbomArgs {
    /// SBOM files (CycloneDX 1.2-1.7 JSON or XML, SPDX 2.2/2.3 JSON or
    /// tag-value, SPDX 3.0 JSON-LD).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Also list every package asked about, by its coordinates, and the
    /// entries not asked about with why.
    #[arg(long)]
    packages: bool,
}

pub fn run(args: &SbomArgs) -> Result<ExitCode, String> {
    let mut out = String::from(
        "| document | format | listed | asked | coverage | asked by ecosystem | not asked |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for file in &args.files {
        let body = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let read = inspect(&body).map_err(|e| format!("{}: {e}", file.display()))?;
        let name = file.file_name().map_or_else(
            || file.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let c = &read.coverage;
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {}% | {} | {} |",
            read.format,
            c.listed,
            c.asked,
            c.percent(),
            counted(c.asked_by_ecosystem.iter().map(|(k, v)| (k.as_str(), *v))),
            counted(c.not_asked.iter().map(|(k, v)| (k.as_str(), *v))),
        );
        if args.packages {
            listing(&mut out, &read.packages, c);
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// `Debian 132, Go 3`.
fn counted<'a>(counts: impl Iterator<Item = (&'a str, u32)>) -> String {
    let parts: Vec<String> = counts.map(|(k, v)| format!("{k} {v}")).collect();
    parts.join(", ")
}

fn listing(out: &mut String, packages: &[assetscan_domain::Package], c: &Coverage) {
    for package in packages {
        let _ = writeln!(out, "  asked: {package}");
    }
    for entry in &c.not_asked_listed {
        let _ = writeln!(
            out,
            "  not asked ({}): {}",
            entry.reason.as_str(),
            entry.package
        );
    }
    let shown = u32::try_from(c.not_asked_listed.len()).unwrap_or(u32::MAX);
    if c.not_asked_total() > shown {
        let _ = writeln!(
            out,
            "  … and {} more not asked",
            c.not_asked_total() - shown
        );
    }
}
