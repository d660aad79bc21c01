#!/usr/bin/env python3
"""Writes the CycloneDX 1.6 SBOM (JSON) of the operator binary: `make sbom`.

The crates are those cargo compiles into `assetscan-operator` as the image
builds it (`cargo build --release --locked --bin assetscan-operator`, default
features, for the host target): cargo's own resolution, read from
`cargo tree -p assetscan-operator -e normal`. Each crate comes with its
version, licence (its Cargo.toml `license`, an SPDX expression), purl, and
the SHA-256 of its .crate file as recorded in Cargo.lock; the dependency
graph is cargo tree's.

Why not cargo-cyclonedx: it takes the crate list from `cargo metadata`, whose
features are unified over the whole workspace (dev-dependencies included), so
its SBOM of the operator lists crates that are not in the binary (the CEL
interpreter the CRD tests enable, nix, ...); it also writes absolute checkout
paths into the bom-refs. See docs/supply-chain.md, "The SBOM".

The document is reproducible: no random serial number (it is derived from
Cargo.lock and the target) and the timestamp is SOURCE_DATE_EPOCH, or the
last commit's time.

Usage: scripts/sbom.py [--out PATH] [--package NAME] [--target TRIPLE]
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
import urllib.parse
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC_VERSION = "1.6"
TOOL_NAME = "assetscan-operator scripts/sbom.py"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def run(*cmd):
    return subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout


def host_triple():
    for line in run("rustc", "-vV").splitlines():
        if line.startswith("host: "):
            return line.split(" ", 1)[1].strip()
    sys.exit("sbom: cannot read the host target from `rustc -vV`")


def tree(package, target):
    """(root, nodes, edges) of `cargo tree -e normal` for one package.

    Nodes are (name, version, path-or-None); edges map a node to the set of
    nodes it depends on directly."""
    out = run(
        "cargo", "tree", "--locked", "-p", package, "-e", "normal",
        "--target", target, "--prefix", "depth", "--format", "{p}",
    )
    # "3serde v1.0.229", "1assetscan-domain v0.1.0 (/repo/domain)",
    # "4ref-cast-impl v1.0.27 (proc-macro)", "6quote v1.0.47 (*)"
    line_re = re.compile(r"^(\d+)(\S+) v(\S+)((?: \([^)]*\))*)$")
    stack, nodes, edges, root = [], set(), {}, None
    for line in out.splitlines():
        if not line.strip():
            continue
        m = line_re.match(line)
        if not m:
            sys.exit(f"sbom: unexpected cargo tree line: {line!r}")
        depth, name, version = int(m.group(1)), m.group(2), m.group(3)
        notes = re.findall(r"\(([^)]*)\)", m.group(4))
        path = next((n for n in notes if n.startswith("/")), None)
        node = (name, version, path)
        nodes.add(node)
        edges.setdefault(node, set())
        del stack[depth:]
        if depth == 0:
            root = node
        else:
            edges[stack[depth - 1]].add(node)
        stack.append(node)
    if root is None:
        sys.exit(f"sbom: cargo tree printed nothing for {package}")
    return root, nodes, edges


def metadata(target):
    meta = json.loads(run(
        "cargo", "metadata", "--locked", "--format-version", "1", "--filter-platform", target,
    ))
    return {(p["name"], p["version"]): p for p in meta["packages"]}, meta["workspace_root"]


def lock_checksums():
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = tomllib.load(f)
    return {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}


def spdx(expression):
    """Cargo still accepts the old `MIT/Apache-2.0` form; SPDX says OR."""
    return re.sub(r"\s*/\s*", " OR ", expression.strip())


def purl(name, version, path, workspace_root):
    # purl: the version is percent-encoded ("0.9.34+deprecated" -> "%2B").
    base = f"pkg:cargo/{name}@{urllib.parse.quote(version, safe='')}"
    if path is None:
        return base
    # A workspace crate: not on crates.io; say where it comes from, relative
    # to the repository (the convention of cargo-cyclonedx).
    rel = os.path.relpath(path, workspace_root)
    return f"{base}?download_url=file://{rel}"


def component(node, packages, checksums, workspace_root, kind="library"):
    name, version, path = node
    pkg = packages.get((name, version))
    if pkg is None:
        sys.exit(f"sbom: {name} {version} is in cargo tree but not in cargo metadata")
    ref = purl(name, version, path, workspace_root)
    c = {"type": kind, "bom-ref": ref, "name": name, "version": version}
    if pkg.get("description"):
        c["description"] = " ".join(pkg["description"].split())
    c["scope"] = "required"
    checksum = checksums.get((name, version))
    if path is None:
        if pkg.get("source") != CRATES_IO or not checksum:
            sys.exit(f"sbom: {name} {version} has no crates.io checksum in Cargo.lock")
        c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
    if pkg.get("license"):
        c["licenses"] = [{"expression": spdx(pkg["license"])}]
    elif pkg.get("license_file"):
        c["licenses"] = [{"license": {"name": f"see {pkg['license_file']} in the crate"}}]
    c["purl"] = ref
    if pkg.get("repository"):
        c["externalReferences"] = [{"type": "vcs", "url": pkg["repository"]}]
    return c


def timestamp():
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        try:
            epoch = run("git", "log", "-1", "--format=%ct").strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            epoch = "0"
    t = datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def build(package, target):
    root, nodes, edges = tree(package, target)
    packages, workspace_root = metadata(target)
    checksums = lock_checksums()
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock_digest = hashlib.sha256(f.read()).hexdigest()

    def ref(node):
        return purl(node[0], node[1], node[2], workspace_root)

    main = component(root, packages, checksums, workspace_root, kind="application")
    others = sorted(nodes - {root}, key=lambda n: (n[0], n[1]))
    components = [component(n, packages, checksums, workspace_root) for n in others]
    dependencies = [
        {"ref": ref(n), "dependsOn": sorted(ref(d) for d in edges.get(n, ()))}
        for n in [root] + others
    ]
    serial = uuid.uuid5(uuid.NAMESPACE_URL, f"cargo:{root[0]}@{root[1]}:{target}:{lock_digest}")
    return {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": timestamp(),
            "lifecycles": [{"phase": "build"}],
            "tools": {"components": [{"type": "application", "name": TOOL_NAME}]},
            "component": main,
            "properties": [
                {"name": "cdx:rustc:sbom:target:triple", "value": target},
                {"name": "cdx:cargo:lockfile:sha256", "value": lock_digest},
            ],
        },
        "components": components,
        "dependencies": dependencies,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--package", default="assetscan-operator")
    ap.add_argument("--target", help="target triple (default: the host's)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "sbom", "assetscan-operator.cdx.json"))
    args = ap.parse_args()
    target = args.target or host_triple()
    bom = build(args.package, target)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(bom, f, indent=2, sort_keys=False)
        f.write("\n")
    rel = os.path.relpath(args.out, os.getcwd())
    print(f"sbom: {rel}: CycloneDX {SPEC_VERSION}, {bom['metadata']['component']['name']} "
          f"{bom['metadata']['component']['version']} and {len(bom['components'])} crates ({target})")


if __name__ == "__main__":
    main()
