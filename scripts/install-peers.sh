#!/usr/bin/env bash
# Builds the reference test peers from the Go module proxy: the upstream Gazette broker and
# gazctl (v0.103.0), an etcd server new enough for their etcd client (Debian's 3.4 is
# refused with "old cluster version"), and versitygw, an S3-compatible server with a posix
# backend used to test S3 fragment stores. It also builds sum-consumer, our own small Go
# consumer application (scripts/peers/sum-consumer/main.go, see docs/test-consumer.md), and
# seq-oracle (scripts/peers/seq-oracle/main.go, Gazette's sequencer for differential tests) and
# codec-bench (scripts/peers/codec-bench/main.go, the Go broker's fragment codecs timed for
# bench/codecs.ts), against
# the same Gazette version. Binaries land in $GAZCTL_PEERS_DIR (default ~/.cache/gazctl-peers)
# and are reused when already built (sum-consumer: while its source is unchanged).
set -euo pipefail

GAZETTE_VERSION=v0.103.0
ETCD_VERSION=v3.6.5
VERSITYGW_VERSION=v1.8.0
PEERS_DIR=${GAZCTL_PEERS_DIR:-$HOME/.cache/gazctl-peers}
BIN="$PEERS_DIR/bin"
mkdir -p "$BIN"

if ! command -v go >/dev/null 2>&1; then
  export PATH="$PATH:/usr/local/go/bin"
fi

build_module() { # dir module version packages...
  local dir=$1 mod=$2 ver=$3; shift 3
  mkdir -p "$dir"
  (
    cd "$dir"
    printf 'module peers\n\ngo 1.24\n\nrequire %s %s\n' "$mod" "$ver" > go.mod
    {
      echo '//go:build tools'
      echo 'package peers'
      echo 'import ('
      for p in "$@"; do echo "	_ \"$p\""; done
      echo ')'
    } > tools.go
    GOFLAGS=-mod=mod go mod tidy
    GOFLAGS=-mod=mod go build -o "$BIN/" "$@"
  )
}

if [ ! -x "$BIN/gazette" ] || [ ! -x "$BIN/gazctl" ] || [ "$(cat "$BIN/.gazette-version" 2>/dev/null)" != "$GAZETTE_VERSION" ]; then
  echo "building gazette and gazctl $GAZETTE_VERSION ..." >&2
  build_module "$PEERS_DIR/src-gazette" go.gazette.dev/core "$GAZETTE_VERSION" \
    go.gazette.dev/core/cmd/gazette go.gazette.dev/core/cmd/gazctl
  echo "$GAZETTE_VERSION" > "$BIN/.gazette-version"
fi

# Our own Go programs, each a throwaway module in $PEERS_DIR/src-<name> holding a copy of its
# main.go (`go install pkg@version` is not an option: the programs are ours, not a module's):
#   sum-consumer  the reference consumer application of the tests (docs/test-consumer.md)
#   seq-oracle    runs Gazette's message.Sequencer and JSON framing over inputs of the
#                 differential tests of src/lib/message (docs/messages.md)
#   codec-bench   the Go broker's fragment codecs, timed, for bench/codecs.ts
# The checksum of the source and the Gazette version are kept beside each binary, so a changed
# main.go is rebuilt. After the broker's build the modules are cached: this takes seconds.
build_own() { # name
  local name=$1
  local src
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/peers/$name/main.go"
  local stamp
  stamp="$GAZETTE_VERSION $(sha256sum "$src" | cut -d' ' -f1)"
  if [ ! -x "$BIN/$name" ] || [ "$(cat "$BIN/.$name-source" 2>/dev/null)" != "$stamp" ]; then
    echo "building $name against gazette $GAZETTE_VERSION ..." >&2
    mkdir -p "$PEERS_DIR/src-$name"
    (
      cd "$PEERS_DIR/src-$name"
      printf 'module %s\n\ngo 1.24\n\nrequire go.gazette.dev/core %s\n' "${name//-/}" "$GAZETTE_VERSION" > go.mod
      cp "$src" main.go
      GOFLAGS=-mod=mod go mod tidy
      GOFLAGS=-mod=mod go build -o "$BIN/$name" .
    )
    echo "$stamp" > "$BIN/.$name-source"
  fi
}
build_own sum-consumer
build_own seq-oracle
build_own codec-bench

if [ ! -x "$BIN/etcd" ] || [ "$(cat "$BIN/.etcd-version" 2>/dev/null)" != "$ETCD_VERSION" ]; then
  echo "building etcd $ETCD_VERSION ..." >&2
  build_module "$PEERS_DIR/src-etcd" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3
  mv "$BIN/server" "$BIN/etcd"
  echo "$ETCD_VERSION" > "$BIN/.etcd-version"
fi

if [ ! -x "$BIN/versitygw" ] || [ "$(cat "$BIN/.versitygw-version" 2>/dev/null)" != "$VERSITYGW_VERSION" ]; then
  echo "building versitygw $VERSITYGW_VERSION ..." >&2
  build_module "$PEERS_DIR/src-versitygw" github.com/versity/versitygw "$VERSITYGW_VERSION" \
    github.com/versity/versitygw/cmd/versitygw
  echo "$VERSITYGW_VERSION" > "$BIN/.versitygw-version"
fi

# toxiproxy, a TCP proxy whose links can be cut on demand through its HTTP API: the net-split
# tests (test/integration/net-splits.test.ts, docs/net-splits.md) put one between each broker
# and etcd and in front of each broker's advertised endpoint. Its server is the module's
# cmd/server package, built as toxiproxy-server.
TOXIPROXY_VERSION=v2.5.0
if [ ! -x "$BIN/toxiproxy-server" ] || [ "$(cat "$BIN/.toxiproxy-version" 2>/dev/null)" != "$TOXIPROXY_VERSION" ]; then
  echo "building toxiproxy $TOXIPROXY_VERSION ..." >&2
  build_module "$PEERS_DIR/src-toxiproxy" github.com/Shopify/toxiproxy/v2 "$TOXIPROXY_VERSION" \
    github.com/Shopify/toxiproxy/v2/cmd/server
  mv "$BIN/server" "$BIN/toxiproxy-server"
  echo "$TOXIPROXY_VERSION" > "$BIN/.toxiproxy-version"
fi

# socks5-server: the SOCKS5 proxy of the --socks-server tests (scripts/peers/socks5-server/main.go,
# on github.com/armon/go-socks5, which publishes no tagged release: pinned by pseudo-version).
# Rebuilt when its source changes, like our other Go programs.
GO_SOCKS5_VERSION=v0.0.0-20160902184237-e75332964ef5
GO_XNET_VERSION=v0.63.0 # go-socks5 imports golang.org/x/net/context; pinned rather than the newest
socks_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/peers/socks5-server/main.go"
socks_stamp="$GO_SOCKS5_VERSION $GO_XNET_VERSION $(sha256sum "$socks_src" | cut -d' ' -f1)"
if [ ! -x "$BIN/socks5-server" ] || [ "$(cat "$BIN/.socks5-server-source" 2>/dev/null)" != "$socks_stamp" ]; then
  echo "building socks5-server (go-socks5 $GO_SOCKS5_VERSION) ..." >&2
  mkdir -p "$PEERS_DIR/src-socks5-server"
  (
    cd "$PEERS_DIR/src-socks5-server"
    printf 'module socks5server\n\ngo 1.24\n\nrequire (\n\tgithub.com/armon/go-socks5 %s\n\tgolang.org/x/net %s\n)\n' "$GO_SOCKS5_VERSION" "$GO_XNET_VERSION" > go.mod
    cp "$socks_src" main.go
    GOFLAGS=-mod=mod go mod tidy
    GOFLAGS=-mod=mod go build -o "$BIN/socks5-server" .
  )
  echo "$socks_stamp" > "$BIN/.socks5-server-source"
fi

# The first line of etcd's version, without a pipe: under pipefail, `etcd --version | head -1`
# fails the script (exit 141) whenever head has exited before etcd writes its later lines.
etcd_version=$("$BIN/etcd" --version)
echo "${etcd_version%%$'\n'*}" >&2
echo "$BIN"
