// `gazette serve`: wire the broker's parts together and run until signalled.
//
// Start-up: bind the service port, load and follow the etcd keyspace, register this member
// under a lease, then hold journals and (when this member allocates) run allocation rounds.
// etcd being unreachable at start-up is waited out, like a lapse later on: the daemon never
// exits because of etcd. SIGTERM (or SIGINT) marks the member exiting (journal limit 0), waits
// until the allocator has moved every journal away and local content is persisted, releases
// the lease and exits 0; a second signal exits at once.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { openStore, type FragmentStore } from '../../lib/stores/index.js';
import { Persister } from '../fragment/persister.js';
import { AllocationLoop } from '../allocator/loop.js';
import type { RouteLike } from '../allocator/index.js';
import { brokerAllocationRules, encodeBrokerSpec, type BrokerItem, type BrokerMember } from './allocation.js';
import type { Broker } from './broker.js';
import type { ServeConfig } from './flags.js';
import { Logger } from '../log.js';
import { gracefulShutdown, retrying } from '../lifecycle.js';
import { Membership } from '../membership.js';
import { Metrics } from './metrics.js';
import { Peers } from './peers.js';
import { ReplicaSet } from './replicas.js';
import { Resolver } from './resolver.js';
import { startServer } from './server.js';
import { journalService } from './service.js';
import { flushService } from './flush.js';
import { ClusterView } from './view.js';
import { buildSecurity, openDaemonKeyspace, serviceEndpoint, type Security } from '../security.js';

export async function serve(config: ServeConfig, security: Security = buildSecurity('broker', { certFile: '', keyFile: '', caFile: '' }, { certFile: '', keyFile: '', caFile: '' }, '')): Promise<number> {
  const log = new Logger(config.logLevel, config.logFormat);
  const stop = new AbortController();
  const id = { zone: config.zone, suffix: config.id || `${hostname().split('.')[0]}-${randomBytes(4).toString('hex')}` };
  const host = config.host || hostname();

  const ks = openDaemonKeyspace(config, security.etcd, log);
  const view = new ClusterView(ks, config.etcdPrefix, log, config.watchDelayMs);
  const metrics = new Metrics();
  const stores = new Map<string, FragmentStore>();
  const storeOptions = { ...(config.fileRoot ? { fileRoot: config.fileRoot } : {}) };
  const openStoreCached = (url: string): FragmentStore => {
    let s = stores.get(url);
    if (!s) stores.set(url, (s = openStore(url, storeOptions)));
    return s;
  };
  const persister = new Persister({ openStore: openStoreCached });
  const b = { config, ks, view, security, peers: new Peers({ tls: security.peerTls, authorize: security.authorize }), replicas: new ReplicaSet(), metrics, log, openStore: openStoreCached, persister } as Partial<Broker> as Broker;
  let started = false;
  const server = await startServer({
    host: config.host,
    port: config.port,
    journal: journalService(b),
    flush: flushService(b),
    metrics,
    ready: () => started && b.member.registered && !b.member.exiting,
    maxRecvBytes: config.maxGrpcRecvSize || 4 << 20,
    log,
    ...(security.serverTls ? { tls: security.serverTls } : {}),
  });
  // --broker.advertise: the endpoint others dial may be a proxy's in front of our listener.
  const endpoint = config.advertise || serviceEndpoint(host, server.port, security.serverTls !== undefined);
  b.member = new Membership(ks, config.etcdPrefix, id, endpoint, config.limit, config.etcdLeaseSeconds, log, encodeBrokerSpec);
  b.resolver = new Resolver(view, b.member, id);

  const shutdown = gracefulShutdown(log, 'journals', () => drain());
  const onSignal = (sig: string) => shutdown.signal(sig);
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));

  let alloc: AllocationLoop<BrokerItem, BrokerMember, RouteLike | undefined> | undefined;
  const drain = async () => {
    if (!started) return;
    await retrying(log, 'marking member exiting', () => b.member.setExiting(), stop.signal);
    for (;;) {
      const held = alloc!.mayExit();
      const unpersisted = b.replicas.all().some((r) => r.pendingPersists > 0 || r.spool.contentLength > 0n);
      if (held && !unpersisted) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  void (async () => {
    await retrying(log, 'loading the etcd keyspace', () => view.start(), stop.signal);
    await retrying(log, 'registering member', () => b.member.start(), stop.signal);
    b.replicas.attach(b);
    alloc = new AllocationLoop(view, ks, b.member, brokerAllocationRules(config.maxReplication), log, () => metrics.allocationRounds.inc());
    alloc.start();
    b.member.onRegistration(() => alloc?.kick());
    started = true;
    log.info('broker serving', { id: `${id.zone}#${id.suffix}`, endpoint, prefix: config.etcdPrefix });
  })().catch((e: unknown) => {
    log.error('start-up failed', { err: (e as Error).message });
    shutdown.exit(1);
  });

  const code = await shutdown.exited;
  stop.abort();
  alloc?.stop();
  await b.member?.stop().catch(() => undefined);
  b.replicas.close();
  await server.close().catch(() => undefined);
  b.peers.close();
  await view.stop().catch(() => undefined);
  ks.close();
  return code;
}
