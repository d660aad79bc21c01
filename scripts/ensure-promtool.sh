#!/usr/bin/env bash
# Installs promtool, which tests/gitops/ uses to check the chart's
# PrometheusRule and to run its alerting unit tests, when a fresh machine
# lacks it: Debian's prometheus package ships it (the package's service is
# not started here). Elsewhere, put promtool (Prometheus >= 2.42) on PATH.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing promtool (Debian package prometheus)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # Only the tool is wanted, not a Prometheus server.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
else
  echo "promtool is required: install it, e.g. 'sudo apt-get install prometheus'" >&2
  exit 1
fi
command -v promtool >/dev/null 2>&1 || {
  echo "promtool still missing after installing prometheus" >&2
  exit 1
}
