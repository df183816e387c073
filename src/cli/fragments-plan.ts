// Shared machinery of `journals forks` and `journals prune`: list every fragment object of each
// selected journal in every store of its spec, ask the broker for write heads, compare a fork's
// content with the chain's, and delete planned objects in parallel.
//
// Problems are collected, not thrown: a store that cannot be listed, a write head that cannot be
// read. Each is one line for the operator, and a journal with a problem is left out of every plan
// (a partial listing would make a wrong one), so nothing of it is deleted. The commands exit 1
// when any problem was reported.
//
// An object under a journal's prefix whose name is not a fragment name (a README, an operator's
// notes or copy, a near-miss name) is not a problem: stores commonly hold such objects, and a
// broker skips them too. It is ignored: never planned, deleted or counted, listed in
// `ignored`, and warned about once per object (warnIgnored).
//
// Journal names nest (`a/b` and `a/b/c`): the objects of `a/b/c` are under `a/b/` too, and would
// parse as fragments of `a/b` with path postfix `c`. Planned under `a/b`'s retention or chain,
// they could be deleted while `a/b/c` still needs them. So the commands pass the names of every
// journal (allJournalNames) and the listing sets aside each object under a nested journal's
// prefix (`nested`): never planned or deleted, and not warned about (it is a fragment, just
// not this journal's).
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';

import type { JournalClient } from '../lib/client/index.js';
import { canDecode, decodeFragmentStream } from '../lib/codecs/index.js';
import { listJournalFragments } from '../lib/fragment/listing.js';
import type { FragmentObject } from '../lib/fragment/objects.js';
import type { ChainMember, JournalForks } from '../lib/fragment/forks.js';
import { codecFromExtension } from '../lib/protocol/fragment.js';
import { CompressionCodec, JournalSpec_Suspend_Level, type JournalSpec } from '../lib/protocol/gen/broker/protocol.js';
import { FileStore, type FragmentStore } from '../lib/stores/index.js';
import { openCommandStore } from './stores.js';
import { Progress } from './progress.js';
import { mapLimit } from '../lib/concurrency.js';

/** An object under a journal's prefix that is not a fragment, left alone. */
export interface IgnoredObject {
  store: string;
  /** Object path relative to the store root: `<journal>/…`. */
  path: string;
  size: number;
  /** Why its name is not a fragment name. */
  reason: string;
}

export interface ListedJournal {
  journal: string;
  spec: JournalSpec;
  /** Every fragment object of the journal over all its stores. */
  objects: FragmentObject[];
  /** Objects under the journal's prefix that are not fragments: never planned or deleted. */
  ignored: IgnoredObject[];
  /** Objects under the prefix of another journal nested under this one: never planned or deleted. */
  nested: number;
  /** One line each: why this journal's listing is not to be trusted. */
  problems: string[];
}

export interface ListOptions {
  /** The names of every journal (allJournalNames): objects of journals nested under a listed one are set aside. */
  journals?: ReadonlySet<string>;
  fileRoot?: string;
  signal?: AbortSignal;
  /** Journals listed at once (default 8). */
  concurrency?: number;
}

/** Opens each store URL once (per run), remembering a failure to open it. */
export class StoreSet {
  private readonly stores = new Map<string, FragmentStore | Error>();
  /** Stores whose local directory was checked to exist (file://). */
  private readonly checked = new Map<string, Promise<string | undefined>>();

  /** `open` stands in for openStore (tests). */
  constructor(
    private readonly fileRoot: string | undefined,
    private readonly open: (url: string) => FragmentStore = (url) => openCommandStore(url, this.fileRoot),
  ) {}

  get(url: string): FragmentStore | Error {
    let s = this.stores.get(url);
    if (s === undefined) {
      try {
        s = this.open(url);
      } catch (e) {
        s = e as Error;
      }
      this.stores.set(url, s);
    }
    return s;
  }

  /** Releases what the opened stores hold (an S3 client's sockets). */
  close(): void {
    for (const s of this.stores.values()) if (!(s instanceof Error)) (s as { close?: () => void }).close?.();
    this.stores.clear();
  }

  /**
   * A file store whose directory is missing would list as empty: then every fragment of it would
   * look deleted. Report it instead (a wrong --file-root, or an unmounted volume).
   */
  reachable(store: FragmentStore): Promise<string | undefined> {
    let p = this.checked.get(store.url);
    if (p === undefined) {
      p = (async () => {
        if (!(store instanceof FileStore)) return undefined;
        const dir = store.localPath('');
        try {
          if (!(await stat(dir)).isDirectory()) return `store ${store.url}: ${dir} is not a directory (check --file-root)`;
        } catch (e) {
          return `store ${store.url}: directory ${dir} is not reachable: ${(e as Error).message} (check --file-root)`;
        }
        return undefined;
      })();
      this.checked.set(store.url, p);
    }
    return p;
  }
}

/** Lists one journal in every store of its spec. */
export async function listJournal(spec: JournalSpec, stores: StoreSet, signal?: AbortSignal, journals?: ReadonlySet<string>): Promise<ListedJournal> {
  const journal = spec.name;
  const out: ListedJournal = { journal, spec, objects: [], ignored: [], nested: 0, problems: [] };
  const usable: string[] = [];
  for (const url of new Set(spec.fragment?.stores ?? [])) {
    const store = stores.get(url);
    if (store instanceof Error) {
      out.problems.push(`journal ${journal}: ${store.message}`);
      continue;
    }
    const unreachable = await stores.reachable(store);
    if (unreachable !== undefined) out.problems.push(`journal ${journal}: ${unreachable}`);
    else usable.push(url);
  }
  const entries = listJournalFragments(
    { name: journal, fragment: { stores: usable } },
    { openStore: (url) => stores.get(url) as FragmentStore, continueOnError: true, signal, ...(journals ? { journals } : {}) },
  );
  for await (const e of entries) {
    if (e.kind === 'fragment') out.objects.push(e.object);
    else if (e.kind === 'nested') out.nested++;
    else if (e.kind === 'unparseable') out.ignored.push({ store: e.object.store, path: e.object.path, size: e.object.size, reason: e.object.reason });
    else out.problems.push(`journal ${journal}: ${e.failure.error.message}`);
  }
  return out;
}

/**
 * Warns once per ignored object of `listed` (by store and path: with nested journal names, such
 * as `a/b` and `a/b/c`, one object is under the prefix of both).
 */
export function warnIgnored(listed: readonly ListedJournal[], warn: (msg: string, fields: Record<string, unknown>) => void): void {
  const seen = new Set<string>();
  for (const l of listed) {
    for (const o of l.ignored) {
      const key = `${o.store}\u0000${o.path}`;
      if (seen.has(key)) continue;
      seen.add(key);
      warn('ignoring an object that is not a fragment', { journal: l.journal, store: o.store, path: o.path, reason: o.reason });
    }
  }
}

export async function listJournals(specs: readonly JournalSpec[], stores: StoreSet, opts: ListOptions = {}): Promise<ListedJournal[]> {
  return mapLimit(specs, opts.concurrency ?? 8, (s) => listJournal(s, stores, opts.signal, opts.journals));
}

/**
 * The names of every journal of the cluster (an unselective List), which listJournals needs to
 * tell a nested journal's objects from this journal's.
 */
export async function allJournalNames(client: Pick<JournalClient, 'list'>, signal?: AbortSignal): Promise<Set<string>> {
  const res = await client.list({ include: { labels: [] }, exclude: { labels: [] } }, signal ? { signal } : {});
  return new Set(res.journals.map((j) => j.spec!.name));
}

/**
 * The journal's write head as its broker reports it: the end of the broker's fragment index
 * (every fragment it has listed from the stores, and its local spool), returned with a
 * metadata-only Read. A fully suspended journal reports its suspension offset instead.
 */
export async function writeHeadOf(client: Pick<JournalClient, 'read'>, spec: JournalSpec): Promise<bigint> {
  if (spec.suspend?.level === JournalSpec_Suspend_Level.FULL) return spec.suspend.offset;
  const r = client.read({ journal: spec.name, offset: 0n, metadata_only: true, block: false }, { directReads: false });
  for await (const _ of r) {
    // metadata only: the write head is on the reader once its response arrived
  }
  return r.writeHead;
}

// ---- content comparison -------------------------------------------------------------------

function codecOf(path: string): CompressionCodec {
  const name = path.slice(path.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  return codecFromExtension(dot === -1 ? '' : name.slice(dot));
}

/** The decompressed content of one stored object. */
export async function openContent(stores: StoreSet, o: FragmentObject, signal?: AbortSignal): Promise<Readable> {
  const store = stores.get(o.store);
  if (store instanceof Error) throw store;
  const codec = codecOf(o.path);
  if (!canDecode(codec)) throw new Error(`cannot decompress ${CompressionCodec[codec]} objects`);
  const raw = await store.open(o.path, { signal });
  // Offloaded-decompression objects are stored gzipped; the store would decompress them on a GET.
  return decodeFragmentStream(raw, codec, codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION);
}

/** Pulls bytes from a stream of chunks, `max` at a time. */
class Puller {
  private buf: Buffer = Buffer.alloc(0);
  private done = false;
  constructor(private readonly it: AsyncIterator<Buffer>) {}
  /** Up to `max` bytes; empty at the end. */
  async take(max: number): Promise<Buffer> {
    while (this.buf.length === 0 && !this.done) {
      const n = await this.it.next();
      if (n.done) this.done = true;
      else this.buf = n.value;
    }
    const out = this.buf.subarray(0, max);
    this.buf = this.buf.subarray(out.length);
    return out;
  }
  /** Stops the source (its stream is destroyed). */
  async close(): Promise<void> {
    this.done = true;
    await this.it.return?.(undefined);
  }
  async skip(n: bigint): Promise<void> {
    while (n > 0n) {
      const got = await this.take(n > 1n << 20n ? 1 << 20 : Number(n));
      if (got.length === 0) throw new Error('content ends early');
      n -= BigInt(got.length);
    }
  }
}

async function* chunksOf(stream: Readable): AsyncGenerator<Buffer> {
  for await (const c of stream) yield c as Buffer;
}

/** The chain's content over [from, to), fragment after fragment. */
async function* chainContent(stores: StoreSet, members: readonly ChainMember[], from: bigint, to: bigint, signal?: AbortSignal): AsyncGenerator<Buffer> {
  for (const m of members) {
    if (m.end <= from || m.begin >= to) continue;
    const p = new Puller(chunksOf(await openContent(stores, m.copies[0]!, signal)));
    try {
      if (from > m.begin) await p.skip(from - m.begin);
      let left = (to < m.end ? to : m.end) - (from > m.begin ? from : m.begin);
      while (left > 0n) {
        const c = await p.take(left > 1n << 20n ? 1 << 20 : Number(left));
        if (c.length === 0) throw new Error(`chain fragment ${m.copies[0]!.path} ends early`);
        left -= BigInt(c.length);
        yield c;
      }
    } finally {
      await p.close();
    }
  }
}

/** What reading a fork against the chain showed. */
export type Comparison = { kind: 'differs'; at: bigint } | { kind: 'same' } | { kind: 'unread'; why: string };

/**
 * Reads the part of fork `o` that lies inside the chain's range and the chain's content over the
 * same offsets, and finds the first offset where they differ.
 */
export async function compareWithChain(stores: StoreSet, plan: JournalForks, o: FragmentObject, signal?: AbortSignal): Promise<Comparison> {
  const from = o.begin > plan.chain.begin ? o.begin : plan.chain.begin;
  const to = o.end < plan.chain.end ? o.end : plan.chain.end;
  if (from >= to) return o.begin === o.end ? { kind: 'same' } : { kind: 'unread', why: 'no offsets in common with the chain' };
  let fork: Puller | undefined;
  try {
    fork = new Puller(chunksOf(await openContent(stores, o, signal)));
    if (from > o.begin) await fork.skip(from - o.begin);
  } catch (e) {
    await fork?.close().catch(() => undefined);
    return { kind: 'unread', why: (e as Error).message };
  }
  const chain = new Puller(chainContent(stores, plan.members, from, to, signal));
  try {
    return await firstDifference(chain, fork, from, to);
  } catch (e) {
    return { kind: 'unread', why: (e as Error).message };
  } finally {
    await chain.close().catch(() => undefined);
    await fork.close().catch(() => undefined);
  }
}

async function firstDifference(chain: Puller, fork: Puller, from: bigint, to: bigint): Promise<Comparison> {
  let at = from;
  {
    while (at < to) {
      const a = await chain.take(1 << 20);
      if (a.length === 0) return { kind: 'differs', at };
      let off = 0;
      while (off < a.length) {
        const b = await fork.take(a.length - off);
        if (b.length === 0) return { kind: 'differs', at: at + BigInt(off) };
        for (let i = 0; i < b.length; i++) {
          if (a[off + i] !== b[i]) return { kind: 'differs', at: at + BigInt(off + i) };
        }
        off += b.length;
      }
      at += BigInt(a.length);
    }
  }
  return { kind: 'same' };
}

// ---- deletes ------------------------------------------------------------------------------

export interface DeleteResult {
  deleted: number;
  bytes: number;
  /** One line per store where deletes failed. */
  failures: string[];
}

/** Deletes `objects` in parallel (16 at a time), with a progress bar on a terminal. */
export async function deleteObjects(stores: StoreSet, objects: readonly FragmentObject[], label = 'deleted'): Promise<DeleteResult> {
  const progress = new Progress({ label, total: objects.length, totalBytes: objects.reduce((n, o) => n + o.size, 0) });
  const failed = new Map<string, { count: number; first: string; auth: boolean }>();
  let deleted = 0;
  let bytes = 0;
  await mapLimit(objects, 16, async (o) => {
    const store = stores.get(o.store);
    try {
      if (store instanceof Error) throw store;
      await store.remove(o.path);
      deleted++;
      bytes += o.size;
    } catch (e) {
      let f = failed.get(o.store);
      if (f === undefined) {
        const auth = !(store instanceof Error) && store.isAuthError(e);
        failed.set(o.store, (f = { count: 0, first: `${o.path}: ${(e as Error).message}`, auth }));
      }
      f.count++;
    }
    progress.tick(1, o.size);
  });
  progress.finish();
  const failures = [...failed].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([store, f]) =>
    f.auth
      ? `store ${store}: no permission to delete; ${f.count} object(s) left in place (first: ${f.first})`
      : `store ${store}: ${f.count} delete(s) failed; those objects are left in place (first: ${f.first})`,
  );
  return { deleted, bytes, failures };
}


/** JSON text with bigints as exact integers. */
export function jsonWithBigints(value: unknown, indent?: number): string {
  const text = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `\u0000${v.toString()}` : v), indent);
  return text.replace(/"\\u0000(-?\d+)"/g, '$1');
}

/** A protobuf Duration as nanoseconds. */
export function durationNs(d: { seconds: bigint; nanos: number } | undefined): bigint {
  return d === undefined ? 0n : d.seconds * 1_000_000_000n + BigInt(d.nanos);
}
