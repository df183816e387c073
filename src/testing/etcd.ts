// A throw-away single-member etcd on loopback ports, plus tiny helpers over our keyspace client
// (src/lib/keyspace) for readiness checks and for tests that inspect or seed the keyspace.
//
// Two etcd builds can serve: the peers' etcd 3.6 (built by scripts/install-peers.sh; the only
// one the reference Go broker and Go gazctl accept, since their etcd client refuses a 3.4
// cluster) and Debian's `etcd-server` package (3.4, /usr/bin/etcd), which is all our own broker
// and gazctl need (they talk to etcd through `etcd3`), so a demo needs no Go build. Choose with
// `StartEtcdOptions.server` or `GAZCTL_TEST_ETCD=peer|debian|<path>` (default `peer`).
//
// The helpers take an endpoint and use a short-lived client per call, which keeps them free of
// state for tests to manage; a test that makes many calls, watches or holds leases should
// `connect()` once instead (and close the client).

import { accessSync, constants, rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Keyspace, loadEtcdTls, type EtcdTls, type KeyValue } from '../lib/keyspace/index.js';
import { peerBinary } from './peers.js';
import { freePorts } from './ports.js';
import { PollAbort, pollUntil, registerExitCleanup, scrubEnv, spawnManaged, type ManagedProcess } from './process.js';

export { prefixRangeEnd, type KeyValue } from '../lib/keyspace/index.js';

/**
 * Which etcd to run: `peer` (the peers' etcd 3.6), `debian` (the `etcd-server` package's
 * /usr/bin/etcd, 3.4), or an absolute path to an etcd binary (run with the `peer` flags).
 */
export type EtcdServer = 'peer' | 'debian' | (string & {});

/** Where Debian's `etcd-server` package installs etcd. */
export const DEBIAN_ETCD_BINARY = '/usr/bin/etcd';

/** The etcd named by `GAZCTL_TEST_ETCD` (default `peer`). */
export function etcdServerFromEnv(): EtcdServer {
  return process.env.GAZCTL_TEST_ETCD || 'peer';
}

/** Binary and extra flags for an etcd choice. Throws a clear error when it is not installed. */
export function resolveEtcdServer(server: EtcdServer): { bin: string; args: string[] } {
  if (server === 'peer') return { bin: peerBinary('etcd'), args: [] };
  const bin = server === 'debian' ? DEBIAN_ETCD_BINARY : server;
  if (!bin.startsWith('/')) {
    throw new Error(`etcd server '${server}': expected 'peer', 'debian' or an absolute path to an etcd binary`);
  }
  try {
    accessSync(bin, constants.X_OK);
  } catch {
    throw new Error(
      server === 'debian'
        ? `Debian's etcd (${bin}) is not installed; install it with \`apt-get install -y etcd-server\``
        : `etcd binary ${bin} is not an executable file`,
    );
  }
  // etcd 3.4 still defaults to its old capnslog logger, under which --log-level is refused;
  // zap is the only logger of 3.5+, so asking for it explicitly is safe there too.
  return { bin, args: server === 'debian' ? ['--logger=zap'] : [] };
}

export interface StartEtcdOptions {
  /** Which etcd to run (default `etcdServerFromEnv()`, i.e. `peer` unless GAZCTL_TEST_ETCD says otherwise). */
  server?: EtcdServer;
  /** Directory for data, WAL and log; a fresh temp dir (removed on stop) when absent. */
  dir?: string;
  /** Client port; a free one when absent. */
  clientPort?: number;
  /** Peer port; a free one when absent. */
  peerPort?: number;
  /** How long to wait for etcd to become healthy. Default 20 s. */
  readyTimeoutMs?: number;
  /** Extra etcd flags. */
  extraArgs?: string[];
  /**
   * Serve clients TLS (an `https://` endpoint) with this certificate and key, and require client
   * certificates signed by `caFile` (etcd's --client-cert-auth) unless `clientCertAuth` is false.
   * The harness's own clients (connect(), the helpers below) present the same certificate, which
   * must allow client use (`makeTestCerts`' does). Peer traffic stays plain.
   */
  tls?: EtcdTlsFiles;
}

/** etcd's client TLS: server certificate and key, and the CA of client certificates. */
export interface EtcdTlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
  /** Require client certificates (default true). */
  clientCertAuth?: boolean;
}

/**
 * Client TLS of the etcds started here, by endpoint, so the endpoint-taking helpers below reach
 * a TLS etcd without their callers passing anything.
 */
const clientTlsByEndpoint = new Map<string, EtcdTls>();

/** A keyspace client for `endpoint` (with the client TLS of an etcd started here). */
function keyspaceFor(endpoint: string): Keyspace {
  const tls = clientTlsByEndpoint.get(endpoint);
  return new Keyspace({ endpoints: endpoint, ...(tls ? { tls } : {}) });
}

export interface EtcdProcess {
  /** Client URL, `http://127.0.0.1:<port>` (`https://` with the `tls` option). */
  readonly endpoint: string;
  /**
   * The `--etcd.*` TLS flags a broker or consumer (ours or upstream's) needs to dial this etcd
   * with the harness's client certificate; empty without the `tls` option.
   */
  readonly clientArgs: readonly string[];
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  /** The current etcd process (a new one after {@link EtcdProcess.resume}). */
  readonly process: ManagedProcess;
  /**
   * Stop the etcd process but keep its data dir and ports, e.g. to simulate an outage:
   * SIGTERM (then SIGKILL) by default, or SIGKILL at once. No-op when already halted.
   */
  halt(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** Start etcd again on the same ports and data dir and wait until it is healthy. */
  resume(): Promise<void>;
  /** A keyspace client for this etcd; the caller closes it. */
  connect(): Keyspace;
  /** Halt and, when the dir was created by startEtcd, remove it. */
  stop(): Promise<void>;
}

/** Start etcd and resolve once it answers a linearizable read. */
export async function startEtcd(opts: StartEtcdOptions = {}): Promise<EtcdProcess> {
  const { bin, args: serverArgs } = resolveEtcdServer(opts.server ?? etcdServerFromEnv());
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'gazctl-etcd-')));
  const unregister = ownDir ? registerExitCleanup(() => rmSync(dir, { recursive: true, force: true })) : () => {};
  await mkdir(dir, { recursive: true });
  let clientPort = opts.clientPort;
  let peerPort = opts.peerPort;
  if (clientPort === undefined || peerPort === undefined) {
    const [a, b] = await freePorts(2);
    clientPort ??= a!;
    peerPort ??= b!;
  }
  const tls = opts.tls;
  const endpoint = `${tls ? 'https' : 'http'}://127.0.0.1:${clientPort}`;
  const tlsArgs = tls
    ? [`--cert-file=${tls.certFile}`, `--key-file=${tls.keyFile}`, `--trusted-ca-file=${tls.caFile}`, ...(tls.clientCertAuth === false ? [] : ['--client-cert-auth'])]
    : [];
  const clientArgs = tls ? [`--etcd.trusted-ca-file=${tls.caFile}`, `--etcd.cert-file=${tls.certFile}`, `--etcd.cert-key-file=${tls.keyFile}`] : [];
  if (tls) clientTlsByEndpoint.set(endpoint, loadEtcdTls({ certFile: tls.certFile, certKeyFile: tls.keyFile, trustedCAFile: tls.caFile })!);
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'etcd.log');
  const spawn = (): ManagedProcess =>
    spawnManaged({
      name: 'etcd',
      command: bin,
      args: [
        '--name=gazctl-test',
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${endpoint}`,
        `--advertise-client-urls=${endpoint}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=gazctl-test=${peerUrl}`,
        // Ignored by etcd once the data dir holds a member, so a resumed etcd keeps its data.
        '--initial-cluster-state=new',
        '--log-level=warn',
        // Test data is throw-away: skip fsync, which dominates etcd latency on CI disks.
        '--unsafe-no-fsync',
        ...tlsArgs,
        ...serverArgs,
        ...(opts.extraArgs ?? []),
      ],
      logFile,
      // etcd reads ETCD_* variables as flags and refuses duplicates; keep them out.
      env: scrubEnv(process.env, ['ETCD_']),
    });

  let proc = spawn();
  const waitHealthy = (): Promise<true> =>
    pollUntil(
      `etcd at ${endpoint} to become healthy`,
      async () => {
        if (!proc.running) throw new PollAbort('etcd exited');
        return etcdHealthy(endpoint);
      },
      { timeoutMs: opts.readyTimeoutMs ?? 20_000, intervalMs: 50, describe: () => proc.describe() },
    );

  const halt = async (signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> => {
    await proc.stop(signal, 5000);
  };
  const stop = async (): Promise<void> => {
    await halt();
    clientTlsByEndpoint.delete(endpoint);
    if (ownDir) {
      await rm(dir, { recursive: true, force: true });
      unregister();
    }
  };

  try {
    await waitHealthy();
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    endpoint,
    clientArgs,
    clientPort,
    peerPort,
    dataDir,
    logFile,
    get process() {
      return proc;
    },
    halt,
    async resume() {
      if (proc.running) return;
      proc = spawn();
      await waitHealthy();
    },
    connect: () => keyspaceFor(endpoint),
    stop,
  };
}

/** Run `fn` with a keyspace client for `endpoint` that is closed afterwards. */
export async function withKeyspace<T>(endpoint: string, fn: (ks: Keyspace) => Promise<T>): Promise<T> {
  const ks = keyspaceFor(endpoint);
  try {
    return await fn(ks);
  } finally {
    ks.close();
  }
}

/** True when etcd at `endpoint` answers a linearizable read within 2 s. Never throws. */
export async function etcdHealthy(endpoint: string): Promise<boolean> {
  try {
    return await withKeyspace(endpoint, (ks) => ks.healthy(2000));
  } catch {
    return false;
  }
}

/** All keys starting with `prefix`, in key order. */
export async function rangePrefix(endpoint: string, prefix: string): Promise<KeyValue[]> {
  return withKeyspace(endpoint, async (ks) => (await ks.range(prefix)).kvs);
}

/** One key, or undefined when absent. */
export async function getKey(endpoint: string, key: string): Promise<KeyValue | undefined> {
  return withKeyspace(endpoint, (ks) => ks.get(key));
}

/** Current etcd revision. */
export async function etcdRevision(endpoint: string): Promise<bigint> {
  return withKeyspace(endpoint, (ks) => ks.revision());
}

/** Put a key; resolves with the revision of the write. */
export async function putKey(endpoint: string, key: string, value: string | Buffer): Promise<bigint> {
  return withKeyspace(endpoint, (ks) => ks.put(key, value));
}

/** Delete every key starting with `prefix`; resolves with the number deleted. */
export async function deletePrefix(endpoint: string, prefix: string): Promise<number> {
  return withKeyspace(endpoint, (ks) => ks.deletePrefix(prefix));
}

/**
 * Revoke a lease: every key attached to it is deleted at once, exactly as when it expires.
 * Resolves false when the lease no longer exists.
 */
export async function revokeLease(endpoint: string, lease: bigint): Promise<boolean> {
  return withKeyspace(endpoint, (ks) => ks.revokeLease(lease));
}
