#!/usr/bin/env python3
"""Fails when Cargo.lock holds a yanked crate: `make policy`.

cargo-deny checks yanked crates only together with the advisory database
(`cargo deny check advisories`), which is often out of reach (scripts/policy.sh
skips it then). This check needs only cargo's own copy of the crates.io index:
with --refresh it first brings that copy up to date with `cargo update
--dry-run` (which reads the index entry of every dependency and changes
nothing), and when crates.io cannot be reached it says so and checks against
the copy it has, with its age.

Usage: check-yanked.py [--refresh]
"""

import glob
import json
import os
import subprocess
import sys
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def cache_dirs():
    home = os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
    return glob.glob(os.path.join(home, "registry", "index", "*", ".cache"))


def entry_path(base, name):
    """Cargo's layout of index entries (lower-cased names)."""
    n = name.lower()
    if len(n) <= 2:
        return os.path.join(base, str(len(n)), n)
    if len(n) == 3:
        return os.path.join(base, "3", n[0], n)
    return os.path.join(base, n[:2], n[2:4], n)


def read_entry(name):
    """{version: yanked} from the freshest cached index entry, and its mtime."""
    best = None
    for base in cache_dirs():
        p = entry_path(base, name)
        if os.path.exists(p) and (best is None or os.path.getmtime(p) > os.path.getmtime(best)):
            best = p
    if best is None:
        return None, None
    with open(best, "rb") as f:
        data = f.read()
    # A cache entry: a small header, then "version\0json\0" pairs.
    versions = {}
    for chunk in data.split(b"\0"):
        if chunk.startswith(b"{"):
            try:
                v = json.loads(chunk)
            except ValueError:
                continue
            versions[v["vers"]] = bool(v.get("yanked"))
    return versions, os.path.getmtime(best)


def refresh():
    env = dict(os.environ, CARGO_NET_RETRY="0", CARGO_HTTP_TIMEOUT="20")
    try:
        r = subprocess.run(["cargo", "update", "--dry-run"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "timed out"
    if r.returncode != 0:
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        return lines[-1] if lines else f"exit {r.returncode}"
    return None


def main():
    refreshed = None
    if "--refresh" in sys.argv[1:]:
        err = refresh()
        refreshed = err is None
        if err:
            print(f"yanked: crates.io index unreachable ({err}); checking against cargo's local copy")
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = tomllib.load(f)["package"]
    yanked, unknown, oldest = [], [], None
    registry = [p for p in lock if p.get("source") == CRATES_IO]
    others = [p for p in lock if "source" in p and p["source"] != CRATES_IO]
    for p in registry:
        versions, mtime = read_entry(p["name"])
        if versions is None or p["version"] not in versions:
            unknown.append(f"{p['name']} {p['version']}")
            continue
        oldest = mtime if oldest is None else min(oldest, mtime)
        if versions[p["version"]]:
            yanked.append(f"{p['name']} {p['version']}")
    if others:
        # sources are cargo-deny's job; say it here too rather than skip silently
        print("yanked: not crates.io, not checked here: "
              + ", ".join(f"{p['name']} {p['version']} ({p['source']})" for p in others))
    if yanked:
        print(f"yanked: {len(yanked)} yanked crate(s) in Cargo.lock: {', '.join(yanked)}", file=sys.stderr)
        print("  update them (cargo update -p NAME) or replace the crate that requires them", file=sys.stderr)
        sys.exit(1)
    if unknown and len(unknown) == len(registry):
        print("yanked: SKIPPED: cargo has no local copy of the crates.io index entries "
              "(run a cargo build online once)")
        return
    age = ""
    if oldest is not None and not refreshed:
        age = f", index copy from {time.strftime('%Y-%m-%d %H:%M', time.localtime(oldest))}"
    note = f"; {len(unknown)} not in the local index copy: {', '.join(unknown[:5])}" if unknown else ""
    print(f"yanked: none of {len(registry) - len(unknown)} crates.io crates in Cargo.lock is yanked{age}{note}")


if __name__ == "__main__":
    main()
