//! The code map in docs/development.md ("The layout") is the one map of the
//! code; these tests hold it to the tree. Each entry of the map (a name
//! ending in `/` or `.rs` at the start of its line, nested by indentation)
//! must exist where its nesting puts it, each file a line names in passing
//! (`(request.rs)`) must exist under the entry it describes, and every
//! module of `src/`, `src/kubernetes/` and the controller (its rooms) must
//! be an entry.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One line of the map: its entries' paths (relative to the repository)
/// and the directory the line describes.
struct Line {
    entries: Vec<String>,
    describes: String,
    text: String,
}

/// The code block under "## The layout", read line by line.
fn map() -> Vec<Line> {
    let text = std::fs::read_to_string(repo().join("docs/development.md")).unwrap();
    let section = text
        .split("## The layout")
        .nth(1)
        .expect("the layout section");
    let block = section.split("```").nth(1).expect("the map's code block");
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut lines = Vec::new();
    let mut describes = String::new();
    for raw in block.lines().filter(|l| !l.trim().is_empty()) {
        let indent = raw.len() - raw.trim_start().len();
        let names: Vec<&str> = raw
            .split_whitespace()
            .take_while(|w| w.ends_with('/') || w.ends_with(".rs"))
            .collect();
        let mut entries = Vec::new();
        if !names.is_empty() {
            while open.last().is_some_and(|(i, _)| *i >= indent) {
                open.pop();
            }
            let parent = open.last().map(|(_, p)| p.clone()).unwrap_or_default();
            for name in names {
                entries.push(format!("{parent}{name}"));
            }
            describes = parent.clone();
            if let [only] = entries.as_slice()
                && only.ends_with('/')
            {
                describes = only.clone();
                open.push((indent, only.clone()));
            }
        }
        lines.push(Line {
            entries,
            describes: describes.clone(),
            text: raw.to_owned(),
        });
    }
    lines
}

/// Every `*.rs` file under `dir`, by name.
fn rust_files_under(dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files_under(&path, found);
        } else if let Some(name) = path.file_name().and_then(|n| n.to_str())
            && name.ends_with(".rs")
        {
            found.insert(name.to_owned());
        }
    }
}

#[test]
fn every_name_in_the_map_is_in_the_tree() {
    let mut missing = Vec::new();
    for line in map() {
        for entry in &line.entries {
            if !repo().join(entry.trim_end_matches('/')).exists() {
                missing.push(format!("{entry} (entry)"));
            }
        }
        if !line.describes.starts_with("src/") {
            continue;
        }
        let mut files = BTreeSet::new();
        rust_files_under(&repo().join(&line.describes), &mut files);
        let named = line
            .text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .filter(|w| w.ends_with(".rs") && w.len() > 3);
        for name in named {
            if !files.contains(name) {
                missing.push(format!("{name} (under {})", line.describes));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/development.md names what the tree does not have: {missing:?}"
    );
}

#[test]
fn every_module_down_to_the_controllers_rooms_is_in_the_map() {
    let entries: BTreeSet<String> = map().into_iter().flat_map(|l| l.entries).collect();
    let mut unmapped = Vec::new();
    for dir in ["src", "src/kubernetes", "src/kubernetes/controller"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if ["lib.rs", "main.rs", "mod.rs"].contains(&name.as_str()) {
                continue;
            }
            let path = if entry.path().is_dir() {
                format!("{dir}/{name}/")
            } else if name.ends_with(".rs") {
                format!("{dir}/{name}")
            } else {
                continue;
            };
            if !entries.contains(&path) {
                unmapped.push(path);
            }
        }
    }
    unmapped.sort();
    assert!(
        unmapped.is_empty(),
        "modules the map in docs/development.md leaves out: {unmapped:?}"
    );
}
