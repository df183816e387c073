// A local Gazette cluster for integration tests, demos and benchmarks: one etcd plus N brokers
// on ephemeral 127.0.0.1 ports, with a `file://` fragment store rooted in a temp dir.
//
// Usage with node:test:
//
//   import { after, before, test } from 'node:test';
//   import { startCluster, waitForJournalsAssigned, type Cluster } from '../../src/testing/index.js';
//
//   let cluster: Cluster | undefined;
//   before(async () => { cluster = await startCluster({ brokers: 3 }); });
//   after(() => cluster?.stop());
//
//   test('something', async () => {
//     // apply journals (e.g. with runGoGazctl(['journals', 'apply'], { brokerAddress: cluster!.brokerAddress, input }))
//     await waitForJournalsAssigned(cluster!, ['a/b'], 20_000);
//     // ... append / read against cluster!.brokerAddress
//   });
//
// `startCluster` resolves only when the cluster is ready (see `Cluster.waitReady`) and cleans up
// after itself if start-up fails. Every child process is also killed if the test process exits
// or is interrupted, so a crashed test leaves nothing behind.
//
// The broker implementation is a parameter (`BrokerImpl`): `goBroker` runs the reference
// `gazette serve`; other implementations (our TypeScript core) register themselves with
// `registerBrokerImpl` and are chosen with `GAZCTL_TEST_BROKER=<name>` (default `go`), so the
// same suites run against every implementation. Set `GAZCTL_TEST_KEEP_TEMP=1` to keep the temp
// dir (logs, etcd data, fragments) after `stop()`.

import { credentials } from '@grpc/grpc-js';
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  AppendRequest,
  AppendRequest_Suspend,
  JournalClient,
  Route,
  Status,
  type LabelSelector,
  type ListResponse,
  type ListResponse_Journal,
} from '../lib/protocol/gen/broker/protocol.js';
import { etcdHealthy, etcdRevision, getKey, rangePrefix, revokeLease, startEtcd, type EtcdProcess } from './etcd.js';
import { peerBinary } from './peers.js';
import { freePorts } from './ports.js';
import { PollAbort, pollUntil, registerExitCleanup, scrubEnv, spawnManaged, type ManagedProcess } from './process.js';

// ---- broker implementations -----------------------------------------------------------------

export interface BrokerStartOptions {
  /** Broker id suffix (ProcessSpec.ID.suffix). */
  id: string;
  /** Broker zone (ProcessSpec.ID.zone). */
  zone: string;
  /** Port to serve gRPC + HTTP on, on 127.0.0.1. */
  port: number;
  /** etcd client URL, `http://127.0.0.1:<port>`. */
  etcdEndpoint: string;
  /** etcd root of the broker keyspace, e.g. `/gazette/cluster`. */
  etcdPrefix: string;
  /** Directory rooting `file://` fragment stores. */
  fileRoot: string;
  /** Directory for the broker's log file. */
  logDir: string;
  extraArgs?: string[];
  env?: Record<string, string>;
}

export interface BrokerProcess {
  readonly id: string;
  /** `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  /** OS pid when the broker is a child process. */
  readonly pid?: number;
  /** Log file, when there is one. */
  readonly logFile?: string;
  /** False once the broker has exited (optional; assumed alive when absent). */
  alive?(): boolean;
  /** Status and recent log lines, for error messages (optional). */
  describe?(): string;
  /**
   * Stop the broker. `graceful` (default true) asks it to hand off its assignments and release
   * its etcd lease, killing it after `timeoutMs` (default {@link GRACEFUL_STOP_TIMEOUT_MS});
   * `graceful: false` kills it at once, so its member key and assignments linger until its etcd
   * lease expires.
   */
  stop(opts?: { graceful?: boolean; timeoutMs?: number }): Promise<void>;
}

export interface BrokerImpl {
  readonly name: string;
  /** Start one broker. Resolves once the process is launched (readiness is checked separately). */
  start(o: BrokerStartOptions): Promise<BrokerProcess>;
}

/** etcd lease TTL given to Go brokers: short, so a killed broker's assignments expire fast. */
export const GO_BROKER_LEASE = '5s';
/**
 * How long a graceful stop may take before the broker is killed. Note that a Go broker asked to
 * exit (SIGTERM) first drops its journal limit to zero and exits only once the allocator has
 * moved all its assignments away: when the other brokers can't take them (e.g. replication 3 on
 * a 3-broker cluster) it never exits by itself and is killed after this timeout.
 */
export const GRACEFUL_STOP_TIMEOUT_MS = 10_000;

class ChildBroker implements BrokerProcess {
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
  async stop(opts: { graceful?: boolean; timeoutMs?: number } = {}): Promise<void> {
    if (opts.graceful ?? true) await this.proc.stop('SIGTERM', opts.timeoutMs ?? GRACEFUL_STOP_TIMEOUT_MS);
    else await this.proc.stop('SIGKILL');
  }
}

/** The reference Go broker: `gazette serve`. */
export const goBroker: BrokerImpl = {
  name: 'go',
  async start(o: BrokerStartOptions): Promise<BrokerProcess> {
    const bin = peerBinary('gazette');
    await mkdir(o.logDir, { recursive: true });
    await mkdir(o.fileRoot, { recursive: true });
    const proc = spawnManaged({
      name: `broker ${o.id}`,
      command: bin,
      args: [
        'serve',
        `--broker.port=${o.port}`,
        '--broker.host=127.0.0.1',
        `--broker.id=${o.id}`,
        `--broker.zone=${o.zone}`,
        `--broker.file-root=${o.fileRoot}`,
        `--etcd.address=${o.etcdEndpoint}`,
        `--etcd.prefix=${o.etcdPrefix}`,
        `--etcd.lease=${GO_BROKER_LEASE}`,
        '--log.level=info',
        ...(o.extraArgs ?? []),
      ],
      logFile: join(o.logDir, `broker-${o.id}.log`),
      // gazette reads BROKER_*, ETCD_*, LOG_*, DEBUG_* from the environment: keep a developer's
      // settings out, then apply the caller's.
      env: { ...scrubEnv(process.env, ['BROKER_', 'ETCD_', 'LOG_', 'DEBUG_']), ...(o.env ?? {}) },
    });
    return new ChildBroker(o.id, `http://127.0.0.1:${o.port}`, proc);
  },
};

const impls = new Map<string, BrokerImpl>([[goBroker.name, goBroker]]);

/** Make a broker implementation selectable with `GAZCTL_TEST_BROKER=<impl.name>`. */
export function registerBrokerImpl(impl: BrokerImpl): void {
  impls.set(impl.name, impl);
}

/** The implementation named by `GAZCTL_TEST_BROKER` (default `go`). */
export function brokerImplFromEnv(): BrokerImpl {
  const name = process.env.GAZCTL_TEST_BROKER || 'go';
  const impl = impls.get(name);
  if (!impl) {
    throw new Error(
      `GAZCTL_TEST_BROKER=${name}: unknown broker implementation (registered: ${[...impls.keys()].join(', ')})`,
    );
  }
  return impl;
}

// ---- List helper ----------------------------------------------------------------------------

/** `host:port` for grpc-js from `http://host:port`. */
export function grpcTarget(endpoint: string): string {
  const u = new URL(endpoint);
  return u.host;
}

/**
 * One non-watch `protocol.Journal/List` against `endpoint`. Resolves with the status of the first
 * response and every journal of the (possibly multi-message) snapshot.
 */
export function listJournals(
  endpoint: string,
  opts: { selector?: LabelSelector; timeoutMs?: number } = {},
): Promise<{ status: Status; journals: ListResponse_Journal[] }> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.list(
      { selector: opts.selector ?? { include: undefined, exclude: undefined }, watch: false, watch_resume: undefined },
      { deadline: Date.now() + (opts.timeoutMs ?? 5000) },
    );
    let status: Status | undefined;
    const journals: ListResponse_Journal[] = [];
    call.on('data', (r: ListResponse) => {
      if (status === undefined) status = r.status;
      journals.push(...r.journals);
    });
    call.on('error', (err) => {
      client.close();
      reject(err);
    });
    call.on('end', () => {
      client.close();
      resolve({ status: status ?? Status.OK, journals });
    });
  });
}

/**
 * A zero-byte append to `journal` (what a Go primary does itself as its periodic "pulse"): it
 * runs a full round-trip through the replication pipeline, commits no data, never resumes a
 * suspended journal, and on success makes the primary advertise its current route in etcd.
 * Resolves with the response status; rejects on RPC errors.
 */
export function pulseJournal(endpoint: string, journal: string, timeoutMs = 5000): Promise<Status> {
  const client = new JournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const call = client.append({ deadline: Date.now() + timeoutMs }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res.status);
    });
    call.write(
      AppendRequest.fromPartial({ journal, suspend: AppendRequest_Suspend.SUSPEND_NO_RESUME }),
    );
    call.write(AppendRequest.fromPartial({})); // commit intent
    call.end();
  });
}

// ---- the cluster ----------------------------------------------------------------------------

export interface StartClusterOptions {
  /** Number of brokers (default 1). */
  brokers?: number;
  /** Broker implementation (default: `brokerImplFromEnv()`). */
  impl?: BrokerImpl;
  /** Zone of every broker (default `local`). */
  zone?: string;
  /** etcd root of the broker keyspace (default `/gazette/cluster`). */
  etcdPrefix?: string;
  /** Keep the temp dir after stop (also `GAZCTL_TEST_KEEP_TEMP=1`). */
  keepTemp?: boolean;
  /** Extra arguments for every broker. */
  brokerArgs?: string[];
  /** How long start-up may take before failing (default 60 s). */
  readyTimeoutMs?: number;
}

export interface StopBrokerOptions {
  graceful?: boolean;
  /** Graceful stop timeout before the broker is killed. */
  timeoutMs?: number;
  /** Revoke the stopped broker's etcd lease if its member key remains. */
  releaseLease?: boolean;
}

export interface Cluster {
  readonly etcd: EtcdProcess;
  /** Current broker handles by index (a stopped broker keeps its slot). */
  readonly brokers: BrokerProcess[];
  /** Endpoint of the first running broker (broker 0 unless it is stopped). */
  readonly brokerAddress: string;
  /** Directory rooting `file://` stores: `file:///x/` lives at `<fileRoot>/x/`. */
  readonly fileRoot: string;
  readonly tempDir: string;
  readonly etcdPrefix: string;
  readonly zone: string;
  readonly impl: BrokerImpl;
  /** Whether broker `i` is running (not stopped through this cluster). */
  isRunning(i: number): boolean;
  /**
   * Stop broker `i`: graceful by default (see `BrokerProcess.stop`). With `releaseLease`, once the
   * process is gone its etcd lease is revoked if its member key is still there, so its member key
   * and assignments vanish at once, as if the lease had expired; otherwise they linger for up to
   * the lease TTL ({@link GO_BROKER_LEASE} for Go brokers).
   */
  stopBroker(i: number, opts?: StopBrokerOptions): Promise<void>;
  /**
   * Restart broker `i` with the same id and port. By default it is killed (`graceful: false`)
   * and its lease released (`releaseLease: true`), so the new instance can announce itself at
   * once (a Go broker refuses to start while its old member key exists); then, unless
   * `wait: false`, waits until the cluster is ready.
   */
  restartBroker(i: number, opts?: StopBrokerOptions & { wait?: boolean }): Promise<void>;
  /** Member key of broker `i` in etcd: `<prefix>/members/<zone>#<id>`. */
  memberKey(i: number): string;
  /**
   * Resolve once etcd is healthy, every running broker has announced itself under
   * `<prefix>/members/` (an announcement newer than its start), and every running broker answers
   * `Journal/List` with status OK.
   */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Kill the brokers, stop etcd, remove the temp dir. Idempotent. */
  stop(): Promise<void>;
}

class LocalCluster implements Cluster {
  readonly brokers: BrokerProcess[] = [];
  private readonly running: boolean[] = [];
  private readonly startOpts: BrokerStartOptions[] = [];
  /** etcd revision just before each broker was (re)started. */
  private readonly startRevision: bigint[] = [];
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private unregisterCleanup: () => void = () => {};

  constructor(
    readonly etcd: EtcdProcess,
    readonly impl: BrokerImpl,
    readonly tempDir: string,
    readonly fileRoot: string,
    readonly etcdPrefix: string,
    readonly zone: string,
    private readonly keepTemp: boolean,
  ) {
    if (!keepTemp) this.unregisterCleanup = registerExitCleanup(() => rmSync(tempDir, { recursive: true, force: true }));
  }

  get brokerAddress(): string {
    const i = this.running.findIndex((r) => r);
    return this.brokers[i >= 0 ? i : 0]!.endpoint;
  }

  isRunning(i: number): boolean {
    return this.running[i] === true;
  }

  private check(i: number): void {
    if (!Number.isInteger(i) || i < 0 || i >= this.startOpts.length) {
      throw new RangeError(`no broker ${i} (cluster has ${this.startOpts.length})`);
    }
    if (this.stopped) throw new Error('cluster is stopped');
  }

  async launch(i: number, o: BrokerStartOptions): Promise<void> {
    this.startOpts[i] = o;
    this.startRevision[i] = await etcdRevision(this.etcd.endpoint);
    this.brokers[i] = await this.impl.start(o);
    this.running[i] = true;
  }

  memberKey(i: number): string {
    const o = this.startOpts[i];
    if (!o) throw new RangeError(`no broker ${i} (cluster has ${this.startOpts.length})`);
    return `${o.etcdPrefix}/members/${o.zone}#${o.id}`;
  }

  async stopBroker(i: number, opts: StopBrokerOptions = {}): Promise<void> {
    this.check(i);
    if (this.running[i]) {
      this.running[i] = false;
      await this.brokers[i]!.stop({ graceful: opts.graceful ?? true, timeoutMs: opts.timeoutMs });
    }
    if (opts.releaseLease) {
      const kv = await getKey(this.etcd.endpoint, this.memberKey(i));
      if (kv && kv.lease !== 0n) await revokeLease(this.etcd.endpoint, kv.lease);
    }
  }

  async restartBroker(i: number, opts: StopBrokerOptions & { wait?: boolean } = {}): Promise<void> {
    this.check(i);
    await this.stopBroker(i, {
      graceful: opts.graceful ?? false,
      timeoutMs: opts.timeoutMs,
      releaseLease: opts.releaseLease ?? true,
    });
    await this.launch(i, this.startOpts[i]!);
    if (opts.wait ?? true) await this.waitReady();
  }

  describe(): string {
    const parts = [this.etcd.process.describe(10)];
    for (const b of this.brokers) if (b.describe) parts.push(b.describe());
    return parts.join('\n');
  }

  async waitReady(timeoutMs = 30_000): Promise<void> {
    const pending = new Set<string>();
    await pollUntil(
      'the cluster to become ready',
      async () => {
        pending.clear();
        if (!this.etcd.process.running) throw new PollAbort('etcd exited');
        if (!(await etcdHealthy(this.etcd.endpoint))) {
          pending.add('etcd health');
          return false;
        }
        await Promise.all(
          this.brokers.map(async (b, i) => {
            if (!this.running[i]) return;
            if (b.alive && !b.alive()) throw new PollAbort(`broker ${b.id} exited`);
            const kv = await getKey(this.etcd.endpoint, this.memberKey(i));
            if (!kv || kv.modRevision <= this.startRevision[i]!) {
              pending.add(`broker ${b.id} member key`);
              return;
            }
            try {
              const r = await listJournals(b.endpoint, { timeoutMs: 2000 });
              if (r.status !== Status.OK) pending.add(`broker ${b.id} List status ${Status[r.status]}`);
            } catch (e) {
              pending.add(`broker ${b.id} List: ${(e as Error).message}`);
            }
          }),
        );
        return pending.size === 0;
      },
      {
        timeoutMs,
        intervalMs: 100,
        describe: () =>
          (pending.size ? `still waiting for: ${[...pending].join('; ')}\n` : '') +
          this.describe() +
          (this.keepTemp ? '' : '\n(logs are removed with the temp dir; set GAZCTL_TEST_KEEP_TEMP=1 to keep them)'),
      },
    );
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop(): Promise<void> {
    this.stopped = true;
    // Teardown throws everything away, so brokers are simply killed; no hand-off needed.
    await Promise.allSettled(
      this.brokers.map(async (b, i) => {
        this.running[i] = false;
        await b.stop({ graceful: false });
      }),
    );
    await this.etcd.stop();
    if (!this.keepTemp) {
      await rm(this.tempDir, { recursive: true, force: true });
      this.unregisterCleanup();
    }
  }
}

/** Start etcd and `brokers` brokers, and wait until the cluster is ready. */
export async function startCluster(o: StartClusterOptions = {}): Promise<Cluster> {
  const n = o.brokers ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`brokers must be >= 1, got ${n}`);
  const impl = o.impl ?? brokerImplFromEnv();
  const zone = o.zone ?? 'local';
  const etcdPrefix = o.etcdPrefix ?? '/gazette/cluster';
  const keepTemp = o.keepTemp ?? process.env.GAZCTL_TEST_KEEP_TEMP === '1';

  const tempDir = await mkdtemp(join(tmpdir(), 'gazctl-cluster-'));
  const fileRoot = join(tempDir, 'fragments');
  const logDir = join(tempDir, 'logs');
  await mkdir(fileRoot, { recursive: true });
  await mkdir(logDir, { recursive: true });

  const ports = await freePorts(2 + n);
  let etcd: EtcdProcess;
  try {
    etcd = await startEtcd({ dir: join(tempDir, 'etcd'), clientPort: ports[0]!, peerPort: ports[1]! });
  } catch (e) {
    if (!keepTemp) await rm(tempDir, { recursive: true, force: true });
    throw e;
  }
  const cluster = new LocalCluster(etcd, impl, tempDir, fileRoot, etcdPrefix, zone, keepTemp);
  try {
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        cluster.launch(i, {
          id: `broker-${i}`,
          zone,
          port: ports[2 + i]!,
          etcdEndpoint: etcd.endpoint,
          etcdPrefix,
          fileRoot,
          logDir,
          extraArgs: o.brokerArgs,
        }),
      ),
    );
    await cluster.waitReady(o.readyTimeoutMs ?? 60_000);
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}

/**
 * Whether a journal's assignments in etcd are "consistent": every assignment value (the route
 * last advertised by that replica, protobuf `Route`) equals the route derived from the keys
 * (members in key order, primary = the slot-0 assignment). A Go primary rewrites the values only
 * after an append round-trip through the full replication pipeline succeeded, so consistency
 * also means the pipeline works. Returns a description of the problem, or undefined when OK.
 */
export async function journalInconsistency(
  etcdEndpoint: string,
  etcdPrefix: string,
  journal: string,
): Promise<string | undefined> {
  const kvs = await rangePrefix(etcdEndpoint, `${etcdPrefix}/assign/${journal}#`);
  if (kvs.length === 0) return 'no assignments';
  const members: { zone: string; suffix: string }[] = [];
  let primary = -1;
  for (const kv of kvs) {
    const parts = kv.key.slice(`${etcdPrefix}/assign/${journal}#`.length).split('#');
    if (parts.length !== 3) return `unparseable assignment key ${kv.key}`;
    const [zone, suffix, slot] = parts as [string, string, string];
    if (slot === '0') primary = members.length;
    members.push({ zone, suffix });
  }
  for (const kv of kvs) {
    const r = kv.value.length ? Route.decode(kv.value) : undefined;
    const same =
      r !== undefined &&
      r.primary === primary &&
      r.members.length === members.length &&
      r.members.every((m, i) => m.zone === members[i]!.zone && m.suffix === members[i]!.suffix);
    if (!same) {
      const seen = r ? `${r.members.map((m) => m.suffix).join(',')} primary ${r.primary}` : 'empty';
      return `assignment ${kv.key} advertises [${seen}], keys say [${members.map((m) => m.suffix).join(',')}] primary ${primary}`;
    }
  }
  return undefined;
}

/**
 * Poll until each named journal exists and has a route with a primary and at least
 * `spec.replication` members, as listed by every running broker, and its assignments in etcd
 * are consistent (see {@link journalInconsistency}; skip with `consistent: false`, e.g. for a
 * broker implementation that does not maintain assignment values). Resolves with the journals
 * as last listed by the first running broker.
 *
 * A journal that stays inconsistent for a second is pulsed ({@link pulseJournal}) about once a
 * second (disable with `pulse: false`). This matters after a broker restarts on the same port:
 * the Go primary's connection to that peer sits in gRPC reconnect back-off, its own pulse fails,
 * and it would not try again for a minute (its health-check interval); meanwhile one-shot
 * appends fail with Unavailable.
 */
export async function waitForJournalsAssigned(
  cluster: Cluster,
  names: string[],
  timeoutMs = 30_000,
  opts: { consistent?: boolean; pulse?: boolean } = {},
): Promise<Map<string, ListResponse_Journal>> {
  const problems: string[] = [];
  const inconsistentSince = new Map<string, number>();
  const lastPulse = new Map<string, number>();
  return pollUntil(
    `journals ${names.join(', ')} to be assigned`,
    async () => {
      problems.length = 0;
      let first: Map<string, ListResponse_Journal> | undefined;
      for (let i = 0; i < cluster.brokers.length; i++) {
        if (!cluster.isRunning(i)) continue;
        const b = cluster.brokers[i]!;
        const r = await listJournals(b.endpoint, { timeoutMs: 2000 });
        if (r.status !== Status.OK) {
          problems.push(`broker ${b.id}: List status ${Status[r.status]}`);
          continue;
        }
        const byName = new Map(r.journals.map((j) => [j.spec?.name ?? '', j]));
        first ??= byName;
        for (const name of names) {
          const j = byName.get(name);
          const want = j?.spec?.replication ?? 0;
          const members = j?.route?.members.length ?? 0;
          const primary = j?.route?.primary ?? -1;
          if (!j) problems.push(`broker ${b.id}: ${name} not listed`);
          else if (members < want || primary < 0 || primary >= members) {
            problems.push(`broker ${b.id}: ${name} has ${members}/${want} members, primary ${primary}`);
          }
        }
      }
      if (problems.length === 0 && (opts.consistent ?? true)) {
        for (const name of names) {
          const p = await journalInconsistency(cluster.etcd.endpoint, cluster.etcdPrefix, name);
          if (!p) {
            inconsistentSince.delete(name);
            continue;
          }
          problems.push(`${name}: ${p}`);
          const now = Date.now();
          if (!inconsistentSince.has(name)) inconsistentSince.set(name, now);
          if ((opts.pulse ?? true) && now - inconsistentSince.get(name)! >= 1000 && now - (lastPulse.get(name) ?? 0) >= 1000) {
            lastPulse.set(name, now);
            await pulseJournal(cluster.brokerAddress, name, 2000).catch(() => undefined);
          }
        }
      }
      return problems.length === 0 && first ? first : undefined;
    },
    { timeoutMs, intervalMs: 100, describe: () => problems.slice(0, 10).join('\n') },
  );
}
