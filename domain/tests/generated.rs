//! What is generated into the Lua scripts, the Argo CD health check and
//! the docs: the state machine's tables, from its one declaration
//! (`domain/src/machine.rs`), and the scripts' argument decoder, from its
//! one text (`lua/lib/arguments.lua`, whose `--!` lines stay there).
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
//! In Markdown (the table in docs/design.md) the markers are HTML comments,
//! `<!-- BEGIN GENERATED … : MOVES -->` and `<!-- END GENERATED -->`.
//!
//! This test fails when a region differs from what its source gives;
//! `UPDATE_GENERATED=1 cargo test -p assetscan-domain --test generated`
//! (`make generate`) rewrites the regions. A region may be
//! indented (the health check's copy in `argocd-cm-patch.yaml`): it is
//! rendered at its marker's indentation.

use assetscan_domain::End;
use assetscan_domain::ticket::Status;
use std::path::{Path, PathBuf};

const BEGIN: &str = "BEGIN GENERATED from ";
const BY: &str = " by `make generate`:";
/// The state machine's declaration, and the argument decoder's text.
const MACHINE: &str = "domain/src/machine.rs";
const ARGUMENTS: &str = "lua/lib/arguments.lua";
const END: &str = "END GENERATED";

/// The files with generated regions, from the repository's root.
const FILES: &[&str] = &[
    "lua/acquire.lua",
    "lua/advance.lua",
    "lua/release.lua",
    "lua/retire.lua",
    "deploy/argocd/resource_customizations/assetscan.io/AssetScan/health.lua",
    "deploy/argocd/argocd-cm-patch.yaml",
    "docs/design.md",
    "README.md",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
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
fn regenerate(text: &str) -> Result<String, String> {
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

#[test]
fn generated_regions_are_their_sources() {
    let update = std::env::var_os("UPDATE_GENERATED").is_some_and(|v| v == "1");
    let mut behind = Vec::new();
    for file in FILES {
        let path = root().join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        let generated = regenerate(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        if generated == text {
            continue;
        }
        if update {
            std::fs::write(&path, generated).unwrap_or_else(|e| panic!("{file}: {e}"));
        } else {
            behind.push(*file);
        }
    }
    assert!(
        behind.is_empty(),
        "behind their source: {behind:?}; `make generate` (or \
         UPDATE_GENERATED=1 cargo test -p assetscan-domain --test generated) rewrites them"
    );
}

#[test]
fn regions_are_rendered_at_their_indentation_and_must_be_closed() {
    let machine = format!("{BEGIN}{MACHINE}{BY}");
    let marked = format!("a\n    -- {machine} TERMINAL\n    stale\n    -- {END}\nb\n");
    let expected = format!(
        "a\n    -- {machine} TERMINAL\n    -- The statuses that end a run: nothing is written after them.\n    \
         local TERMINAL = {{ FINISHED = true, FAILED = true }}\n    -- {END}\nb\n"
    );
    assert_eq!(regenerate(&marked), Ok(expected));
    let html = format!("<!-- {machine} MOVES -->\nstale\n<!-- {END} -->\n");
    let rendered = regenerate(&html).unwrap();
    assert!(rendered.contains("| `INIT` | `ASSET_ONLINE`, `ASSET_OFFLINE` |  |  |"));
    assert!(!rendered.contains("stale"));
    assert!(
        regenerate(&format!("-- {machine} NEXT\n")).is_err(),
        "unclosed"
    );
    assert!(
        regenerate(&format!("-- {machine} NOPE\n-- {END}\n")).is_err(),
        "unknown table"
    );
    let arguments = format!("-- {BEGIN}{ARGUMENTS}{BY} ARGUMENTS\n-- {END}\n");
    let decoder = regenerate(&arguments).unwrap();
    assert!(decoder.contains("local function decode_args(fields, required)"));
    assert!(
        !decoder.contains("--!"),
        "the source's own lines stay there"
    );
    assert!(
        regenerate(&format!("-- {BEGIN}{ARGUMENTS}{BY} NEXT\n-- {END}\n")).is_err(),
        "a table the source does not give"
    );
    assert!(
        regenerate("no region\n").is_err(),
        "a file that lost its markers"
    );
}
