//! The generated regions are their sources (`make generate` rewrites
//! them), and the generator renders and refuses as it says.

use assetscan_generate::{
    ARGUMENTS, BEGIN, BY, END, MACHINE, behind, files_with_regions, regenerate, root,
};

#[test]
fn generated_regions_are_their_sources() {
    let behind: Vec<_> = behind(&root())
        .unwrap()
        .into_iter()
        .map(|(file, _)| file)
        .collect();
    assert!(
        behind.is_empty(),
        "behind their source: {behind:?}; `make generate` rewrites them"
    );
}

/// Found by their markers: the scripts that take named arguments or
/// read the state machine's tables, the health check in both its forms,
/// and the tables in the docs; never a fixture (another release's copy).
#[test]
fn the_files_with_regions_are_found_by_their_markers() {
    let found: Vec<String> = files_with_regions(&root())
        .unwrap()
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    for expected in [
        "lua/acquire.lua",
        "lua/advance.lua",
        "lua/release.lua",
        "lua/retire.lua",
        "deploy/argocd/resource_customizations/assetscan.io/AssetScan/health.lua",
        "deploy/argocd/argocd-cm-patch.yaml",
        "docs/design/state-machine.md",
        "README.md",
    ] {
        assert!(
            found.contains(&expected.to_owned()),
            "{expected} not found in {found:?}"
        );
    }
    assert!(found.iter().all(|f| !f.contains("fixtures")), "{found:?}");
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
