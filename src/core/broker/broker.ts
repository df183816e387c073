// What the broker's parts share: the etcd view and client, this member, the resolver, peer
// clients, the journals held here, configuration and logging.

import type { FragmentStore } from '../../lib/stores/index.js';
import type { Persister } from '../fragment/persister.js';
import type { Keyspace } from '../../lib/keyspace/index.js';
import type { ServeConfig } from './flags.js';
import type { Logger } from '../log.js';
import type { Membership } from '../membership.js';
import type { Metrics } from './metrics.js';
import type { Peers } from './peers.js';
import type { ReplicaSet } from './replicas.js';
import type { Resolver } from './resolver.js';
import type { ClusterView } from './view.js';
import type { Security } from '../security.js';

export interface Broker {
  config: ServeConfig;
  /** TLS settings and the verifier and signer of authorization tokens. */
  security: Security;
  ks: Keyspace;
  view: ClusterView;
  member: Membership;
  resolver: Resolver;
  peers: Peers;
  replicas: ReplicaSet;
  metrics: Metrics;
  log: Logger;
  /** Stores by URL (cached), rooted at --broker.file-root for file://. */
  openStore(url: string): FragmentStore;
  persister: Persister;
}

/** Journal flags: none set means read-write. */
export function journalWritable(flags: number): boolean {
  return flags === 0 || (flags & (2 | 4)) !== 0;
}

export function journalReadable(flags: number): boolean {
  return flags === 0 || (flags & (1 | 4)) !== 0;
}
