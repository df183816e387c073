#!/usr/bin/env bash
# Installs what gazctl needs on a fresh machine, then builds.
#
#   scripts/setup.sh demo   npm packages, Debian's etcd-server and libdeflate-dev: all the demo
#                           needs (it runs on our own brokers), no Go toolchain.
#   scripts/setup.sh [all]  the above, plus what the tests and benchmarks need: zstd, zsh, fish,
#                           iproute2, iptables, openssl, and the reference Go peers (gazette
#                           broker, Go gazctl, etcd 3.6, versitygw, a SOCKS5 server) built from
#                           the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case "$what" in
  demo|all) ;;
  *) echo "usage: scripts/setup.sh [demo|all]" >&2; exit 2 ;;
esac

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

# Debian packages: etcd-server (3.4) for our brokers; libdeflate-dev for the optional native
# inflate of direct reads (scripts/build-native.mjs; the tests require it to be built); zstd
# because the codec tests check our gzip and zstd output with the system tools; zsh and fish
# because the tests of `gazctl completion` load its scripts into the real shells.
apt_pkgs=()
[ -x /usr/bin/etcd ] || apt_pkgs+=(etcd-server)
[ -f /usr/include/libdeflate.h ] || apt_pkgs+=(libdeflate-dev)
command -v openssl >/dev/null 2>&1 || apt_pkgs+=(openssl)  # test certificates (src/testing/certs.ts)
if [ "$what" = all ] && ! command -v zstd >/dev/null 2>&1; then apt_pkgs+=(zstd); fi
if [ "$what" = all ] && ! command -v zsh >/dev/null 2>&1; then apt_pkgs+=(zsh); fi
if [ "$what" = all ] && ! command -v fish >/dev/null 2>&1; then apt_pkgs+=(fish); fi
# The SOCKS tests (test/integration/socks*.test.ts) run gazctl in a network namespace set up
# with `ip` (iproute2; unshare and nsenter are util-linux, always there) and make a certificate
# with openssl.
if [ "$what" = all ] && ! command -v ip >/dev/null 2>&1; then apt_pkgs+=(iproute2); fi
if [ "$what" = all ] && ! command -v openssl >/dev/null 2>&1; then apt_pkgs+=(openssl); fi
# The net-split tests (test/integration/net-splits.test.ts, netns.test.ts) cut a broker's own
# network namespace off with iptables DROP rules (the x_tables back end, iptables-legacy).
if [ "$what" = all ] && ! command -v iptables-legacy >/dev/null 2>&1; then apt_pkgs+=(iptables); fi
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: please install ${apt_pkgs[*]} (no apt-get on this machine)" >&2
    exit 1
  fi
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_pkgs[@]}"; } >/dev/null
fi

if [ "$what" = all ]; then
  export PATH="$PATH:/usr/local/go/bin"
  ./scripts/install-peers.sh >/dev/null
fi
npm run build --silent
