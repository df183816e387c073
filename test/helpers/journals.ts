// Shared pieces of the journals acceptance suites (test/integration/journals-*.test.ts): running
// our gazctl against a cluster with assertions, partition-key hashing computed independently of
// src/, deterministic test data, and small file/hash utilities.

import { credentials, Metadata } from '@grpc/grpc-js';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { JournalClient as GenJournalClient, Status, type Fragment } from '../../src/lib/protocol/gen/broker/protocol.js';
import { grpcTarget, type Cluster } from '../../src/testing/index.js';
import { describeResult, runGazctl, type GazctlResult, type RunGazctlOptions } from './cli.js';

// ---- running our gazctl -------------------------------------------------------------------

/** Environment pointing gazctl at broker `i` of `cluster` (default: the first running broker). */
export function brokerEnv(cluster: Cluster, i?: number): Record<string, string> {
  return { BROKER_ADDRESS: i === undefined ? cluster.brokerAddress : cluster.brokers[i]!.endpoint };
}

/** Runs our gazctl against `cluster` (BROKER_ADDRESS set, `opts.env` applied on top). */
export function gz(cluster: Cluster, args: string[], opts: RunGazctlOptions = {}): Promise<GazctlResult> {
  return runGazctl(args, { ...opts, env: { ...brokerEnv(cluster), ...(opts.env ?? {}) } });
}

/** Like {@link gz}, asserting exit code 0. */
export async function gzOk(cluster: Cluster, args: string[], opts: RunGazctlOptions = {}): Promise<GazctlResult> {
  const r = await gz(cluster, args, opts);
  assert.equal(r.code, 0, describeResult(args, r));
  return r;
}

/** Asserts that stderr is exactly one line (ending in a newline) and returns it. */
export function oneStderrLine(args: string[], r: GazctlResult): string {
  const lines = r.stderr.split('\n');
  assert.equal(lines.at(-1), '', `stderr must end with a newline\n${describeResult(args, r)}`);
  assert.equal(lines.length, 2, `expected exactly one line on stderr\n${describeResult(args, r)}`);
  return lines[0]!;
}

export interface JsonJournal {
  spec: Record<string, unknown> & { name: string; replication?: number; suspend?: { level?: string | number; offset?: string } | null };
  mod_revision: string;
  route?: { members: { zone: string; suffix: string }[]; primary: number; endpoints?: string[] };
}

/** `journals list -o json` (proto3 JSON of the List response) → the journals. */
export async function listJson(cluster: Cluster, selector?: string): Promise<JsonJournal[]> {
  const args = ['journals', 'list', '-o', 'json', ...(selector ? ['-l', selector] : [])];
  const r = await gzOk(cluster, args, { timeoutMs: 60_000 });
  const doc = JSON.parse(r.stdout.toString('utf8')) as { journals?: JsonJournal[] };
  return doc.journals ?? [];
}

// ---- partition-key mappings, computed independently of src/ -----------------

/** 32-bit FNV-1a (offset basis 2166136261, prime 16777619), unsigned. */
export function fnv1a32(data: Uint8Array | string): number {
  const b = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let h = 2166136261;
  for (const byte of b) {
    h ^= byte;
    // h * 16777619 mod 2^32, exactly: split the prime into 2^24 + 403.
    h = ((h << 24) >>> 0) + h * 403;
    h = h % 4294967296;
  }
  return h >>> 0;
}

/** modulo: index of the journal (names in name order) = h mod n. */
export function moduloIndex(key: Uint8Array | string, n: number): number {
  return fnv1a32(key) % n;
}

/** rendezvous: argmax over journals of h XOR fnv1a(name) (unsigned); ties → lowest index. */
export function rendezvousIndex(key: Uint8Array | string, names: string[]): number {
  const h = fnv1a32(key);
  let best = -1;
  let bestW = -1;
  for (let i = 0; i < names.length; i++) {
    const w = (h ^ fnv1a32(names[i]!)) >>> 0;
    if (w > bestW) {
      bestW = w;
      best = i;
    }
  }
  return best;
}

// ---- data -----------------------------------------------------------------------------------

/** A small deterministic PRNG, so failures reproduce (see random.ts). */
export { rng as prng } from './random.js';

/** Printable filler (no newline) to slice record payloads from. */
export function filler(rand: () => number, size: number): Buffer {
  const alphabet = Buffer.from('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.;:-_+=/');
  const b = Buffer.allocUnsafe(size);
  for (let i = 0; i < size; i++) b[i] = alphabet[Math.floor(rand() * alphabet.length)]!;
  return b;
}

export function sha256(data: Uint8Array | Uint8Array[]): string {
  const h = createHash('sha256');
  for (const d of Array.isArray(data) ? data : [data]) h.update(d);
  return h.digest('hex');
}

/** Splits newline-terminated records (the newline is kept); asserts nothing dangles. */
export function splitLines(data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (;;) {
    const nl = data.indexOf(10, start);
    if (nl < 0) break;
    out.push(data.subarray(start, nl + 1));
    start = nl + 1;
  }
  assert.equal(start, data.length, `${data.length - start} bytes after the last newline`);
  return out;
}

/** sha256 of the records sorted bytewise: equal iff the multisets of records are equal. */
export function multisetDigest(records: Buffer[]): string {
  return sha256([...records].sort(Buffer.compare));
}

/** A temp dir removed by the returned cleanup (call it from `after`). */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Elapsed-time helper for diagnostics. */
export function stopwatch(): () => string {
  const t0 = Date.now();
  return () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
}

// ---- direct broker queries (generated gRPC client, independent of src/lib/client) -----------

/**
 * One `ListFragments` of `journal` at `endpoint` (that broker's cover set when it is a member of
 * the journal's route; otherwise it proxies). Rejects on RPC errors and non-OK statuses.
 */
export function listFragmentsAt(endpoint: string, journal: string, timeoutMs = 5000): Promise<Fragment[]> {
  const client = new GenJournalClient(grpcTarget(endpoint), credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.listFragments(
      {
        header: undefined,
        journal,
        begin_mod_time: 0n,
        end_mod_time: 0n,
        next_page_token: 0n,
        page_limit: 0,
        signatureTTL: undefined,
        do_not_proxy: false,
      },
      new Metadata(),
      { deadline: Date.now() + timeoutMs },
      (err, res) => {
        client.close();
        if (err) reject(err);
        else if (res.status !== Status.OK) reject(new Error(`ListFragments ${journal} at ${endpoint}: ${Status[res.status]}`));
        else resolve(res.fragments.map((f) => f.spec!));
      },
    );
  });
}

/** Whether `fragments` (in offset order) cover [0, end) without a gap. */
export function coversFromZero(fragments: Fragment[], end: bigint): boolean {
  let at = 0n;
  for (const f of fragments) {
    if (f.begin > at) return false;
    if (f.end > at) at = f.end;
  }
  return at >= end;
}
