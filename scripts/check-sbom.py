#!/usr/bin/env python3
"""Checks the operator's SBOM (scripts/sbom.py's output): `make policy`.

1. Valid CycloneDX: validated against the CycloneDX JSON schema of its
   specVersion, as shipped by the CycloneDX project's own Python library
   (cyclonedx-python-lib, installed by `make deps` in target/tools/py).
2. It matches the tree: its components are exactly the crates of
   `cargo tree -p assetscan-operator -e normal --prefix none` for the target
   it names (none missing, none extra), and the described component is the
   operator at Cargo.toml's version.
3. It matches Cargo.lock: every crates.io component has the SHA-256 that
   Cargo.lock records for it; its purl names that crate and version; its
   licence is the crate's declared licence, a valid SPDX expression.
4. The dependency graph refers only to listed components.

Usage: check-sbom.py PATH [--self-test]
  --self-test  also checks that a tampered copy (a crate dropped, an extra
               crate, a wrong hash, a wrong licence) is rejected.
"""

import copy
import json
import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from license_expression import get_spdx_licensing
    from packageurl import PackageURL
except ImportError as e:  # pragma: no cover
    sys.exit(f"sbom check: {e}; run `make deps` (it installs cyclonedx-python-lib in target/tools/py)")


def run(*cmd):
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def expected(target):
    """What the SBOM must say, from cargo and Cargo.lock."""
    out = run("cargo", "tree", "--locked", "-p", "assetscan-operator", "-e", "normal",
              "--target", target, "--prefix", "none", "--format", "{p}")
    crates = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            crates.add((parts[0], parts[1].removeprefix("v")))
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = {(p["name"], p["version"]): p for p in tomllib.load(f)["package"]}
    meta = json.loads(run("cargo", "metadata", "--locked", "--no-deps", "--format-version", "1"))
    root = next(p for p in meta["packages"] if p["name"] == "assetscan-operator")
    licences = {
        (p["name"], p["version"]): p.get("license")
        for p in json.loads(run("cargo", "metadata", "--locked", "--format-version", "1",
                                "--filter-platform", target))["packages"]
    }
    return crates, lock, root, licences


def problems(bom, crates, lock, root, licences):
    errs = []
    if bom.get("bomFormat") != "CycloneDX":
        errs.append(f"bomFormat is {bom.get('bomFormat')!r}, not 'CycloneDX'")
    meta = bom.get("metadata", {})
    main = meta.get("component", {})
    if (main.get("name"), main.get("version")) != (root["name"], root["version"]):
        errs.append(f"describes {main.get('name')} {main.get('version')}, "
                    f"not {root['name']} {root['version']} (Cargo.toml)")
    listed = {}
    for c in bom.get("components", []):
        key = (c.get("name"), c.get("version"))
        if key in listed:
            errs.append(f"{key[0]} {key[1]} listed twice")
        listed[key] = c
    want = crates - {(root["name"], root["version"])}
    for name, version in sorted(want - set(listed)):
        errs.append(f"missing: {name} {version} (in cargo tree)")
    for name, version in sorted(set(listed) - want):
        errs.append(f"extra: {name} {version} (not in cargo tree)")
    licensing = get_spdx_licensing()
    for (name, version), c in sorted(listed.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        what = f"{name} {version}"
        try:
            p = PackageURL.from_string(c.get("purl", ""))
            if (p.type, p.name, p.version) != ("cargo", name, version):
                errs.append(f"{what}: purl {c.get('purl')} names another crate")
        except ValueError as e:
            errs.append(f"{what}: purl {c.get('purl')!r}: {e}")
        entry = lock.get((name, version))
        if entry is None:
            errs.append(f"{what}: not in Cargo.lock")
            continue
        hashes = {h.get("alg"): h.get("content") for h in c.get("hashes", [])}
        if entry.get("checksum"):
            if hashes.get("SHA-256") != entry["checksum"]:
                errs.append(f"{what}: SHA-256 {hashes.get('SHA-256')} but Cargo.lock has {entry['checksum']}")
        elif "source" in entry:
            errs.append(f"{what}: Cargo.lock has no checksum for a crate from {entry['source']}")
        declared = licences.get((name, version))
        got = [lic.get("expression") for lic in c.get("licenses", [])]
        if declared:
            if len(got) != 1 or got[0] is None:
                errs.append(f"{what}: licence missing (Cargo.toml says {declared!r})")
            else:
                info = licensing.validate(got[0], strict=True)
                if info.errors:
                    errs.append(f"{what}: licence {got[0]!r} is not a valid SPDX expression: {info.errors}")
                elif licensing.parse(got[0]) != licensing.parse(declared.replace("/", " OR ")):
                    errs.append(f"{what}: licence {got[0]!r} but Cargo.toml says {declared!r}")
    refs = {c.get("bom-ref") for c in bom.get("components", [])} | {main.get("bom-ref")}
    for d in bom.get("dependencies", []):
        for r in [d.get("ref")] + d.get("dependsOn", []):
            if r not in refs:
                errs.append(f"dependency graph names {r!r}, which is not a component")
    return errs


def schema_errors(text, spec):
    versions = {"1.6": SchemaVersion.V1_6, "1.5": SchemaVersion.V1_5}
    if spec not in versions:
        return [f"specVersion {spec!r}: expected 1.6 (or 1.5)"]
    err = JsonStrictValidator(versions[spec]).validate_str(text)
    return [f"schema: {err}"] if err else []


def self_test(bom, exp):
    """A tampered SBOM must be rejected, each tampering for its own reason."""
    def tamper(how):
        b = copy.deepcopy(bom)
        how(b)
        return problems(b, *exp)

    def wrong_hash(b):
        c = next(c for c in b["components"] if c.get("hashes"))
        c["hashes"][0]["content"] = "0" * 64

    def wrong_licence(b):
        c = next(c for c in b["components"] if c.get("licenses"))
        c["licenses"] = [{"expression": "GPL-3.0-only"}]

    def extra(b):
        c = copy.deepcopy(b["components"][0])
        c["name"], c["version"] = "left-pad", "1.0.0"
        b["components"].append(c)

    cases = {
        "a crate dropped": lambda b: b["components"].pop(),
        "an extra crate": extra,
        "a wrong hash": wrong_hash,
        "a wrong licence": wrong_licence,
    }
    failed = [name for name, how in cases.items() if not tamper(how)]
    if failed:
        sys.exit(f"sbom check: self-test: not rejected: {', '.join(failed)}")
    return len(cases)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    path = args[0]
    with open(path) as f:
        text = f.read()
    bom = json.loads(text)
    errs = schema_errors(text, bom.get("specVersion"))
    props = {p.get("name"): p.get("value") for p in bom.get("metadata", {}).get("properties", [])}
    target = props.get("cdx:rustc:sbom:target:triple")
    if not target:
        errs.append("metadata.properties lacks cdx:rustc:sbom:target:triple")
        target = "x86_64-unknown-linux-gnu"
    exp = expected(target)
    errs += problems(bom, *exp)
    if errs:
        print(f"sbom check: {path}: {len(errs)} problem(s)", file=sys.stderr)
        for e in errs[:40]:
            print(f"  - {e}", file=sys.stderr)
        sys.exit(1)
    note = ""
    if "--self-test" in sys.argv:
        note = f"; {self_test(bom, exp)} tampered copies rejected"
    print(f"sbom check: {os.path.relpath(path)}: valid CycloneDX {bom['specVersion']}, "
          f"{len(bom['components'])} crates = cargo tree of assetscan-operator ({target}), "
          f"hashes and licences = Cargo.lock and the crates' manifests{note}")


if __name__ == "__main__":
    main()
