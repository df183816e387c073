// Consumer processes beside a local cluster (see cluster.ts), for tests of the `shards` commands
// against real consumers.
//
// Every consumer implementation runs the same "sum app": each shard reads NDJSON records
// `{"key":"a","value":3}` from its source journals and keeps the total of `value` per `key` in a
// store recorded into its recovery log, so that playing the log back (`gazctl shards recover`)
// yields a `state.json` holding the totals (see {@link parseJsonFileState}). The reference is our
// own small Go program on Gazette's consumer framework, `sum-consumer`
// (scripts/peers/sum-consumer/main.go, built by scripts/install-peers.sh; docs/test-consumer.md).
// Ours is `ts`: bin/gazette-sum.js, the same application on our consumer runtime (docs/consumer.md).
// A script of your own that calls runConsumer(app) runs through nodeConsumerImpl(name, script).
// Other implementations register with `registerConsumerImpl` and are chosen with
// `GAZCTL_TEST_CONSUMER=<name>` (default `go`).
//
// Usage with node:test:
//
//   cluster = await startCluster({ brokers: 3 });
//   group = await startConsumers(cluster, { count: 3 });
//   const layout = sumAppLayout({ shards: 4 });
//   await createSumAppJournals(cluster, layout);
//   await applySumAppShards(group.address, sumAppShardSpecs(layout));
//   await waitForShardsPrimary(group.address, layout.shards.map((s) => s.id));
//   ...
//   after(async () => { await group?.stop(); await cluster?.stop(); });
//
// Consumer logs go to `<cluster temp dir>/logs/consumer-<id>.log`; every consumer is killed when
// the test process exits.

import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JournalClient } from '../lib/client/journal-client.js';
import { ShardClient } from '../lib/client/shard-client.js';
import { nanosToDuration } from '../lib/protocol/duration.js';
import { CompressionCodec, JournalSpec } from '../lib/protocol/gen/broker/protocol.js';
import {
  ReplicaStatus_Code,
  ShardSpec,
  Status as ConsumerStatus,
  type ListResponse_Shard,
} from '../lib/protocol/gen/consumer/protocol.js';
import { label, labelSet } from '../lib/protocol/labels.js';
import { memberKey } from '../lib/keyspace/keys.js';
import type { Cluster } from './cluster.js';
import { etcdRevision, getKey, revokeLease } from './etcd.js';
import { waitForJournalsAssigned } from './assignments.js';
import { peerBinary } from './peers.js';
import { freePorts } from './ports.js';
import { PollAbort, pollUntil, scrubEnv, spawnManaged, type ManagedProcess } from './process.js';

export interface ConsumerStartOptions {
  /** Consumer id (ProcessSpec.ID.suffix). Go refuses ids shorter than 4 characters. */
  id: string;
  /** Consumer zone (ProcessSpec.ID.zone). */
  zone: string;
  /** Port to serve gRPC + HTTP on, on 127.0.0.1. */
  port: number;
  /** etcd client URL, `http://127.0.0.1:<port>`. */
  etcdEndpoint: string;
  /** etcd root of the consumer group's keyspace, e.g. `/gazette/consumers/sum-app`. */
  etcdPrefix: string;
  /** A broker of the cluster, `http://127.0.0.1:<port>`. */
  brokerAddress: string;
  /** Directory for the consumer's log file. */
  logDir: string;
  /** Scratch directory of this consumer (Go plays recovered shard stores into TMPDIR: this). */
  dataDir: string;
  extraArgs?: string[];
  env?: Record<string, string>;
  /** `https` when the consumer serves TLS (its endpoint is then `https://127.0.0.1:<port>`). */
  scheme?: 'http' | 'https';
}

export interface ConsumerProcess {
  readonly id: string;
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  /** OS pid when the consumer is a child process. */
  readonly pid?: number;
  readonly logFile?: string;
  /** False once the consumer has exited (optional; assumed alive when absent). */
  alive?(): boolean;
  /** Status and recent log lines, for error messages (optional). */
  describe?(): string;
  /**
   * Stop the consumer. `graceful` (default true) asks it to hand its shards to the others first
   * and kills it after `timeoutMs` (default {@link CONSUMER_GRACEFUL_STOP_TIMEOUT_MS});
   * `graceful: false` is kill -9: its member key and assignments stay until its etcd lease
   * expires ({@link GO_CONSUMER_LEASE}).
   */
  stop(opts?: { graceful?: boolean; timeoutMs?: number }): Promise<void>;
  /**
   * Exit code once the consumer exited (optional): null when a signal ended it, e.g. the SIGKILL
   * after a graceful stop that did not finish in time; undefined while it runs.
   */
  exitCode?(): number | null | undefined;
}

export interface ConsumerImpl {
  readonly name: string;
  /** Start one consumer. Resolves once the process is launched (readiness is checked separately). */
  start(o: ConsumerStartOptions): Promise<ConsumerProcess>;
}

/** etcd lease TTL given to Go consumers: short, so a killed consumer's shards fail over fast. */
export const GO_CONSUMER_LEASE = '5s';
/**
 * How long a graceful stop may take before the consumer is killed. A Go consumer asked to exit
 * (SIGTERM) marks itself exiting and leaves only once its shards have moved to other consumers;
 * when no other consumer can take them it never leaves by itself.
 */
export const CONSUMER_GRACEFUL_STOP_TIMEOUT_MS = 10_000;

class ChildConsumer implements ConsumerProcess {
  constructor(
    readonly id: string,
    readonly endpoint: string,
    private readonly proc: ManagedProcess,
  ) {}
  get pid(): number {
    return this.proc.pid;
  }
  get logFile(): string {
    return this.proc.logFile;
  }
  alive(): boolean {
    return this.proc.running;
  }
  describe(): string {
    return this.proc.describe();
  }
  private exited: number | null | undefined;
  exitCode(): number | null | undefined {
    return this.exited;
  }
  async stop(opts: { graceful?: boolean; timeoutMs?: number } = {}): Promise<void> {
    const info = (opts.graceful ?? true) ? await this.proc.stop('SIGTERM', opts.timeoutMs ?? CONSUMER_GRACEFUL_STOP_TIMEOUT_MS) : await this.proc.stop('SIGKILL');
    this.exited = info.code;
  }
}

/** `serve` and the flags every consumer implementation takes (those of Go's runconsumer). */
export function consumerServeArgs(o: ConsumerStartOptions): string[] {
  return [
    'serve',
    `--consumer.id=${o.id}`,
    `--consumer.zone=${o.zone}`,
    '--consumer.host=127.0.0.1',
    `--consumer.port=${o.port}`,
    `--broker.address=${o.brokerAddress}`,
    `--etcd.address=${o.etcdEndpoint}`,
    // Always given: Go's default names the application's Go type.
    `--etcd.prefix=${o.etcdPrefix}`,
    `--etcd.lease=${GO_CONSUMER_LEASE}`,
    '--log.level=info',
    ...(o.extraArgs ?? []),
  ];
}

/** A developer's CONSUMER_* / BROKER_* / ETCD_* / LOG_* / DEBUG_* settings stay out. */
function serveEnv(o: ConsumerStartOptions): NodeJS.ProcessEnv {
  return { ...scrubEnv(process.env, ['CONSUMER_', 'BROKER_', 'ETCD_', 'LOG_', 'DEBUG_']), ...(o.env ?? {}) };
}

/** The reference Go sum app: `sum-consumer serve` (scripts/peers/sum-consumer). */
export const goConsumer: ConsumerImpl = {
  name: 'go',
  async start(o: ConsumerStartOptions): Promise<ConsumerProcess> {
    const bin = peerBinary('sum-consumer');
    await mkdir(o.logDir, { recursive: true });
    await mkdir(o.dataDir, { recursive: true });
    const proc = spawnManaged({
      name: `consumer ${o.id}`,
      command: bin,
      args: consumerServeArgs(o),
      logFile: join(o.logDir, `consumer-${o.id}.log`),
      // Shard stores are played into os.MkdirTemp dirs: keep them in the cluster's temp dir, so
      // that a killed consumer's leftovers go with it.
      env: { ...serveEnv(o), TMPDIR: o.dataDir },
      // Runconsumer reads a gazette.ini from its working directory: run it in its own dir.
      cwd: o.dataDir,
    });
    return new ChildConsumer(o.id, `${o.scheme ?? 'http'}://127.0.0.1:${o.port}`, proc);
  },
};

/**
 * A consumer application of ours run by Node: `node <script> serve <flags>`, where the script
 * calls `runConsumer(app)` (gazctl/consumer). Users testing their own applications register one
 * with {@link registerConsumerImpl}; the sum app of this package is {@link tsConsumer}.
 */
export function nodeConsumerImpl(name: string, script: string, nodeArgs: string[] = []): ConsumerImpl {
  return {
    name,
    async start(o: ConsumerStartOptions): Promise<ConsumerProcess> {
      await mkdir(o.logDir, { recursive: true });
      await mkdir(o.dataDir, { recursive: true });
      const proc = spawnManaged({
        name: `consumer ${o.id}`,
        command: process.execPath,
        args: [...nodeArgs, script, ...consumerServeArgs(o)],
        logFile: join(o.logDir, `consumer-${o.id}.log`),
        // Shard stores are played into the OS temp dir: keep them in the cluster's temp dir.
        env: { ...serveEnv(o), TMPDIR: o.dataDir },
        // runConsumer reads a gazette.ini from its working directory, as Go's does.
        cwd: o.dataDir,
      });
      return new ChildConsumer(o.id, `${o.scheme ?? 'http'}://127.0.0.1:${o.port}`, proc);
    },
  };
}

/** Our sum app, `bin/gazette-sum.js serve` (build first: it runs the compiled consumer). */
export const tsConsumer: ConsumerImpl = nodeConsumerImpl('ts', fileURLToPath(new URL('../../../bin/gazette-sum.js', import.meta.url)));

const impls = new Map<string, ConsumerImpl>([
  [goConsumer.name, goConsumer],
  [tsConsumer.name, tsConsumer],
]);

/** Make a consumer implementation selectable with `GAZCTL_TEST_CONSUMER=<impl.name>`. */
export function registerConsumerImpl(impl: ConsumerImpl): void {
  impls.set(impl.name, impl);
}

/** The implementation named by `GAZCTL_TEST_CONSUMER` (default `go`). */
export function consumerImplFromEnv(): ConsumerImpl {
  const name = process.env.GAZCTL_TEST_CONSUMER || 'go';
  const impl = impls.get(name);
  if (!impl) {
    throw new Error(
      `GAZCTL_TEST_CONSUMER=${name}: unknown consumer implementation (registered: ${[...impls.keys()].join(', ')})`,
    );
  }
  return impl;
}

// ---- A group of consumers --------------------------------------------------------------------

/** etcd root of the sum app's consumer group unless told otherwise. */
export const DEFAULT_CONSUMER_PREFIX = '/gazette/consumers/sum-app';

export interface StartConsumersOptions {
  /** Number of consumers (default 1). Their ids are `<idPrefix>-<i>`. */
  count?: number;
  /**
   * Prefix of the consumers' ids (default `consumer`): a second group of the same application
   * needs another, so that its members' ids, data directories and log files are their own.
   */
  idPrefix?: string;
  /** Consumer implementation (default: `consumerImplFromEnv()`). */
  impl?: ConsumerImpl;
  /** etcd root of the group (default {@link DEFAULT_CONSUMER_PREFIX}). */
  etcdPrefix?: string;
  /** Zone of every consumer (default: the cluster's). */
  zone?: string;
  /** Extra arguments and environment of every consumer. */
  extraArgs?: string[];
  env?: Record<string, string>;
  /**
   * `--broker.address` of every consumer, or of consumer `i` (default: the cluster's
   * `brokerAddress`), e.g. a link of a fault-injecting proxy in front of a broker.
   */
  brokerAddress?: string | ((i: number) => string);
  /** How long start-up may take before failing (default 60 s). */
  readyTimeoutMs?: number;
  /**
   * Serve TLS on every consumer (`--consumer.server-cert-file`, `-key-file`; peers trust
   * `caFile` through `--consumer.peer-ca-file`); the harness's own calls trust `caFile`.
   */
  tls?: { certFile: string; keyFile: string; caFile: string };
  /** `--consumer.auth-keys` of every consumer; the harness's own calls are signed with the first key. */
  authKeys?: string;
}

export interface StopConsumerOptions {
  /** Default true; false is kill -9. */
  graceful?: boolean;
  timeoutMs?: number;
  /** Revoke the stopped consumer's etcd lease if its member key remains (its shards move at once). */
  releaseLease?: boolean;
}

export interface ConsumerGroup {
  readonly cluster: Cluster;
  readonly impl: ConsumerImpl;
  /** Current consumer handles by index (a stopped consumer keeps its slot). */
  readonly consumers: ConsumerProcess[];
  /** Endpoint of the first running consumer: the `--consumer.address` of gazctl shards. */
  readonly address: string;
  readonly etcdPrefix: string;
  readonly zone: string;
  isRunning(i: number): boolean;
  /** Member key of consumer `i`: `<prefix>/members/<zone>#<id>`. */
  memberKey(i: number): string;
  /** Index of the consumer with this id (ProcessSpec.ID.suffix), or -1. */
  indexOf(id: string): number;
  /** Stop consumer `i` (graceful by default; see {@link ConsumerProcess.stop}). */
  stopConsumer(i: number, opts?: StopConsumerOptions): Promise<void>;
  /** kill -9 consumer `i`. */
  killConsumer(i: number): Promise<void>;
  /**
   * Start consumer `i` again with the same id and port. A stopped consumer's lease is revoked
   * first when its member key is still there (Go refuses to start while it exists); waits until
   * the group is ready unless `wait: false`.
   */
  restartConsumer(i: number, opts?: { wait?: boolean }): Promise<void>;
  /**
   * Resolve once every running consumer has announced itself under `<prefix>/members/` (a key
   * newer than its start) and answers Shard/List with status OK.
   */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Kill every consumer. Idempotent. (The cluster is the caller's to stop.) */
  stop(): Promise<void>;
}

class LocalConsumerGroup implements ConsumerGroup {
  readonly consumers: ConsumerProcess[] = [];
  private readonly running: boolean[] = [];
  private readonly startOpts: ConsumerStartOptions[] = [];
  private readonly startRevision: bigint[] = [];
  private stopping: Promise<void> | undefined;
  /** TLS CA and auth keys of the harness's own calls, when the consumers have them. */
  clientSecurity?: { trustedCAFile?: string; authKeys?: string };

  constructor(
    readonly cluster: Cluster,
    readonly impl: ConsumerImpl,
    readonly etcdPrefix: string,
    readonly zone: string,
  ) {}

  get address(): string {
    const i = this.running.findIndex((r) => r);
    return this.consumers[i >= 0 ? i : 0]!.endpoint;
  }

  isRunning(i: number): boolean {
    return this.running[i] === true;
  }

  memberKey(i: number): string {
    const o = this.startOpts[i];
    if (!o) throw new RangeError(`no consumer ${i} (group has ${this.startOpts.length})`);
    return memberKey(o.etcdPrefix, { zone: o.zone, suffix: o.id });
  }

  indexOf(id: string): number {
    return this.startOpts.findIndex((o) => o.id === id);
  }

  private check(i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.startOpts.length) {
      throw new RangeError(`no consumer ${i} (group has ${this.startOpts.length})`);
    }
    if (this.stopping) throw new Error('consumer group is stopped');
  }

  async launch(i: number, o: ConsumerStartOptions): Promise<void> {
    this.startOpts[i] = o;
    this.startRevision[i] = await etcdRevision(this.cluster.etcd.endpoint);
    this.consumers[i] = await this.impl.start(o);
    this.running[i] = true;
  }

  async stopConsumer(i: number, opts: StopConsumerOptions = {}): Promise<void> {
    this.check(i);
    if (this.running[i]) {
      this.running[i] = false;
      await this.consumers[i]!.stop({ graceful: opts.graceful ?? true, timeoutMs: opts.timeoutMs });
    }
    if (opts.releaseLease) await this.releaseLease(i);
  }

  killConsumer(i: number): Promise<void> {
    return this.stopConsumer(i, { graceful: false });
  }

  private async releaseLease(i: number): Promise<void> {
    const kv = await getKey(this.cluster.etcd.endpoint, this.memberKey(i));
    if (kv && kv.lease !== 0n) await revokeLease(this.cluster.etcd.endpoint, kv.lease);
  }

  async restartConsumer(i: number, opts: { wait?: boolean } = {}): Promise<void> {
    this.check(i);
    await this.stopConsumer(i, { graceful: false, releaseLease: true });
    await this.launch(i, this.startOpts[i]!);
    if (opts.wait ?? true) await this.waitReady();
  }

  describe(): string {
    return this.consumers.map((c) => c.describe?.() ?? `consumer ${c.id}`).join('\n');
  }

  async waitReady(timeoutMs = 30_000): Promise<void> {
    const pending = new Set<string>();
    await pollUntil(
      'the consumers to become ready',
      async () => {
        pending.clear();
        await Promise.all(
          this.consumers.map(async (c, i) => {
            if (!this.running[i]) return;
            if (c.alive && !c.alive()) throw new PollAbort(`consumer ${c.id} exited`);
            const kv = await getKey(this.cluster.etcd.endpoint, this.memberKey(i));
            if (!kv || kv.modRevision <= this.startRevision[i]!) {
              pending.add(`consumer ${c.id} member key`);
              return;
            }
            const client = new ShardClient({ address: c.endpoint, ...this.clientSecurity });
            try {
              const r = await client.list({ include: undefined, exclude: undefined }, { timeoutMs: 2000, retry: { maxAttempts: 1 } });
              if (r.status !== ConsumerStatus.OK) pending.add(`consumer ${c.id} List status ${ConsumerStatus[r.status]}`);
            } catch (e) {
              pending.add(`consumer ${c.id} List: ${(e as Error).message}`);
            } finally {
              client.close();
            }
          }),
        );
        return pending.size === 0;
      },
      {
        timeoutMs,
        intervalMs: 100,
        describe: () => (pending.size ? `still waiting for: ${[...pending].join('; ')}\n` : '') + this.describe(),
      },
    );
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await Promise.allSettled(
        this.consumers.map(async (c, i) => {
          this.running[i] = false;
          await c.stop({ graceful: false });
        }),
      );
    })();
    return this.stopping;
  }
}

/**
 * Start `count` consumers of one group beside `cluster` (ids `consumer-<i>`, ephemeral ports,
 * logs in the cluster's temp dir) and wait until they are ready. Kills them again if start-up
 * fails.
 */
export async function startConsumers(cluster: Cluster, o: StartConsumersOptions = {}): Promise<ConsumerGroup> {
  const n = o.count ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`count must be >= 1, got ${n}`);
  const group = new LocalConsumerGroup(
    cluster,
    o.impl ?? consumerImplFromEnv(),
    o.etcdPrefix ?? DEFAULT_CONSUMER_PREFIX,
    o.zone ?? cluster.zone,
  );
  const ports = await freePorts(n);
  const secArgs = [
    ...(o.tls ? [`--consumer.server-cert-file=${o.tls.certFile}`, `--consumer.server-cert-key-file=${o.tls.keyFile}`, `--consumer.peer-ca-file=${o.tls.caFile}`] : []),
    ...(o.authKeys ? [`--consumer.auth-keys=${o.authKeys}`] : []),
    // Flags to dial a TLS etcd (none for a plain one).
    ...cluster.etcd.clientArgs,
  ];
  if (o.tls || o.authKeys) group.clientSecurity = { ...(o.tls ? { trustedCAFile: o.tls.caFile } : {}), ...(o.authKeys ? { authKeys: o.authKeys } : {}) };
  try {
    await Promise.all(
      ports.map((port, i) =>
        group.launch(i, {
          id: `${o.idPrefix ?? 'consumer'}-${i}`,
          zone: group.zone,
          port,
          etcdEndpoint: cluster.etcd.endpoint,
          etcdPrefix: group.etcdPrefix,
          brokerAddress: typeof o.brokerAddress === 'function' ? o.brokerAddress(i) : (o.brokerAddress ?? cluster.brokerAddress),
          logDir: join(cluster.tempDir, 'logs'),
          dataDir: join(cluster.tempDir, 'consumers', `${o.idPrefix ?? 'consumer'}-${i}`),
          extraArgs: [...secArgs, ...(o.extraArgs ?? [])],
          env: o.env,
          ...(o.tls ? { scheme: 'https' as const } : {}),
        }),
      ),
    );
    await group.waitReady(o.readyTimeoutMs ?? 60_000);
  } catch (e) {
    await group.stop();
    throw e;
  }
  return group;
}

// ---- The sum app's journals and shards --------------------------------------------------------

export interface SumAppShard {
  /** Shard id (Go refuses ids shorter than 4 characters). */
  id: string;
  /** Its source journals, in sorted order. */
  sources: string[];
  /** Its recovery log: `<recoveryLogPrefix>/<id>`. */
  recoveryLog: string;
}

export interface SumAppLayout {
  /** Name of the app: journal names start with `<name>/`; journals and shards carry `app=<name>`. */
  name: string;
  shards: SumAppShard[];
  recoveryLogPrefix: string;
  /** etcd prefix of the shards' recovery hints. */
  hintPrefix: string;
}

/**
 * Names of a sum app with `shards` shards (default 4), each reading `sourcesPerShard` (default 1)
 * journals of its own: shard `<name>-<nnn>` reads `<name>/input/part-<nnn>[-<k>]` and records
 * into `<name>/recovery/<name>-<nnn>`.
 */
export function sumAppLayout(o: { name?: string; shards?: number; sourcesPerShard?: number } = {}): SumAppLayout {
  const name = o.name ?? 'sums';
  const count = o.shards ?? 4;
  const per = o.sourcesPerShard ?? 1;
  const recoveryLogPrefix = `${name}/recovery`;
  const shards: SumAppShard[] = [];
  for (let i = 0; i < count; i++) {
    const n = String(i).padStart(3, '0');
    const id = `${name}-${n}`;
    const sources = per === 1 ? [`${name}/input/part-${n}`] : Array.from({ length: per }, (_, k) => `${name}/input/part-${n}-${k}`);
    shards.push({ id, sources: sources.sort(), recoveryLog: `${recoveryLogPrefix}/${id}` });
  }
  return { name, shards, recoveryLogPrefix, hintPrefix: `/gazette/hints/${name}` };
}

export interface SumAppJournalOptions {
  /** Replication of every journal (default 1). */
  replication?: number;
  /** Fragment length (default 1 KiB: recovery logs roll into several fragments quickly). */
  fragmentLength?: bigint;
  /** Fragment store (default `file:///`, the cluster's file root). */
  store?: string;
  /** Fragment refresh interval in seconds (default 30). */
  refreshIntervalSec?: number;
}

/** Journal specs of the app: NDJSON sources and recovery logs, small fragments and a store. */
export function sumAppJournalSpecs(layout: SumAppLayout, o: SumAppJournalOptions = {}): JournalSpec[] {
  const fragment = {
    length: o.fragmentLength ?? 1024n,
    compression_codec: CompressionCodec.NONE,
    stores: [o.store ?? 'file:///'],
    refresh_interval: nanosToDuration(BigInt(o.refreshIntervalSec ?? 30) * 1_000_000_000n),
  };
  const spec = (name: string, contentType: string) =>
    JournalSpec.fromPartial({
      name,
      replication: o.replication ?? 1,
      labels: labelSet(label('app', layout.name), label('content-type', contentType)),
      fragment,
    });
  const out: JournalSpec[] = [];
  for (const s of layout.shards) {
    for (const src of s.sources) out.push(spec(src, 'application/x-ndjson'));
    out.push(spec(s.recoveryLog, 'application/x-gazette-recoverylog'));
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Create the app's journals (through our JournalClient) and wait until they are assigned. */
export async function createSumAppJournals(cluster: Cluster, layout: SumAppLayout, o: SumAppJournalOptions = {}): Promise<JournalSpec[]> {
  const specs = sumAppJournalSpecs(layout, o);
  const sec = cluster.clientSecurity;
  const client = new JournalClient({ address: cluster.brokerAddress, ...(sec?.caFile ? { trustedCAFile: sec.caFile } : {}), ...(sec?.authKeys ? { authKeys: sec.authKeys } : {}) });
  try {
    await client.apply(specs.map((upsert) => ({ expect_mod_revision: 0n, upsert, delete: '' })));
  } finally {
    client.close();
  }
  await waitForJournalsAssigned(cluster, specs.map((s) => s.name), 30_000);
  return specs;
}

export interface SumAppShardOptions {
  /** Hot standbys of every shard (default 1). */
  hotStandbys?: number;
  /** Maximum transaction duration in ms (default 1000; Go requires > 0). */
  maxTxnDurationMs?: number;
  /** Backup hints kept per shard (default 1). */
  hintBackups?: number;
}

/** Shard specs of the app. */
export function sumAppShardSpecs(layout: SumAppLayout, o: SumAppShardOptions = {}): ShardSpec[] {
  return layout.shards.map((s) =>
    ShardSpec.fromPartial({
      id: s.id,
      sources: s.sources.map((journal) => ({ journal, min_offset: 0n })),
      recovery_log_prefix: layout.recoveryLogPrefix,
      hint_prefix: layout.hintPrefix,
      hint_backups: o.hintBackups ?? 1,
      max_txn_duration: nanosToDuration(BigInt(o.maxTxnDurationMs ?? 1000) * 1_000_000n),
      hot_standbys: o.hotStandbys ?? 1,
      labels: labelSet(label('app', layout.name)),
    }),
  );
}

/**
 * Create shard specs through our ShardClient's apply (each must not exist yet). Bounded by
 * `timeoutMs` (default 30 s): apply retries an unreachable consumer until then.
 */
export async function applySumAppShards(consumerAddress: string, specs: ShardSpec[], timeoutMs = 30_000): Promise<bigint> {
  const client = new ShardClient({ address: consumerAddress });
  try {
    const res = await client.apply(
      specs.map((upsert) => ({ expect_mod_revision: 0n, upsert, delete: '', primary_hints: undefined })),
      { timeoutMs },
    );
    return res.revision;
  } finally {
    client.close();
  }
}

/** Replica status code of each member of a listed shard's route, by member id (suffix). */
export function shardReplicaCodes(shard: ListResponse_Shard): Map<string, ReplicaStatus_Code> {
  const out = new Map<string, ReplicaStatus_Code>();
  const members = shard.route?.members ?? [];
  members.forEach((m, i) => out.set(m.suffix, shard.status[i]?.code ?? ReplicaStatus_Code.IDLE));
  return out;
}

/** Id (suffix) of a listed shard's primary consumer, if it has one. */
export function shardPrimary(shard: ListResponse_Shard): string | undefined {
  const p = shard.route?.primary ?? -1;
  const m = shard.route?.members[p];
  return m && shard.status[p]?.code === ReplicaStatus_Code.PRIMARY ? m.suffix : undefined;
}

/**
 * Poll Shard/List at `consumerAddress` until each of `ids` has a PRIMARY replica, and with
 * `standbys` also all its hot standbys in STANDBY; `exclude` names consumer ids that must hold
 * none of its replicas (e.g. one just killed). Resolves with the shards as last listed.
 */
export async function waitForShardsPrimary(
  consumerAddress: string,
  ids: string[],
  timeoutMs = 30_000,
  opts: { standbys?: boolean; exclude?: string[] } = {},
): Promise<Map<string, ListResponse_Shard>> {
  const client = new ShardClient({ address: consumerAddress });
  const problems: string[] = [];
  try {
    return await pollUntil(
      `shards ${ids.join(', ')} to have a primary`,
      async () => {
        problems.length = 0;
        const r = await client.list({ include: undefined, exclude: undefined }, { timeoutMs: 2000, retry: { maxAttempts: 1 } });
        const byId = new Map(r.shards.map((s) => [s.spec?.id ?? '', s]));
        for (const id of ids) {
          const s = byId.get(id);
          if (!s) {
            problems.push(`${id}: not listed`);
            continue;
          }
          const codes = shardReplicaCodes(s);
          const desc = [...codes].map(([m, c]) => `${m}=${ReplicaStatus_Code[c] ?? c}`).join(' ') || 'no replicas';
          if (!shardPrimary(s)) problems.push(`${id}: no primary (${desc})`);
          else if (opts.exclude?.some((x) => codes.has(x))) problems.push(`${id}: still assigned to ${opts.exclude.join('/')} (${desc})`);
          else if (opts.standbys) {
            const want = 1 + (s.spec?.hot_standbys ?? 0);
            const standbys = [...codes.values()].filter((c) => c === ReplicaStatus_Code.STANDBY).length;
            if (codes.size < want || standbys < want - 1) problems.push(`${id}: ${standbys}/${want - 1} standbys (${desc})`);
          }
        }
        return problems.length === 0 ? byId : undefined;
      },
      { timeoutMs, intervalMs: 200, describe: () => problems.join('\n') },
    );
  } finally {
    client.close();
  }
}

/** The three JSON documents of a JSON file store's `state.json`. */
export interface JsonFileState {
  /** Read-through offset per source journal. */
  offsets: Record<string, number>;
  /** The application's state: for the sum app, the total of each key. */
  state: unknown;
  /** The consumer checkpoint, as Go's JSON encoding writes it. */
  checkpoint: unknown;
}

/**
 * Parse a `state.json` written by Go's consumer.JSONFileStore: three JSON documents, one per
 * line: the read-through offsets, the application state, the checkpoint.
 */
export function parseJsonFileState(text: string): JsonFileState {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length !== 3) throw new Error(`state.json: expected 3 JSON lines, found ${lines.length}`);
  const [offsets, state, checkpoint] = lines.map((l) => JSON.parse(l) as unknown);
  return { offsets: offsets as Record<string, number>, state, checkpoint };
}

/** Read `<dir>/state.json` (e.g. after `gazctl shards recover --dir <dir>`). */
export async function readJsonFileState(dir: string): Promise<JsonFileState> {
  return parseJsonFileState(await readFile(join(dir, 'state.json'), 'utf8'));
}
