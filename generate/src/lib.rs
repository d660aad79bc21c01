//! `make generate`: the regions generated into the Lua scripts, the Argo
//! CD health check and the docs: the state machine's tables, from its one
//! declaration (`domain/src/machine.rs`), and the scripts' argument
//! decoder, from its one text (`lua/lib/arguments.lua`, whose `--!` lines
//! stay there).
//!
//! Each file holds a region between two marker comments; the first names
//! its source and what it holds:
//!
//! ```lua
//! -- BEGIN GENERATED from domain/src/machine.rs by `make generate`: NEXT TERMINAL
//! ...
//! -- END GENERATED
//! ```
//!
//! In Markdown (the tables in docs/design/state-machine.md and the README) the markers are HTML comments,
//! `<!-- BEGIN GENERATED … : MOVES -->` and `<!-- END GENERATED -->`. A
//! region may be indented (the health check's copy in
//! `argocd-cm-patch.yaml`): it is rendered at its marker's indentation.
//! The files are found by their markers ([`files_with_regions`]).

use assetscan_domain::End;
use assetscan_domain::ticket::Status;
use std::path::{Path, PathBuf};

pub const BEGIN: &str = "BEGIN GENERATED from ";
pub const BY: &str = " by `make generate`:";
/// The state machine's declaration, and the argument decoder's text.
pub const MACHINE: &str = "domain/src/machine.rs";
pub const ARGUMENTS: &str = "lua/lib/arguments.lua";
pub const END: &str = "END GENERATED";

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Folders never searched for regions: build outputs, git's own, and
/// fixtures (copies of other releases' files, kept byte for byte).
const NOT_SEARCHED: &[&str] = &["target", ".git", "node_modules", "fixtures"];

/// The files of the kinds that hold regions (`.lua`, `.md`, `.yaml`)
/// with at least one region's first marker line, from the repository's
/// root, sorted: found, not listed, so that a new region needs no second
/// place to be named in.
pub fn files_with_regions(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries =
            std::fs::read_dir(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("{}: {e}", folder.display()))?
                .path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if !NOT_SEARCHED.contains(&name) {
                    folders.push(path);
                }
                continue;
            }
            if ![".lua", ".md", ".yaml"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                continue;
            }
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if text.lines().any(|line| marker(line, BEGIN).is_some()) {
                found.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Each file with a region and its text as generated, for those whose
/// regions differ from what their sources give.
pub fn behind(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let mut behind = Vec::new();
    for file in files_with_regions(root)? {
        let path = root.join(&file);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", file.display()))?;
        let generated = regenerate(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        if generated != text {
            behind.push((file, generated));
        }
    }
    Ok(behind)
}

/// `{ A = true, B = true }` of the wire names of `statuses`.
fn set(statuses: impl Iterator<Item = Status>) -> String {
    let entries: Vec<String> = statuses.map(|s| format!("{s} = true")).collect();
    match entries.is_empty() {
        true => "{}".to_owned(),
        false => format!("{{ {} }}", entries.join(", ")),
    }
}

/// The Lua text of the table `name`, one line per element.
fn table(name: &str) -> Result<Vec<String>, String> {
    let all = || Status::ALL.into_iter();
    let lines = match name {
        "NEXT" => {
            let mut lines = vec![
                "-- Each status and the statuses a write may move it to: itself and".to_owned(),
                "-- FAILED for every status that has not ended, and the declared moves.".to_owned(),
                "local NEXT = {".to_owned(),
            ];
            for from in all() {
                lines.push(format!(
                    "  {from} = {},",
                    set(all().filter(|to| from.allows(*to)))
                ));
            }
            lines.push("}".to_owned());
            lines
        }
        "TERMINAL" => vec![
            "-- The statuses that end a run: nothing is written after them.".to_owned(),
            format!(
                "local TERMINAL = {}",
                set(all().filter(|s| s.is_terminal()))
            ),
        ],
        "ALERTING" => vec![
            "-- The statuses of a run whose high risk is confirmed and that has not".to_owned(),
            "-- ended: it must notify and end before a later run replaces it.".to_owned(),
            format!(
                "local ALERTING = {}",
                set(all().filter(|s| s.is_alerting()))
            ),
        ],
        "ENDED" => {
            let entries: Vec<String> = all()
                .filter_map(|s| {
                    let how = match s.declared().end? {
                        End::Succeeded => "succeeded",
                        End::Failed => "failed",
                    };
                    Some(format!("{s} = \"{how}\""))
                })
                .collect();
            vec![
                "-- The phases that end a run, and how; any other phase is a run under way."
                    .to_owned(),
                format!("local ENDED = {{ {} }}", entries.join(", ")),
            ]
        }
        "MOVES" => {
            let mut lines = vec![
                "| status | a write may move it to (besides itself and `FAILED`) | alert | ends the run |".to_owned(),
                "|---|---|---|---|".to_owned(),
            ];
            for s in all() {
                let declared = s.declared();
                let next: Vec<String> = declared.next.iter().map(|to| format!("`{to}`")).collect();
                let alert = declared.alert.map(|a| format!("{a:?}")).unwrap_or_default();
                let end = declared.end.map(|e| format!("{e:?}")).unwrap_or_default();
                let next = match s.is_terminal() {
                    true => "nothing".to_owned(),
                    false => next.join(", "),
                };
                lines.push(format!("| `{s}` | {next} | {alert} | {end} |"));
            }
            lines
        }
        other => return Err(format!("no table {other} is generated")),
    };
    Ok(lines)
}

/// The lines of `what`, generated from `source`.
fn region(source: &str, what: &str) -> Result<Vec<String>, String> {
    match (source, what) {
        (MACHINE, _) => table(what),
        (ARGUMENTS, "ARGUMENTS") => {
            let text = std::fs::read_to_string(root().join(ARGUMENTS))
                .map_err(|e| format!("{ARGUMENTS}: {e}"))?;
            Ok((text.lines())
                .filter(|l| !l.starts_with("--!"))
                .map(str::to_owned)
                .collect())
        }
        _ => Err(format!("nothing called {what} is generated from {source}")),
    }
}

/// What follows `text` in a Lua (`-- `) or HTML (`<!-- `, ` -->`) comment
/// line, if the line is one that starts with it.
fn marker<'a>(line: &'a str, text: &str) -> Option<&'a str> {
    let line = line.trim();
    match line.strip_prefix("<!-- ") {
        Some(html) => html.strip_suffix("-->")?.strip_prefix(text).map(str::trim),
        None => line.strip_prefix("-- ")?.strip_prefix(text).map(str::trim),
    }
}

/// `text` with every generated region rendered from the declaration.
pub fn regenerate(text: &str) -> Result<String, String> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    let mut regions = 0;
    while let Some(line) = lines.next() {
        out.push(line.to_owned());
        let Some(marked) = marker(line, BEGIN) else {
            continue;
        };
        let (source, names) =
            (marked.split_once(BY)).ok_or_else(|| format!("{line:?} does not say {BY:?}"))?;
        regions += 1;
        let indent = &line[..line.len() - line.trim_start().len()];
        for name in names.split_whitespace() {
            let lines = region(source, name)?;
            out.extend(lines.into_iter().map(|l| match l.is_empty() {
                true => l,
                false => format!("{indent}{l}"),
            }));
        }
        let end = lines
            .by_ref()
            .find(|l| marker(l, END).is_some_and(str::is_empty))
            .ok_or_else(|| format!("a region is not closed by {END:?}"))?;
        out.push(end.to_owned());
    }
    if regions == 0 {
        return Err(format!("no region starts with {BEGIN:?}"));
    }
    Ok(out.join("\n") + "\n")
}
