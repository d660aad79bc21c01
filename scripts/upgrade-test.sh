#!/usr/bin/env bash
# `make upgrade-test`: a release, built from this repository's own history,
# beside this tree, then the rolling upgrade and the rollback
# (chaos/src/upgrade). The release is UPGRADE_FROM (`X.Y.Z`, a section
# `## [X.Y.Z]` of CHANGELOG.md), by default the latest release section; its
# commit is the section's `Commit: <id>` line. `upgrade-test.sh releases`
# prints `<version> <commit>` for every release section that names one,
# newest first (.ci/run tests the upgrade from each).
#
# The release is checked out as a git worktree under
# target/upgrade/<commit> and built with this tree's CARGO_TARGET_DIR, so
# that both share every registry dependency. Cargo puts both trees'
# binaries at the same path (target/debug/assetscan-operator): the
# release's is copied out right after its build and removed from there, and
# this tree's is built back into place and compared with it, so that no
# other release's binary is left where this tree's tests and tools look for
# its own. Cargo also names a workspace crate's artifacts by its path
# relative to its workspace, the same in both trees: left alone, each tree
# would take the other's `assetscan-domain` for fresh. The release's
# members are therefore built with a profile override of their own (a
# codegen-units value taken from the release's commit, never 256, the
# default this tree builds with), which gives them artifacts and
# fingerprints apart, from this tree's and from every other release's (the
# workspace's other crates keep one version across releases); two releases
# that would share a value are refused.
#
# UPGRADE_ARGS passes flags to the harness (`--receiver legacy|both|standard`,
# `--kubeconfig PATH`, `--inject different-lock|no-bridge|required-field`,
# `--objects N`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cargo=${CARGO:-cargo}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}

# `<version> <commit>` per release section with a `Commit:` line of
# CHANGELOG.md (or of $CHANGELOG): the one reader of the releases, which
# the chaos crate's tests call too (`release::released`).
releases() {
  awk '/^## \[[0-9]+\.[0-9]+\.[0-9]+\]/ { version = substr($2, 2, length($2) - 2); next }
       /^## / { version = ""; next }
       version != "" && $1 == "Commit:" && $2 ~ /^[0-9a-f]+$/ && length($2) == 40 {
         print version, $2; version = ""
       }' "${CHANGELOG:-CHANGELOG.md}"
}

# The codegen-units value of a release's members: 1..254, from its commit.
units_of() {
  echo $((0x${1:0:6} % 254 + 1))
}

if [ "${1:-}" = releases ]; then
  releases
  exit 0
fi

all=$(releases)
if [ -z "$all" ]; then
  echo "upgrade-test: CHANGELOG.md names no release commit ('Commit: <40 hex>' under a '## [X.Y.Z]' section)" >&2
  exit 1
fi
if [ -n "${UPGRADE_FROM:-}" ]; then
  picked=$(awk -v want="$UPGRADE_FROM" '$1 == want' <<<"$all")
  if [ -z "$picked" ]; then
    echo "upgrade-test: UPGRADE_FROM=$UPGRADE_FROM: no such release section with a commit in CHANGELOG.md; releases: $(cut -d' ' -f1 <<<"$all" | tr '\n' ' ')" >&2
    exit 1
  fi
else
  picked=$(head -n1 <<<"$all")
fi
read -r version commit <<<"$picked"
units=$(units_of "$commit")
while read -r other_version other_commit; do
  if [ "$other_commit" != "$commit" ] && [ "$(units_of "$other_commit")" = "$units" ]; then
    echo "upgrade-test: releases $version and $other_version would build with one codegen-units value ($units) and share artifacts; change units_of in $0" >&2
    exit 1
  fi
done <<<"$all"
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "upgrade-test: commit $commit (release $version) is not in this clone; fetch it, e.g. 'git fetch --unshallow' or 'git fetch origin $commit'" >&2
  exit 1
fi
tree=$root/target/upgrade/$commit
if [ ! -e "$tree/Cargo.toml" ]; then
  rm -rf "$tree"
  git worktree prune
  git worktree add --detach "$tree" "$commit" >/dev/null
fi
bin=$root/target/upgrade/bin/$commit
uplifted=$CARGO_TARGET_DIR/debug/assetscan-operator
echo "upgrade-test: building release $version ($commit) in $tree"
members=$(cd "$tree" && $cargo metadata --no-deps --locked --format-version 1 |
  python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"]))')
apart=()
for member in $members; do
  apart+=(--config "profile.dev.package.$member.codegen-units=$units")
done
(cd "$tree" && $cargo build --locked "${apart[@]}" --bin assetscan-operator)
mkdir -p "$bin"
cp "$uplifted" "$bin/assetscan-operator"
# Gone at once: should this tree's build fail, no binary of release
# $version stays behind under this tree's name.
rm -f "$uplifted"
echo "upgrade-test: building this tree"
$cargo build -p assetscan-operator --bin assetscan-operator
$cargo build -p assetscan-chaos --bins
if [ ! -x "$uplifted" ] || cmp -s "$uplifted" "$bin/assetscan-operator"; then
  echo "upgrade-test: $uplifted is not this tree's operator after its build (missing, or release $version's binary): refusing to go on" >&2
  exit 1
fi
exec "$CARGO_TARGET_DIR/debug/upgrade-test" --previous-commit "$commit" \
  --previous-version "$version" --previous-tree "$tree" \
  --previous-operator "$bin/assetscan-operator" ${UPGRADE_ARGS:-}
