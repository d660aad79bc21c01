#!/usr/bin/env bash
# `make upgrade-test`: the previous release, built from this repository's
# own history, beside this tree, then the rolling upgrade and the rollback
# (chaos/src/upgrade). The previous release is the commit the latest
# section of CHANGELOG.md names (`Commit: <id>`); it is checked out as a
# git worktree under target/upgrade/<commit> and built with this tree's
# CARGO_TARGET_DIR, so that both share every registry dependency. Cargo
# puts both trees' binaries at the same path (target/debug/…): the previous
# release's is copied out right after its build, before this tree's.
# Cargo also names a workspace crate's artifacts by its path relative to
# its workspace, the same in both trees: left alone, each tree would take
# the other's `assetscan-domain` for fresh. The previous release's members
# are therefore built with a profile override of their own (one codegen
# unit fewer), which gives them artifacts and fingerprints apart.
#
# UPGRADE_ARGS passes flags to the harness (`--kubeconfig PATH`,
# `--inject different-lock|no-bridge|required-field`, `--objects N`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cargo=${CARGO:-cargo}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}

commit=$(grep -m1 -oE '^Commit: [0-9a-f]{40}' CHANGELOG.md | cut -d' ' -f2 || true)
if [ -z "$commit" ]; then
  echo "upgrade-test: CHANGELOG.md names no release commit ('Commit: <40 hex>' under a release)" >&2
  exit 1
fi
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "upgrade-test: commit $commit (the previous release) is not in this clone; fetch it, e.g. 'git fetch --unshallow' or 'git fetch origin $commit'" >&2
  exit 1
fi
tree=$root/target/upgrade/$commit
if [ ! -e "$tree/Cargo.toml" ]; then
  rm -rf "$tree"
  git worktree prune
  git worktree add --detach "$tree" "$commit" >/dev/null
fi
bin=$root/target/upgrade/bin/$commit
echo "upgrade-test: building the previous release ($commit) in $tree"
members=$(cd "$tree" && $cargo metadata --no-deps --locked --format-version 1 |
  python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"]))')
apart=()
for member in $members; do
  apart+=(--config "profile.dev.package.$member.codegen-units=255")
done
(cd "$tree" && $cargo build --locked "${apart[@]}" --bin assetscan-operator)
mkdir -p "$bin"
cp "$CARGO_TARGET_DIR/debug/assetscan-operator" "$bin/assetscan-operator"
echo "upgrade-test: building this tree"
$cargo build -p assetscan-chaos --bins
exec "$CARGO_TARGET_DIR/debug/upgrade-test" --previous-commit "$commit" \
  --previous-tree "$tree" --previous-operator "$bin/assetscan-operator" ${UPGRADE_ARGS:-}
