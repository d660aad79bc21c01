#!/usr/bin/env bash
# `make policy` (part of `make test`): the supply-chain checks, offline unless
# said otherwise. Tools come from `make deps` (scripts/ensure-supply-tools.sh).
#
#   1. cargo-deny, offline: licences, bans (duplicate versions, banned
#      crates, wildcards), sources (crates.io only); deny.toml
#   2. advisories (cargo-deny, RustSec database): only when the database is
#      reachable; otherwise one line saying it was skipped
#   3. yanked crates in Cargo.lock (cargo's copy of the crates.io index)
#   4. the SBOM: generated (scripts/sbom.py), then validated against the
#      CycloneDX schema, Cargo.lock and the operator's dependency tree
#   5. one version in Cargo.toml, the chart, CHANGELOG.md and the Dockerfile
#   6. the minimum Rust version covers every dependency
#
# POLICY_OFFLINE=1 skips what needs the network (2, and the index refresh of 3).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

tools=$PWD/target/tools
deny=$tools/bin/cargo-deny
py=$tools/py/bin/python
for tool in "$deny" "$py"; do
  [ -x "$tool" ] || { echo "policy: $tool missing: run 'make deps'" >&2; exit 1; }
done

# cargo-deny reads the metadata of every platform's crates; a build only
# downloads the host's. Fetch them all first (a no-op once they are here).
cargo fetch --locked --quiet || { echo "policy: cargo fetch failed: the crates of Cargo.lock are needed (offline: fetch them once online)" >&2; exit 1; }
echo "policy: cargo-deny $("$deny" --version | awk '{print $2}'): licenses, bans, sources (offline)"
# -D warnings: a skip entry no longer needed, or an allowed licence no crate
# uses, fails too, so that deny.toml stays exact.
"$deny" deny --offline --workspace check -D warnings licenses bans sources

advisory_db=https://github.com/rustsec/advisory-db
if [ "${POLICY_OFFLINE:-0}" = 1 ]; then
  echo "policy: advisories: SKIPPED (POLICY_OFFLINE=1)"
elif GIT_TERMINAL_PROMPT=0 timeout 20 git ls-remote --exit-code "$advisory_db" HEAD >/dev/null 2>&1; then
  echo "policy: advisories (RustSec database, fetched now)"
  "$deny" deny --workspace check advisories
else
  echo "policy: advisories: SKIPPED: the RustSec advisory database ($advisory_db) is unreachable from here; run 'make policy' where it is"
fi

if [ "${POLICY_OFFLINE:-0}" = 1 ]; then
  python3 scripts/check-yanked.py
else
  python3 scripts/check-yanked.py --refresh
fi

sbom=target/sbom/assetscan-operator.cdx.json
python3 scripts/sbom.py --out "$sbom"
"$py" scripts/check-sbom.py "$sbom" --self-test

python3 scripts/check-release.py
python3 scripts/check-msrv.py
echo "policy: ok ($(( $(date +%s) - start ))s)"
