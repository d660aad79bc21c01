#!/usr/bin/env bash
# Installs what the tests and the demo need and a fresh machine may lack:
# redis-server and redis-cli (Debian's packages). On other systems, install
# Redis 7 or newer by hand and put redis-server and redis-cli on PATH.
set -euo pipefail

need_redis=0
command -v redis-server >/dev/null 2>&1 || need_redis=1
command -v redis-cli >/dev/null 2>&1 || need_redis=1
if [ "$need_redis" = 1 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing redis-server (Debian package)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
  else
    echo "redis-server and redis-cli (Redis >= 7) are required: install them, e.g. 'sudo apt-get install redis-server'" >&2
    exit 1
  fi
fi
version=$(redis-server --version | sed -n 's/.*v=\([0-9]*\)\..*/\1/p')
if [ "${version:-0}" -lt 7 ]; then
  echo "redis-server $version found; Redis >= 7 is required" >&2
  exit 1
fi
