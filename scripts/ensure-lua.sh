#!/usr/bin/env bash
# Installs what the Argo CD health-script tests (tests/gitops/) need and a
# fresh machine may lack: a Lua 5.4 interpreter, the Lua 5.1 one (the dialect
# of Argo CD's own interpreter, so the scripts are run in both) and cjson for
# both (Debian's lua5.4, lua5.1 and lua-cjson). Elsewhere, install them by
# hand: `lua5.4` and `lua5.1` on PATH, each able to `require "cjson"`.
set -euo pipefail

ready() {
  for lua in lua5.4 lua5.1; do
    command -v "$lua" >/dev/null 2>&1 || return 1
    "$lua" -e 'require("cjson")' >/dev/null 2>&1 || return 1
  done
}

if ready; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing lua5.4, lua5.1 and lua-cjson (Debian packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lua5.4 lua5.1 lua-cjson >/dev/null
else
  echo "lua5.4 and lua5.1 with cjson are required: install them, e.g. 'sudo apt-get install lua5.4 lua5.1 lua-cjson'" >&2
  exit 1
fi
ready || {
  echo "lua5.4 / lua5.1 still cannot load cjson after installing lua-cjson" >&2
  exit 1
}
