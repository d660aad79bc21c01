#!/usr/bin/env bash
# `make image`: builds the operator image from the Dockerfile with the first
# container builder found: docker (with a reachable engine), podman, buildah.
# Where there is none it says so in one line and exits 2.
#
# The image is tagged IMAGE:VERSION (IMAGE defaults to the chart's
# image.repository, VERSION is Cargo.toml's package version, which is also the
# chart's appVersion and so its default tag). Its labels carry the version,
# the git revision, the licence and the source repository. It is built
# reproducibly: SOURCE_DATE_EPOCH is the last commit's time, and so is the
# `created` label; base images must be pinned by digest (`make pin-images`),
# unless IMAGE_ALLOW_UNPINNED=1 (a local try, not a release).
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["package"]["version"])')
image=${IMAGE:-$(sed -n 's/^  repository: *//p' charts/assetscan-operator/values.yaml | head -n1)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  revision="$revision-dirty"
fi
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
source_url=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml","rb"))["workspace"]["package"]["repository"])')

builder=""
if command -v docker >/dev/null 2>&1 && timeout 30 docker info >/dev/null 2>&1; then
  builder=docker
elif command -v podman >/dev/null 2>&1 && timeout 30 podman info >/dev/null 2>&1; then
  builder=podman
elif command -v buildah >/dev/null 2>&1; then
  builder=buildah
fi
if [ -z "$builder" ]; then
  why="no docker, podman or buildah on PATH"
  command -v docker >/dev/null 2>&1 && why="the docker client is here but no engine answers 'docker info', and there is no podman or buildah"
  echo "image: no container builder here: $why; nothing built" >&2
  exit 2
fi

unpinned=$(sed -n 's/^ARG \(BUILDER_IMAGE\|RUNTIME_IMAGE\)=//p' Dockerfile | grep -v '@sha256:[0-9a-f]\{64\}$' || true)
if [ -n "$unpinned" ] && [ "${IMAGE_ALLOW_UNPINNED:-0}" != 1 ]; then
  echo "image: base images not pinned by digest in the Dockerfile: $(echo $unpinned); run 'make pin-images' where the registries are reachable (or IMAGE_ALLOW_UNPINNED=1 for a local, non-release build)" >&2
  exit 1
fi

args=(
  --build-arg "VERSION=$version"
  --build-arg "REVISION=$revision"
  --build-arg "CREATED=$created"
  --build-arg "SOURCE=$source_url"
  --build-arg "SOURCE_DATE_EPOCH=$epoch"
  -t "$image:$version"
  -f Dockerfile
)
echo "image: building $image:$version with $builder (revision $revision, SOURCE_DATE_EPOCH=$epoch)"
case "$builder" in
  docker)
    # BuildKit: rewrite-timestamp clamps the files' times to SOURCE_DATE_EPOCH.
    SOURCE_DATE_EPOCH=$epoch docker build "${args[@]}" --output "type=docker,rewrite-timestamp=true" . ;;
  podman)
    podman build "${args[@]}" --timestamp "$epoch" . ;;
  buildah)
    buildah build "${args[@]}" --timestamp "$epoch" . ;;
esac
echo "image: built $image:$version"
