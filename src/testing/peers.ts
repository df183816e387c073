// Locating the reference peer binaries (Go `gazette`, Go `gazctl`, `etcd`, our Go `sum-consumer` and `seq-oracle`) that
// `scripts/install-peers.sh` builds from the Go module proxy.

import { accessSync, constants, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export type PeerName = 'gazette' | 'gazctl' | 'etcd' | 'sum-consumer' | 'seq-oracle' | 'toxiproxy-server' | 'socks5-server';

/** Directory holding the peer binaries: `$GAZCTL_PEERS_DIR/bin`, default `~/.cache/gazctl-peers/bin`. */
export function peersBinDir(): string {
  const root = process.env.GAZCTL_PEERS_DIR || join(homedir(), '.cache', 'gazctl-peers');
  return join(root, 'bin');
}

/** Error thrown when a peer binary has not been built yet. */
export class PeerBinaryMissingError extends Error {
  constructor(readonly peer: PeerName, readonly searched: string[]) {
    super(
      `reference peer '${peer}' not found (looked for ${searched.join(', ')}); ` +
        `build the peers with \`scripts/install-peers.sh\` ` +
        `(set GAZCTL_PEERS_DIR to use another location than ~/.cache/gazctl-peers)`,
    );
    this.name = 'PeerBinaryMissingError';
  }
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Absolute path of a peer binary. Throws {@link PeerBinaryMissingError} when it is absent.
 *
 * `go build` of the module `go.etcd.io/etcd/server/v3` names its output `server`; when the
 * install script did not rename it we accept that name too.
 */
export function peerBinary(name: PeerName): string {
  const dir = peersBinDir();
  const candidates = [join(dir, name)];
  if (name === 'etcd') candidates.push(join(dir, 'server'), join(dir, 'v3'));
  for (const c of candidates) {
    if (existsSync(c) && isExecutable(c)) return c;
  }
  throw new PeerBinaryMissingError(name, candidates);
}

/** True when every listed peer binary is available (handy for `skip` conditions). */
export function havePeers(...names: PeerName[]): boolean {
  try {
    for (const n of names.length ? names : (['gazette', 'gazctl', 'etcd'] as PeerName[])) peerBinary(n);
    return true;
  } catch {
    return false;
  }
}
