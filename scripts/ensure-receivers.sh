#!/usr/bin/env bash
# Installs the receivers the notification tests deliver to and check with
# the ecosystems' own software, when missing (a second run does nothing):
#
# - a Python virtualenv at target/tools/receivers-py with the Standard
#   Webhooks reference library (the webhook receiver example,
#   examples/webhook-receiver/requirements.txt), the CloudEvents SDK and
#   jsonschema (tests/receivers/requirements.txt), all pinned;
# - faketime (Debian's package), with which the webhook test runs a
#   receiver whose clock is minutes ahead, so that a captured delivery
#   arrives older than the library's tolerance;
# - Prometheus Alertmanager (Debian's package prometheus-alertmanager; its
#   service is not started here, the tests start their own).
set -euo pipefail
cd "$(dirname "$0")/.."

py=$PWD/target/tools/receivers-py
reqs=(examples/webhook-receiver/requirements.txt tests/receivers/requirements.txt)

apt_install() {
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "missing: $*; install it (Debian: apt-get install $*)" >&2
    exit 1
  fi
}

command -v faketime >/dev/null 2>&1 || apt_install faketime
if [ ! -x /usr/bin/prometheus-alertmanager ]; then
  echo "installing Prometheus Alertmanager (Debian package prometheus-alertmanager)"
  apt_install prometheus-alertmanager
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus-alertmanager >/dev/null 2>&1 || true
  fi
fi

pinned=$(cat "${reqs[@]}")
if [ "$pinned" != "$(cat "$py/requirements.txt" 2>/dev/null)" ] ||
  ! "$py/bin/python" -c 'import standardwebhooks, cloudevents.core.bindings.http, jsonschema' 2>/dev/null; then
  echo "installing the receivers' Python libraries in target/tools/receivers-py"
  rm -rf "$py"
  mkdir -p "$(dirname "$py")"
  python3 -m venv "$py" >/dev/null 2>&1 || { apt_install python3-venv; rm -rf "$py"; python3 -m venv "$py"; }
  "$py/bin/pip" install --quiet --disable-pip-version-check --no-input "${reqs[@]/#/-r}"
  printf '%s' "$pinned" >"$py/requirements.txt"
fi
