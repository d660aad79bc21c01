//! The controller reaches the runs' store through its doors
//! (`src/ports.rs`) and the pipeline, never by a store type: no file under
//! `src/kubernetes/` names the store module, and no module but the store
//! itself passes one of the store's items on (as the pipeline once passed
//! on the store's error, which the controller then matched). Read as text,
//! as `scripts/import-cycles.py` reads imports: a path in a comment counts
//! too, so the test can be too strict, never too lenient.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Rust files under `dir`, with their text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    out
}

/// The lines of `text` that name the store's module by path: as
/// `crate::store`, `super::store` or `self::store`, from the crate root
/// (`use store::…` in lib.rs), or inside a grouped import from any
/// module (`use crate::{store::X, …}`, `use super::super::{store::X}`, over
/// several lines too: the group's opening line is the one named).
fn store_paths(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut named = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let direct = ["crate::store", "super::store", "self::store"]
            .iter()
            .any(|path| line.contains(path))
            || trimmed.starts_with("use store::")
            || trimmed.starts_with("pub use store::");
        let path = trimmed
            .trim_start_matches("pub ")
            .trim_start_matches("use ");
        let ours = ["crate::", "super::", "self::"]
            .iter()
            .any(|root| path.starts_with(root));
        let grouped = ours && path.contains("::{") && {
            let group: String = (lines[i..].iter())
                .scan(false, |closed, l| {
                    (!*closed).then(|| {
                        *closed = l.contains("};");
                        *l
                    })
                })
                .collect();
            group
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .any(|segment| segment == "store" || segment.starts_with("store::"))
        };
        if direct || grouped {
            named.push(*line);
        }
    }
    named
}

/// Each line naming the store by path, in the files under `dir` that
/// `file` keeps, that `line` keeps: `<file>: <line>`.
fn named_lines(
    dir: &str,
    file: impl Fn(&Path) -> bool,
    line: impl Fn(&str) -> bool,
) -> Vec<String> {
    (sources(&repo().join(dir)).into_iter())
        .filter(|(path, _)| file(path))
        .flat_map(|(path, text)| {
            let shown = path.strip_prefix(repo()).unwrap().display().to_string();
            (store_paths(&text).into_iter())
                .filter(|l| line(l))
                .map(|l| format!("{shown}: {}", l.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_kubernetes_side_names_no_store_path() {
    let named = named_lines("src/kubernetes", |_| true, |_| true);
    let named = named.join("\n");
    assert!(named.is_empty(), "through a door instead:\n{named}");
}

#[test]
fn only_the_store_passes_its_items_on() {
    let store = repo().join("src/store");
    let passed = named_lines(
        "src",
        |path| !path.starts_with(&store),
        |line| {
            let line = line.trim_start();
            line.starts_with("pub use") || line.starts_with("pub type")
        },
    );
    let passed = passed.join("\n");
    assert!(passed.is_empty(), "a store item passed on:\n{passed}");
}

/// The checks themselves, on the text that broke the rule before the
/// doors: the pipeline passing the store's error on, the controller
/// importing it from there.
#[test]
fn the_checks_see_a_store_item_passed_on() {
    let pipeline =
        "/// The pipeline's errors are the ticket store's.\npub use crate::store::StoreError;\n";
    assert_eq!(store_paths(pipeline), ["pub use crate::store::StoreError;"]);
    assert!(store_paths("use crate::pipeline::{Effects, Pipeline};").is_empty());
    let grouped = "pub use crate::{\n    pipeline::Pipeline,\n    store::StoreError,\n};\n";
    assert_eq!(store_paths(grouped), ["pub use crate::{"]);
    let from_above = "use super::super::{\n    store::TicketStore,\n};\n";
    assert_eq!(store_paths(from_above), ["use super::super::{"]);
    assert_eq!(
        store_paths("pub use store::TicketStore;"),
        ["pub use store::TicketStore;"]
    );
    assert!(store_paths("use crate::{ports::StoreFailure, pipeline::Outcome};").is_empty());
    // Another crate's `store` is not ours.
    assert!(store_paths("use kube::runtime::reflector::{Store, store::Writer};").is_empty());
}
