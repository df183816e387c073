// A consumer process (`<app> serve`): wire its parts together and run until signalled. The
// counterpart of upstream's runconsumer serve command.
//
// Start-up: bind the service port (gRPC consumer.Shard, /debug/ready, /metrics), load and follow
// the application's etcd keyspace, register this member (a ConsumerSpec at
// `<prefix>/members/<zone>#<suffix>` under a lease), run the shared allocation loop with the
// consumer's rules, and hold a Replica (replica.ts) for every assignment of this member, updated
// on every change of the view and closed when the assignment goes. etcd being unreachable is
// waited out: the process never exits because of etcd. SIGTERM (or SIGINT) marks the member
// exiting (shard limit 0), waits until the allocator has moved every shard away, closes the
// replicas, releases the lease and exits 0; a second signal exits at once.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ConnectionPool } from '../../lib/client/dial.js';
import { JournalClient } from '../../lib/client/journal-client.js';
import { MEMBERS_PREFIX } from '../../lib/keyspace/keys.js';
import { ReplicaStatus, type ConsumerSpec } from '../../lib/protocol/gen/consumer/protocol.js';
import { AllocationLoop } from '../allocator/loop.js';
import { startServer } from '../broker/server.js';
import { Logger } from '../log.js';
import { gracefulShutdown, retrying } from '../lifecycle.js';
import { Membership } from '../membership.js';
import { consumerAllocationRules, encodeConsumerSpec, type ConsumerMember, type ShardItem, type ShardStatusValue } from './allocation.js';
import type { Application } from './app.js';
import type { ConsumerConfig } from './flags.js';
import { ConsumerMetrics } from './metrics.js';
import { Replica, type ReplicaHost } from './replica.js';
import { shardService } from './service.js';
import { ShardView, type ShardEntry } from './view.js';
import { buildEtcdTls, buildSecurity, openDaemonKeyspace, serviceEndpoint, type Security } from '../security.js';

/** Upstream's ReplicaStatus.Reduce: the higher code wins, errors accumulate. */
export function reduceStatus(next: ReplicaStatus, existing: ReplicaStatus): ReplicaStatus {
  return { code: Math.max(next.code, existing.code), errors: [...next.errors, ...existing.errors] };
}

export interface ServeOptions {
  /** Called once the process serves (tests). */
  onServing?: (info: { endpoint: string; memberKey: string }) => void;
  /** Install SIGTERM/SIGINT handlers (default true). */
  signals?: boolean;
  /** Resolves to ask for a graceful exit, as SIGTERM does. */
  stop?: Promise<void>;
  /**
   * How often a primary stores its recorded hints (`<hint_prefix>/<id>.primary`). Default 5
   * minutes, upstream's constant; runConsumer takes it from GAZETTE_HINTS_INTERVAL.
   */
  hintsIntervalMs?: number;
  /** TLS and authorization (run.ts builds them from the options; default: from `config`). */
  security?: Security;
}

export async function serveConsumer(config: ConsumerConfig & { etcdPrefix: string }, app: Application, opts: ServeOptions = {}): Promise<number> {
  const log = new Logger(config.logLevel, config.logFormat);
  const stop = new AbortController();
  const id = { zone: config.zone, suffix: config.id || `${hostname().split('.')[0]}-${randomBytes(4).toString('hex')}` };
  const host = config.host || hostname();
  const prefix = config.etcdPrefix;

  const security = opts.security ?? consumerSecurity(config);
  const ks = openDaemonKeyspace(config, security.etcd, log);
  const view = new ShardView(ks, prefix, log, config.watchDelayMs);
  const metrics = new ConsumerMetrics();
  const opt = (v: string | undefined) => (v ? v : undefined);
  const journals = new JournalClient(
    {
      address: config.brokerAddress,
      zone: config.zone,
      cacheSize: config.brokerCacheSize,
      cacheTTLms: config.brokerCacheTtlMs,
      // The consumer's client options towards brokers (--broker.*), as gazctl's.
      certFile: opt(config.brokerCertFile),
      certKeyFile: opt(config.brokerCertKeyFile),
      trustedCAFile: opt(config.brokerTrustedCAFile),
      authKeys: opt(config.brokerAuthKeys),
      authToken: opt(config.brokerAuthToken),
    },
    config.fileRoot ? { fileRoot: config.fileRoot } : {},
  );
  const replicas = new Map<string, Replica>();
  let member!: Membership;
  let started = false;
  let peers!: ConnectionPool;

  const server = await startServer({
    host: '',
    port: config.port,
    shard: shardService({
      view,
      ks,
      verifier: security.verifier,
      self: id,
      log,
      get peers() {
        return peers;
      },
      // A request may come in after the view changed but before the listeners ran (they run
      // once per watch delay): bring the replicas in line first, as upstream's resolver holds
      // its shards in step with its key space.
      replica: (shard) => {
        if (!replicas.has(shard)) syncReplicas();
        return replicas.get(shard);
      },
    }),
    metrics,
    ready: () => started && member.registered && !member.exiting,
    maxRecvBytes: config.maxGrpcRecvSize || 4 << 20,
    log,
    ...(security.serverTls ? { tls: security.serverTls } : {}),
  });
  const endpoint = serviceEndpoint(host, server.port, security.serverTls !== undefined);
  // Calls to other consumers (a proxied Stat) use the peer TLS options, which upstream applies
  // only when the service port itself is TLS, and are signed with the first auth key.
  const peerTls = security.serverTls !== undefined;
  peers = new ConnectionPool({
    address: endpoint,
    ...(peerTls && config.peerCertFile ? { certFile: config.peerCertFile, certKeyFile: config.peerCertKeyFile } : {}),
    ...(peerTls && config.peerCAFile ? { trustedCAFile: config.peerCAFile } : {}),
    ...(security.verifier ? { authKeys: config.authKeys } : {}),
  });
  member = new Membership(ks, prefix, id, endpoint, config.limit, config.etcdLeaseSeconds, log, encodeConsumerSpec);
  const memberSpec: ConsumerSpec = { process_spec: { id, endpoint }, shard_limit: config.limit, exiting: false };
  const localKey = (zone: string, suffix: string) => zone === id.zone && suffix === id.suffix;

  const setStatus = async (shard: string, status: ReplicaStatus, own: { key: string; createRevision: bigint }): Promise<void> => {
    for (;;) {
      const entry = view.shards().get(shard);
      const a = entry?.assignments.find((x) => x.key === own.key && x.kv.createRevision === own.createRevision);
      // The replica's assignment is not in the view: the allocator moved it (the replica hears of
      // its new assignment at the next listener run) or removed it (the replica is about to be
      // closed). Upstream retries against the shard's current assignment until written or
      // cancelled: the caller retries with backoff, reading the replica's assignment again.
      if (!a) throw new Error(`assignment ${own.key} (created at revision ${own.createRevision}) is not current`);
      const next = reduceStatus(status, a.status);
      const r = await ks.txn({
        compare: [{ key: a.key, target: 'modRevision', value: a.kv.modRevision }],
        success: [{ put: a.key, value: Buffer.from(ReplicaStatus.encode(next).finish()), ignoreLease: true }],
      });
      if (r.succeeded) {
        metrics.statusWrites.inc({ outcome: 'written' });
        await view.waitFor(r.revision, stop.signal);
        return;
      }
      // The assignment changed under us (moved slot, or a status of our own not yet observed):
      // wait until the view has caught up with etcd, and try again with what it holds then.
      metrics.statusWrites.inc({ outcome: 'raced' });
      await view.waitFor(r.revision, stop.signal);
    }
  };

  const replicaHost: ReplicaHost = {
    ks,
    journals,
    app,
    log,
    memberSpec,
    etcdPrefix: prefix,
    setStatus,
    appendMetrics: metrics.appends,
    transactionCompleted: (shard, messages, bytes) => metrics.transactionCompleted(shard, messages, bytes),
  };

  // Bring the replicas in line with this member's assignments.
  const syncReplicas = () => {
    if (stop.signal.aborted) return;
    const shards = view.shards();
    const held = new Set<string>();
    for (const s of shards.values()) {
      const a = s.assignments.find((x) => localKey(x.zone, x.suffix));
      if (!a) continue;
      held.add(s.id);
      let r = replicas.get(s.id);
      const u = updateOf(s, a);
      if (r?.supersededBy(u)) {
        // The assignment the replica served was deleted and this member given a new one (a
        // primary unassigned, then re-added as a standby): start over, as upstream does.
        replicas.delete(s.id);
        log.info('assignment replaced; restarting the replica', { shard: s.id, slot: a.slot });
        const old = r;
        void old.close().catch((e: unknown) => log.warn('closing replica failed', { shard: s.id, err: (e as Error).message }));
        r = undefined;
      }
      if (!r) {
        r = new Replica(replicaHost, s.id, opts.hintsIntervalMs !== undefined ? { hintsIntervalMs: opts.hintsIntervalMs } : {});
        replicas.set(s.id, r);
        log.info('assigned shard', { shard: s.id, slot: a.slot });
      }
      r.update(u);
    }
    for (const [shard, r] of replicas) {
      if (held.has(shard)) continue;
      replicas.delete(shard);
      log.info('shard unassigned; closing its replica', { shard });
      void r.close().catch((e: unknown) => log.warn('closing replica failed', { shard, err: (e as Error).message }));
    }
  };
  metrics.observeReplicas(() => {
    const out = new Map<number, number>();
    for (const r of replicas.values()) out.set(r.status().code, (out.get(r.status().code) ?? 0) + 1);
    return out;
  });

  const shutdown = gracefulShutdown(log, 'shards', () => drain());
  const onSignal = (sig: string) => shutdown.signal(sig);
  const onTerm = () => onSignal('SIGTERM');
  const onInt = () => onSignal('SIGINT');
  if (opts.signals ?? true) {
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
  }
  void opts.stop?.then(() => onSignal('stop'));

  let alloc: AllocationLoop<ShardItem, ConsumerMember, ShardStatusValue> | undefined;
  const drain = async () => {
    if (!started) return;
    await retrying(log, 'marking member exiting', () => member.setExiting(), stop.signal);
    while (!alloc!.mayExit()) await new Promise((r) => setTimeout(r, 100));
  };

  void (async () => {
    await retrying(log, 'loading the etcd keyspace', () => view.start(), stop.signal);
    await retrying(log, 'registering member', () => member.start(), stop.signal);
    view.onChange(syncReplicas);
    syncReplicas();
    alloc = new AllocationLoop(view, ks, member, consumerAllocationRules(config.maxHotStandbys), log, () => metrics.allocationRounds.inc());
    alloc.start();
    member.onRegistration(() => alloc?.kick());
    started = true;
    log.info('consumer serving', { id: `${id.zone}#${id.suffix}`, endpoint, prefix });
    opts.onServing?.({ endpoint, memberKey: prefix + MEMBERS_PREFIX + id.zone + '#' + id.suffix });
  })().catch((e: unknown) => {
    log.error('start-up failed', { err: (e as Error).message });
    shutdown.exit(1);
  });

  const code = await shutdown.exited;
  stop.abort();
  alloc?.stop();
  const closing = [...replicas.values()].map((r) => r.close().catch(() => undefined));
  replicas.clear();
  await Promise.all(closing);
  await member?.stop().catch(() => undefined);
  await server.close().catch(() => undefined);
  peers.close();
  journals.close();
  await view.stop().catch(() => undefined);
  ks.close();
  process.off('SIGTERM', onTerm);
  process.off('SIGINT', onInt);
  log.info('goodbye');
  return code;
}

/** The consumer's TLS and authorization settings (a UsageError naming the option when a file is bad). */
export function consumerSecurity(config: ConsumerConfig): Security {
  const security = buildSecurity(
    'consumer',
    { certFile: config.serverCertFile ?? '', keyFile: config.serverCertKeyFile ?? '', caFile: config.serverCAFile ?? '' },
    { certFile: config.peerCertFile ?? '', keyFile: config.peerCertKeyFile ?? '', caFile: config.peerCAFile ?? '' },
    config.authKeys ?? '',
  );
  const etcd = buildEtcdTls(config.etcdAddress, { certFile: config.etcdCertFile, certKeyFile: config.etcdCertKeyFile, trustedCAFile: config.etcdTrustedCAFile });
  return etcd ? { ...security, etcd } : security;
}

function updateOf(s: ShardEntry, a: ShardEntry['assignments'][number]) {
  return {
    spec: s.spec,
    specRevision: s.kv.modRevision,
    assignmentKey: a.key,
    slot: a.slot,
    assignmentRevision: a.kv.modRevision,
    assignmentCreateRevision: a.kv.createRevision,
    route: s.route,
  };
}
