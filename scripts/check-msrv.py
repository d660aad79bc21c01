#!/usr/bin/env python3
"""The declared minimum Rust version is what the dependencies need: `make policy`.

Fails when a crate in Cargo.lock declares a `rust-version` above the
workspace's (Cargo.toml [workspace.package] rust-version), or when a
workspace crate does not inherit it. Prints the highest version the
dependencies declare and which crates declare it: the declared minimum is
that version (see docs/supply-chain.md, "Minimum Rust version", for how the code's own
needs were checked: clippy's incompatible_msrv lint, which `make test` runs,
covers the standard library; the language features are listed there).
"""

import json
import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse(v):
    parts = [int(x) for x in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        declared = tomllib.load(f)["workspace"]["package"]["rust-version"]
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--locked", "--format-version", "1"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    members = set(meta["workspace_members"])
    errs, highest, by = [], (0, 0, 0), []
    for p in meta["packages"]:
        rv = p.get("rust_version")
        if p["id"] in members:
            if rv is None or parse(rv) != parse(declared):
                errs.append(f"workspace crate {p['name']} declares rust-version {rv}, "
                            f"not the workspace's {declared} (use rust-version.workspace = true)")
            continue
        if rv is None:
            continue
        v = parse(rv)
        if v > parse(declared):
            errs.append(f"{p['name']} {p['version']} needs Rust {rv}, above the declared {declared}")
        if v > highest:
            highest, by = v, [f"{p['name']} {p['version']}"]
        elif v == highest:
            by.append(f"{p['name']} {p['version']}")
    if errs:
        print("msrv: " + "\n      ".join(errs), file=sys.stderr)
        print(f"      raise [workspace.package] rust-version in Cargo.toml (and docs/supply-chain.md), "
              f"or keep the older dependency", file=sys.stderr)
        sys.exit(1)
    top = ".".join(str(x) for x in highest[:2]) if highest[2] == 0 else ".".join(map(str, highest))
    shown = ", ".join(sorted(by)[:6]) + (" ..." if len(by) > 6 else "")
    print(f"msrv: rust-version {declared}; the highest any dependency declares is {top} ({shown})")


if __name__ == "__main__":
    main()
