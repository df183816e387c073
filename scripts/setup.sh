#!/usr/bin/env bash
# Installs what gazctl's build, demo and tests need on a fresh machine: npm packages and the
# reference Go peers (gazette broker, Go gazctl, etcd) built from the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
export PATH="$PATH:/usr/local/go/bin"
# The codec tests check our gzip and zstd output with the system tools.
if ! command -v zstd >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && apt-get install -y -qq zstd; } >/dev/null
fi
./scripts/install-peers.sh >/dev/null
npm run build --silent
