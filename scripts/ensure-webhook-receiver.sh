#!/usr/bin/env bash
# Installs what the webhook receiver example (examples/webhook-receiver) and
# its test (tests/providers/, notify::standard_webhooks) need, when
# missing (a second run does nothing):
#
# - a Python virtualenv at target/tools/webhook-py with the Standard Webhooks
#   reference library (PyPI `standardwebhooks`, MIT, no dependencies), pinned
#   in examples/webhook-receiver/requirements.txt;
# - faketime (Debian's package), with which the test runs a receiver whose
#   clock is minutes ahead, so that a captured delivery arrives older than
#   the library's tolerance.
set -euo pipefail
cd "$(dirname "$0")/.."

py=$PWD/target/tools/webhook-py
reqs=examples/webhook-receiver/requirements.txt

apt_install() {
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "missing: $*; install it (Debian: apt-get install $*)" >&2
    exit 1
  fi
}

command -v faketime >/dev/null 2>&1 || apt_install faketime

if ! cmp -s "$reqs" "$py/requirements.txt" 2>/dev/null || ! "$py/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  echo "installing the Standard Webhooks library in target/tools/webhook-py"
  rm -rf "$py"
  mkdir -p "$(dirname "$py")"
  python3 -m venv "$py" >/dev/null 2>&1 || { apt_install python3-venv; rm -rf "$py"; python3 -m venv "$py"; }
  "$py/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$reqs"
  cp "$reqs" "$py/requirements.txt"
fi
