#!/usr/bin/env bash
# `make pin-images`: pins the Dockerfile's base images (ARG BUILDER_IMAGE,
# ARG RUNTIME_IMAGE) by digest: each `name:tag` becomes `name:tag@sha256:...`,
# the digest of the tag's manifest (list) as the registry serves it now.
# Needs the registries and one of: skopeo, crane, regctl, docker buildx.
# Commit the result; to move to a newer base, run it again with
# REPIN=1 (it re-resolves the tags of already pinned images).
set -euo pipefail
cd "$(dirname "$0")/.."

resolve() {
  local ref=$1
  if command -v skopeo >/dev/null 2>&1; then
    skopeo inspect --raw "docker://$ref" | sha256sum | awk '{print "sha256:"$1}'
  elif command -v crane >/dev/null 2>&1; then
    crane digest "$ref"
  elif command -v regctl >/dev/null 2>&1; then
    regctl image digest "$ref"
  elif command -v docker >/dev/null 2>&1 && docker buildx version >/dev/null 2>&1; then
    docker buildx imagetools inspect "$ref" --format '{{json .Manifest}}' \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])'
  else
    echo "pin-images: no tool to ask a registry for a digest (skopeo, crane, regctl or docker buildx)" >&2
    return 2
  fi
}

for arg in BUILDER_IMAGE RUNTIME_IMAGE; do
  current=$(sed -n "s/^ARG $arg=//p" Dockerfile)
  ref=${current%@*}
  if [ "$current" != "$ref" ] && [ "${REPIN:-0}" != 1 ]; then
    echo "pin-images: $arg already pinned: $current"
    continue
  fi
  digest=$(resolve "$ref") || exit $?
  case "$digest" in
    sha256:[0-9a-f]*) [ ${#digest} -eq 71 ] || { echo "pin-images: bad digest for $ref: $digest" >&2; exit 1; } ;;
    *) echo "pin-images: bad digest for $ref: $digest" >&2; exit 1 ;;
  esac
  sed -i "s|^ARG $arg=.*|ARG $arg=$ref@$digest|" Dockerfile
  echo "pin-images: $arg=$ref@$digest"
done
