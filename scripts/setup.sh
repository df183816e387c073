#!/usr/bin/env bash
# Installs what gazctl's build, demo and tests need on a fresh machine: npm packages and the
# reference Go peers (gazette broker, Go gazctl, etcd) built from the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
export PATH="$PATH:/usr/local/go/bin"
./scripts/install-peers.sh >/dev/null
npm run build --silent
