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

import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Status } from '../lib/protocol/gen/broker/protocol.js';
import { DEFAULT_BROKER_ROOT, memberKey } from '../lib/keyspace/keys.js';
import { etcdHealthy, etcdRevision, getKey, revokeLease, startEtcd, type EtcdProcess, type EtcdServer, type EtcdTlsFiles } from './etcd.js';
import { freePorts } from './ports.js';
import { PollAbort, pollUntil, registerExitCleanup } from './process.js';
import { brokerImplFromEnv, type BrokerImpl, type BrokerProcess, type BrokerStartOptions } from './brokers.js';
import { listJournals, type ClientSecurity } from './assignments.js';

export interface StartClusterOptions {
  /** Number of brokers (default 1). */
  brokers?: number;
  /** Broker implementation (default: `brokerImplFromEnv()`). */
  impl?: BrokerImpl;
  /**
   * One implementation per broker, for a mixed cluster (e.g. `[tsBroker, goBroker, tsBroker]`);
   * its length is the number of brokers, and `brokers`, when given too, must agree. `impl` is
   * then the first entry unless given.
   */
  brokerImpls?: BrokerImpl[];
  /**
   * Start the brokers one at a time, each once the one before has announced itself in etcd, so
   * broker 0 holds the oldest member key: the allocating member on Gazette (the member key of
   * the lowest create revision allocates). Default false: all at once.
   */
  ordered?: boolean;
  /** Which etcd to run (default: `GAZCTL_TEST_ETCD`, else the peers' etcd; see `EtcdServer`). */
  etcd?: EtcdServer;
  /** Zone of every broker (default `local`). */
  zone?: string;
  /** etcd root of the broker keyspace (default `/gazette/cluster`). */
  etcdPrefix?: string;
  /** Keep the temp dir after stop (also `GAZCTL_TEST_KEEP_TEMP=1`). */
  keepTemp?: boolean;
  /** Extra arguments for every broker. */
  brokerArgs?: string[];
  /**
   * Extra environment of every broker, e.g. the credentials of an s3:// store
   * (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`; the store URL's `endpoint`
   * query argument names the server).
   */
  brokerEnv?: Record<string, string>;
  /** How long start-up may take before failing (default 60 s). */
  readyTimeoutMs?: number;
  /**
   * Serve TLS on every broker (`--broker.server-cert-file`, `-key-file`; peers trust `caFile`
   * through `--broker.peer-ca-file`): endpoints are then https://, and the harness's own calls
   * trust `caFile`.
   */
  tls?: { certFile: string; keyFile: string; caFile: string };
  /**
   * Run etcd with client TLS (https://, client certificates required unless `clientCertAuth` is
   * false; see `StartEtcdOptions.tls`); every broker, and consumers started with
   * `startConsumers`, get the `--etcd.*` flags to dial it (`cluster.etcd.clientArgs`).
   */
  etcdTls?: EtcdTlsFiles;
  /** `--broker.auth-keys` of every broker; the harness's own calls are signed with the first key. */
  authKeys?: string;
  /**
   * Other endpoints for broker `i`, asked for just before it first starts, given its direct etcd
   * endpoint and its own listening endpoint: `etcd` becomes its `--etcd.address`, `advertise`
   * the endpoint it advertises (our brokers only). E.g. links of a fault-injecting proxy
   * (`startToxiproxy`), so that a test can cut one broker from etcd or from its peers. The
   * cluster's own checks (`waitReady`, `brokerAddress`) keep using the direct endpoints.
   * `host` is the address it listens on and advertises (default 127.0.0.1, which
   * `direct.broker` names in any case), `wrap` a command prefix to run it under (our brokers only): e.g. a
   * network namespace of its own (`startNetns`), to cut it off at the IP level.
   */
  brokerLinks?: (
    i: number,
    direct: { etcd: string; broker: string },
  ) => Promise<{ etcd?: string; advertise?: string; host?: string; wrap?: string[] }>;
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
  /** Implementation of broker 0 (of every broker unless the cluster is mixed). */
  readonly impl: BrokerImpl;
  /** What the harness's own calls to the brokers use (TLS CA, auth keys), when the cluster has them. */
  readonly clientSecurity?: ClientSecurity;
  /** Implementation of broker `i`. */
  implOf(i: number): BrokerImpl;
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
  clientSecurity?: ClientSecurity;

  constructor(
    readonly etcd: EtcdProcess,
    readonly impl: BrokerImpl,
    private readonly impls: BrokerImpl[],
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

  implOf(i: number): BrokerImpl {
    return this.impls[i] ?? this.impl;
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
    this.brokers[i] = await this.implOf(i).start(o);
    this.running[i] = true;
  }

  memberKey(i: number): string {
    const o = this.startOpts[i];
    if (!o) throw new RangeError(`no broker ${i} (cluster has ${this.startOpts.length})`);
    return memberKey(o.etcdPrefix, { zone: o.zone, suffix: o.id });
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
              const r = await listJournals(b.endpoint, { timeoutMs: 2000, security: this.clientSecurity });
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
  const n = o.brokers ?? o.brokerImpls?.length ?? 1;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`brokers must be >= 1, got ${n}`);
  if (o.brokerImpls && o.brokerImpls.length !== n) {
    throw new RangeError(`brokerImpls has ${o.brokerImpls.length} entries for ${n} brokers`);
  }
  const impl = o.impl ?? o.brokerImpls?.[0] ?? brokerImplFromEnv();
  const impls = o.brokerImpls ?? Array.from({ length: n }, () => impl);
  const zone = o.zone ?? 'local';
  const etcdPrefix = o.etcdPrefix ?? DEFAULT_BROKER_ROOT;
  const keepTemp = o.keepTemp ?? process.env.GAZCTL_TEST_KEEP_TEMP === '1';

  const tempDir = await mkdtemp(join(tmpdir(), 'gazctl-cluster-'));
  const fileRoot = join(tempDir, 'fragments');
  const logDir = join(tempDir, 'logs');
  await mkdir(fileRoot, { recursive: true });
  await mkdir(logDir, { recursive: true });

  const ports = await freePorts(2 + n);
  let etcd: EtcdProcess;
  try {
    etcd = await startEtcd({ dir: join(tempDir, 'etcd'), clientPort: ports[0]!, peerPort: ports[1]!, server: o.etcd, ...(o.etcdTls ? { tls: o.etcdTls } : {}) });
  } catch (e) {
    if (!keepTemp) await rm(tempDir, { recursive: true, force: true });
    throw e;
  }
  const cluster = new LocalCluster(etcd, impl, impls, tempDir, fileRoot, etcdPrefix, zone, keepTemp);
  const secArgs = [
    ...(o.tls ? [`--broker.server-cert-file=${o.tls.certFile}`, `--broker.server-cert-key-file=${o.tls.keyFile}`, `--broker.peer-ca-file=${o.tls.caFile}`] : []),
    ...(o.authKeys ? [`--broker.auth-keys=${o.authKeys}`] : []),
    ...etcd.clientArgs,
  ];
  if (o.tls || o.authKeys) cluster.clientSecurity = { ...(o.tls ? { caFile: o.tls.caFile } : {}), ...(o.authKeys ? { authKeys: o.authKeys } : {}) };
  try {
    const launch = async (i: number) => {
      const port = ports[2 + i]!;
      const links = o.brokerLinks ? await o.brokerLinks(i, { etcd: etcd.endpoint, broker: `${o.tls ? 'https' : 'http'}://127.0.0.1:${port}` }) : {};
      const host = links.host;
      await cluster.launch(i, {
        id: `broker-${i}`,
        zone,
        port,
        etcdEndpoint: links.etcd ?? etcd.endpoint,
        etcdPrefix,
        fileRoot,
        logDir,
        extraArgs: [...secArgs, ...(o.brokerArgs ?? [])],
        env: o.brokerEnv,
        ...(o.tls ? { scheme: 'https' as const } : {}),
        advertise: links.advertise,
        ...(host ? { host } : {}),
        ...(links.wrap ? { wrap: links.wrap } : {}),
      });
    };
    if (o.ordered) {
      for (let i = 0; i < n; i++) {
        await launch(i);
        await pollUntil(
          `broker ${i} to announce itself`,
          async () => {
            if (cluster.brokers[i]!.alive?.() === false) throw new PollAbort(`broker ${i} exited`);
            return (await getKey(etcd.endpoint, cluster.memberKey(i))) !== undefined;
          },
          { timeoutMs: o.readyTimeoutMs ?? 60_000, intervalMs: 50, describe: () => cluster.describe() },
        );
      }
    } else {
      await Promise.all(Array.from({ length: n }, (_, i) => launch(i)));
    }
    await cluster.waitReady(o.readyTimeoutMs ?? 60_000);
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}
