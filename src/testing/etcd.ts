// A throw-away single-member etcd on loopback ports, plus tiny helpers over etcd's v3 JSON
// gateway (`POST /v3/kv/...`, keys and values base64-encoded) for readiness checks and for
// tests that inspect or seed the keyspace.

import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { peerBinary } from './peers.js';
import { freePorts } from './ports.js';
import { PollAbort, pollUntil, registerExitCleanup, scrubEnv, spawnManaged, type ManagedProcess } from './process.js';

export interface StartEtcdOptions {
  /** Directory for data, WAL and log; a fresh temp dir (removed on stop) when absent. */
  dir?: string;
  /** Client port; a free one when absent. */
  clientPort?: number;
  /** Peer port; a free one when absent. */
  peerPort?: number;
  /** How long to wait for `/health`. Default 20 s. */
  readyTimeoutMs?: number;
  /** Extra etcd flags. */
  extraArgs?: string[];
}

export interface EtcdProcess {
  /** Client URL, `http://127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly clientPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  readonly process: ManagedProcess;
  /** SIGTERM (then SIGKILL) and wait; removes the dir when it was created by startEtcd. */
  stop(): Promise<void>;
}

export interface KeyValue {
  key: string;
  value: Buffer;
  createRevision: bigint;
  modRevision: bigint;
  version: bigint;
  lease: bigint;
}

/** Start etcd and resolve once `GET /health` reports healthy. */
export async function startEtcd(opts: StartEtcdOptions = {}): Promise<EtcdProcess> {
  const bin = peerBinary('etcd');
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
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'etcd.log');
  const proc = spawnManaged({
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
      '--initial-cluster-state=new',
      '--log-level=warn',
      // Test data is throw-away: skip fsync, which dominates etcd latency on CI disks.
      '--unsafe-no-fsync',
      ...(opts.extraArgs ?? []),
    ],
    logFile,
    // etcd reads ETCD_* variables as flags and refuses duplicates; keep them out.
    env: scrubEnv(process.env, ['ETCD_']),
  });

  const stop = async (): Promise<void> => {
    await proc.stop('SIGTERM', 5000);
    if (ownDir) {
      await rm(dir, { recursive: true, force: true });
      unregister();
    }
  };

  try {
    await pollUntil(
      `etcd at ${endpoint} to become healthy`,
      async () => {
        if (!proc.running) throw new PollAbort('etcd exited');
        return etcdHealthy(endpoint);
      },
      { timeoutMs: opts.readyTimeoutMs ?? 20_000, intervalMs: 50, describe: () => proc.describe() },
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return { endpoint, clientPort, dataDir, logFile, process: proc, stop };
}

/** True when `GET <endpoint>/health` answers `{"health":"true", ...}`. */
export async function etcdHealthy(endpoint: string): Promise<boolean> {
  try {
    const res = await fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return false;
    const body = (await res.json()) as { health?: unknown };
    return body.health === 'true' || body.health === true;
  } catch {
    return false;
  }
}

// ---- v3 JSON gateway helpers ----------------------------------------------------------------

const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64');

/** The first key after every key that starts with `prefix` (etcd's "range_end" for a prefix). */
export function prefixRangeEnd(prefix: string | Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i] = end[i]! + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // all 0xff: range to the end of the keyspace
}

async function gateway<T>(endpoint: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${endpoint}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

interface RawKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  version?: string;
  lease?: string;
}

const big = (s: string | undefined): bigint => (s ? BigInt(s) : 0n);

function decodeKv(kv: RawKv): KeyValue {
  return {
    key: Buffer.from(kv.key ?? '', 'base64').toString('utf8'),
    value: Buffer.from(kv.value ?? '', 'base64'),
    createRevision: big(kv.create_revision),
    modRevision: big(kv.mod_revision),
    version: big(kv.version),
    lease: big(kv.lease),
  };
}

/** All keys starting with `prefix`, in key order. */
export async function rangePrefix(endpoint: string, prefix: string): Promise<KeyValue[]> {
  const r = await gateway<{ kvs?: RawKv[] }>(endpoint, '/v3/kv/range', {
    key: b64(prefix),
    range_end: prefixRangeEnd(prefix).toString('base64'),
  });
  return (r.kvs ?? []).map(decodeKv);
}

/** One key, or undefined when absent. */
export async function getKey(endpoint: string, key: string): Promise<KeyValue | undefined> {
  const r = await gateway<{ kvs?: RawKv[] }>(endpoint, '/v3/kv/range', { key: b64(key) });
  const kv = r.kvs?.[0];
  return kv ? decodeKv(kv) : undefined;
}

/** Current etcd revision. */
export async function etcdRevision(endpoint: string): Promise<bigint> {
  const r = await gateway<{ header?: { revision?: string } }>(endpoint, '/v3/kv/range', {
    key: b64('\0'),
    count_only: true,
  });
  return big(r.header?.revision);
}

/** Put a key; resolves with the revision of the write. */
export async function putKey(endpoint: string, key: string, value: string | Buffer): Promise<bigint> {
  const r = await gateway<{ header?: { revision?: string } }>(endpoint, '/v3/kv/put', {
    key: b64(key),
    value: b64(value),
  });
  return big(r.header?.revision);
}

/** Delete every key starting with `prefix`; resolves with the number deleted. */
export async function deletePrefix(endpoint: string, prefix: string): Promise<number> {
  const r = await gateway<{ deleted?: string }>(endpoint, '/v3/kv/deleterange', {
    key: b64(prefix),
    range_end: prefixRangeEnd(prefix).toString('base64'),
  });
  return Number(r.deleted ?? 0);
}

/**
 * Revoke a lease: every key attached to it is deleted at once, exactly as when it expires.
 * Resolves false when the lease no longer exists.
 */
export async function revokeLease(endpoint: string, lease: bigint): Promise<boolean> {
  const res = await fetch(`${endpoint}/v3/lease/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ID: lease.toString() }),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  if (res.ok) return true;
  if (/lease not found/i.test(text)) return false;
  throw new Error(`etcd /v3/lease/revoke: HTTP ${res.status}: ${text}`);
}
