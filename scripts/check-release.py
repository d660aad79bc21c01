#!/usr/bin/env python3
"""One version, one licence, one source for the crate, the chart and the image: `make policy`.

Checks that
- Cargo.toml's package version = Chart.yaml's version and appVersion
  = CHANGELOG.md's latest release = the Dockerfile's VERSION default;
- CHANGELOG.md has an Unreleased section above the releases;
- the chart's default image tag is empty, so that it is the appVersion
  (templates/_helpers.tpl), and the helper does default to .Chart.AppVersion;
- the Dockerfile sets the OCI labels (source, version, revision, created,
  licenses), its licence label is Cargo.toml's licence and its source
  default is Cargo.toml's repository.
It also says whether the Dockerfile's base images are pinned by digest
(`make image` refuses them otherwise; `make pin-images` pins them).
"""

import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHART = os.path.join(ROOT, "charts", "assetscan-operator")


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def yaml_scalar(text, key):
    """A top-level `key: value` of a simple YAML file (no YAML library needed)."""
    m = re.search(rf"^{re.escape(key)}:\s*(.*?)\s*(?:#.*)?$", text, re.M)
    return m.group(1).strip("'\"") if m else None


def main():
    errs, notes = [], []
    cargo = tomllib.loads(read("Cargo.toml"))
    version = cargo["package"]["version"]
    licence = cargo["workspace"]["package"]["license"]
    repository = cargo["workspace"]["package"].get("repository")

    chart = read("charts", "assetscan-operator", "Chart.yaml")
    for key in ("version", "appVersion"):
        v = yaml_scalar(chart, key)
        if v != version:
            errs.append(f"Chart.yaml {key} is {v!r}, Cargo.toml's version is {version!r}")

    values = read("charts", "assetscan-operator", "values.yaml")
    m = re.search(r"^image:\n(?:  .*\n)*?  tag:\s*(\S*)", values, re.M)
    if not m or m.group(1) not in ('""', "''"):
        errs.append("values.yaml image.tag must be empty (\"\"): the default tag is the chart's appVersion")
    helpers = read("charts", "assetscan-operator", "templates", "_helpers.tpl")
    if "default .Chart.AppVersion .Values.image.tag" not in helpers:
        errs.append("templates/_helpers.tpl: the image tag no longer defaults to .Chart.AppVersion")

    changelog = read("CHANGELOG.md")
    headings = re.findall(r"^## \[([^\]]+)\](.*)$", changelog, re.M)
    if not headings or headings[0][0].lower() != "unreleased":
        errs.append("CHANGELOG.md: the first section must be '## [Unreleased]'")
    released = [(v, rest) for v, rest in headings if v.lower() != "unreleased"]
    if not released:
        errs.append("CHANGELOG.md has no released version")
    else:
        latest, rest = released[0]
        if latest != version:
            errs.append(f"CHANGELOG.md's latest release is {latest}, Cargo.toml's version is {version}")
        if not re.match(r"^ - \d{4}-\d{2}-\d{2}\s*$", rest):
            errs.append(f"CHANGELOG.md: '## [{latest}]' needs a date: '## [{latest}] - YYYY-MM-DD'")

    docker = read("Dockerfile")
    args = dict(re.findall(r"^ARG (\w+)=(\S*)$", docker, re.M))
    if args.get("VERSION") != version:
        errs.append(f"Dockerfile ARG VERSION={args.get('VERSION')}, Cargo.toml's version is {version}")
    if repository and args.get("SOURCE") != repository:
        errs.append(f"Dockerfile ARG SOURCE={args.get('SOURCE')}, Cargo.toml's repository is {repository}")
    for label, value in [("version", "${VERSION}"), ("revision", "${REVISION}"),
                         ("created", "${CREATED}"), ("source", "${SOURCE}"),
                         ("licenses", licence)]:
        if f'org.opencontainers.image.{label}="{value}"' not in docker:
            errs.append(f'Dockerfile: label org.opencontainers.image.{label}="{value}" missing')
    froms = re.findall(r"^FROM\s+(\S+)", docker, re.M)
    for f in froms:
        if f not in ("${BUILDER_IMAGE}", "${RUNTIME_IMAGE}"):
            errs.append(f"Dockerfile: FROM {f}: base images go through ARG BUILDER_IMAGE / RUNTIME_IMAGE")
    unpinned = []
    for arg in ("BUILDER_IMAGE", "RUNTIME_IMAGE"):
        ref = args.get(arg)
        if ref is None:
            errs.append(f"Dockerfile: ARG {arg}=... missing")
        elif "@" in ref:
            if not re.fullmatch(r"[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}", ref):
                errs.append(f"Dockerfile: ARG {arg}={ref}: not name:tag@sha256:<64 hex>")
        else:
            unpinned.append(ref)
    if unpinned:
        notes.append(f"base images not yet pinned by digest ({', '.join(unpinned)}): "
                     "`make image` refuses them until `make pin-images` runs where the registries are reachable")

    if errs:
        print("release: " + "\n         ".join(errs), file=sys.stderr)
        sys.exit(1)
    print(f"release: version {version} in Cargo.toml, Chart.yaml (version, appVersion), CHANGELOG.md "
          f"and the Dockerfile; image tag = appVersion; OCI labels set ({licence})")
    for n in notes:
        print(f"release: note: {n}")


if __name__ == "__main__":
    main()
