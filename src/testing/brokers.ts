// Broker implementations the local cluster can run: the reference Go `gazette serve` (goBroker)
// and any other implementation registered with `registerBrokerImpl`, chosen with
// `GAZCTL_TEST_BROKER=<name>` (default `go`).

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Status } from '../lib/protocol/gen/broker/protocol.js';
import { peerBinary } from './peers.js';
import { scrubEnv, spawnManaged, type ManagedProcess } from './process.js';

export interface BrokerStartOptions {
  /** Broker id suffix (ProcessSpec.ID.suffix). */
  id: string;
  /** Broker zone (ProcessSpec.ID.zone). */
  zone: string;
  /** Port to serve gRPC + HTTP on, on `host`. */
  port: number;
  /**
   * Address to listen on and advertise (`--broker.host`; default 127.0.0.1), e.g. an address of
   * a network namespace of its own (`startNetns`).
   */
  host?: string;
  /**
   * Command prefix to run the broker under, e.g. `Netns.wrap` (which must exec the command, so
   * that the broker keeps the pid it is started with). Our broker only.
   */
  wrap?: string[];
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
  /** `https` when the broker serves TLS (its endpoint is then `https://127.0.0.1:<port>`). */
  scheme?: 'http' | 'https';
  /**
   * Endpoint to advertise instead of `http://127.0.0.1:<port>` (`--broker.advertise`, our broker
   * only), e.g. a proxy in front of it: what other brokers and routed clients dial.
   */
  advertise?: string;
}

export interface BrokerProcess {
  readonly id: string;
  /** `http://127.0.0.1:<port>` (`https://` when the broker serves TLS). */
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
/** `serve` and its flags, the same for the Go and the TypeScript broker (drop-ins of each other). */
function serveArgs(o: BrokerStartOptions): string[] {
  return [
    'serve',
    `--broker.port=${o.port}`,
    `--broker.host=${o.host ?? '127.0.0.1'}`,
    `--broker.id=${o.id}`,
    `--broker.zone=${o.zone}`,
    `--broker.file-root=${o.fileRoot}`,
    `--etcd.address=${o.etcdEndpoint}`,
    `--etcd.prefix=${o.etcdPrefix}`,
    `--etcd.lease=${GO_BROKER_LEASE}`,
    '--log.level=info',
    ...(o.advertise ? [`--broker.advertise=${o.advertise}`] : []),
    ...(o.extraArgs ?? []),
  ];
}

/**
 * Both brokers read BROKER_*, ETCD_*, LOG_*, DEBUG_* from the environment: keep a developer's
 * settings out, then apply the caller's.
 */
function serveEnv(o: BrokerStartOptions): NodeJS.ProcessEnv {
  return { ...scrubEnv(process.env, ['BROKER_', 'ETCD_', 'LOG_', 'DEBUG_']), ...(o.env ?? {}) };
}

export const goBroker: BrokerImpl = {
  name: 'go',
  async start(o: BrokerStartOptions): Promise<BrokerProcess> {
    if (o.advertise) throw new Error('the Go broker cannot advertise another endpoint than its own (--broker.advertise is ours)');
    if (o.wrap) throw new Error('the harness runs the Go broker without a command prefix');
    const bin = peerBinary('gazette');
    await mkdir(o.logDir, { recursive: true });
    await mkdir(o.fileRoot, { recursive: true });
    const proc = spawnManaged({
      name: `broker ${o.id}`,
      command: bin,
      args: serveArgs(o),
      logFile: join(o.logDir, `broker-${o.id}.log`),
      env: serveEnv(o),
    });
    return new ChildBroker(o.id, `${o.scheme ?? 'http'}://${o.host ?? '127.0.0.1'}:${o.port}`, proc);
  },
};

/**
 * Extra Node options for our brokers, from `GAZCTL_TEST_BROKER_NODE_ARGS` (split on white space),
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile every broker of a benchmark (Node refuses
 * --cpu-prof in NODE_OPTIONS).
 */
function nodeArgsFromEnv(): string[] {
  return (process.env.GAZCTL_TEST_BROKER_NODE_ARGS ?? '').split(/\s+/).filter((a) => a !== '');
}

/** Our TypeScript broker, `bin/gazette.js serve` (build first: it runs the compiled daemon). */
export const tsBroker: BrokerImpl = {
  name: 'ts',
  async start(o: BrokerStartOptions): Promise<BrokerProcess> {
    // dist/src/testing/brokers.js -> <repo>/bin/gazette.js
    const bin = fileURLToPath(new URL('../../../bin/gazette.js', import.meta.url));
    await mkdir(o.logDir, { recursive: true });
    await mkdir(o.fileRoot, { recursive: true });
    const cmd = [...(o.wrap ?? []), process.execPath, ...nodeArgsFromEnv(), bin, ...serveArgs(o)];
    const proc = spawnManaged({
      name: `ts broker ${o.id}`,
      command: cmd[0]!,
      args: cmd.slice(1),
      logFile: join(o.logDir, `broker-${o.id}.log`),
      env: serveEnv(o),
    });
    return new ChildBroker(o.id, `${o.scheme ?? 'http'}://${o.host ?? '127.0.0.1'}:${o.port}`, proc);
  },
};

const impls = new Map<string, BrokerImpl>([
  [goBroker.name, goBroker],
  [tsBroker.name, tsBroker],
]);

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
