// One journal as held by this broker (as primary or replica): its spool, the index of its
// fragments (closed local spools, and persisted fragments listed from the stores), the readers
// waiting for content, and the persisting of closed spools to the journal's first store.
//
// Every replica persists what it closes; fragment names are content-addressed, so the copies of
// several replicas land on one object and a put of an existing one is skipped.

import { gunzipSync, gzipSync } from 'node:zlib';
import { fragmentContentPath } from '../../lib/protocol/fragment.js';
import { CompressionCodec, type Fragment, type JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import { durationToNanos } from '../../lib/protocol/duration.js';
import { openStore, type FragmentStore } from '../../lib/stores/index.js';
import type { Logger } from './log.js';
import type { Pipeline } from './pipeline.js';
import { emptyFragment, Spool } from './spool.js';

export interface IndexedFragment {
  fragment: Fragment;
  /** Content while it is held locally (a closed spool not yet persisted). */
  content?: Buffer;
}

export interface StoreOptions {
  fileRoot: string;
  fileOnly: boolean;
}

/** The codec a spool is written with: gzip when asked for, else uncompressed (see docs). */
export function spoolCodec(spec: JournalSpec): CompressionCodec {
  const c = spec.fragment?.compression_codec ?? CompressionCodec.NONE;
  return c === CompressionCodec.GZIP ? CompressionCodec.GZIP : CompressionCodec.NONE;
}

export class Replica {
  spool: Spool;
  /** The replication pipeline, while this broker is the journal's primary. */
  pipeline: Pipeline | undefined;
  spec: JournalSpec;
  private fragments: IndexedFragment[] = [];
  private waiters = new Set<() => void>();
  /** Serialises appends (and pipeline changes) on this journal. */
  private tail: Promise<void> = Promise.resolve();
  private refreshTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Set once the first store listing is in (or failed). */
  readonly loaded: Promise<void>;

  constructor(
    spec: JournalSpec,
    private readonly stores: StoreOptions,
    private readonly log: Logger,
  ) {
    this.spec = spec;
    this.spool = new Spool(emptyFragment(spec.name, 0n, spoolCodec(spec), this.storeUrl() ?? '', ''));
    this.loaded = this.refresh();
    this.scheduleRefresh();
  }

  get name(): string {
    return this.spec.name;
  }

  /** The first store of the spec (the file root's store under --broker.file-only). */
  storeUrl(): string | undefined {
    const s = this.spec.fragment?.stores ?? [];
    if (this.stores.fileOnly && s.length > 0 && !s[0]!.startsWith('file://')) return 'file:///';
    return s[0];
  }

  private openStore(url: string): FragmentStore {
    return openStore(url, { fileRoot: this.stores.fileRoot || undefined });
  }

  updateSpec(spec: JournalSpec): void {
    this.spec = spec;
  }

  /** Run `fn` with the journal's append lock held. */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Highest offset known: the spool's end or the index's. */
  get writeHead(): bigint {
    return this.spool.fragment.end;
  }

  /** End of the fragment index (persisted and closed fragments, and the spool). */
  get indexEnd(): bigint {
    const last = this.fragments[this.fragments.length - 1];
    const e = last ? last.fragment.end : 0n;
    return e > this.spool.fragment.end ? e : this.spool.fragment.end;
  }

  /** Lowest offset of the index (fragments and spool). */
  get indexBegin(): bigint {
    const first = this.fragments[0];
    return first && first.fragment.begin < this.spool.fragment.begin ? first.fragment.begin : this.spool.fragment.begin;
  }

  /**
   * Whether some content is not yet persisted, or was persisted within `windowSec` (the flush
   * interval, 24 h when unset): a journal "in use", as the suspension rules see it.
   */
  indexDirty(windowSec: bigint): boolean {
    if (this.spool.contentLength > 0n || this.fragments.some((f) => f.content || f.fragment.mod_time === 0n)) return true;
    const now = BigInt(Math.floor(Date.now() / 1000));
    return this.fragments.some((f) => f.fragment.mod_time > now - windowSec);
  }

  /** Whether the spool should roll before the next append. */
  needsRoll(): boolean {
    const f = this.spool.fragment;
    const len = this.spec.fragment?.length ?? 0n;
    if (len > 0n && f.end - f.begin >= len) return true;
    if (f.compression_codec !== spoolCodec(this.spec)) return true;
    if ((this.storeUrl() ?? '') !== f.backing_store) return true;
    if (f.end - f.begin > 0n && this.flushBoundaryPassed(f)) return true;
    return false;
  }

  private spoolOpenedAt = Date.now();
  private flushBoundaryPassed(_f: Fragment): boolean {
    const ns = durationToNanos(this.spec.fragment?.flush_interval);
    if (ns <= 0n) return false;
    const ms = Number(ns / 1_000_000n);
    // Boundaries are multiples of the interval since the Unix epoch (UTC-aligned).
    return Math.floor(Date.now() / ms) > Math.floor(this.spoolOpenedAt / ms);
  }

  /** Close the spool and start an empty one at `at` (≥ its end), with the current spec. */
  roll(at: bigint, like?: Fragment): void {
    const old = this.spool;
    if (old.contentLength > 0n) {
      const entry: IndexedFragment = { fragment: old.fragment, content: old.content() };
      this.add(entry);
      void this.persist(entry);
    }
    const next = like ? { ...like } : emptyFragment(this.name, at, spoolCodec(this.spec), this.storeUrl() ?? '', '');
    this.spool = new Spool(next);
    this.spool.registers = old.registers;
    this.spoolOpenedAt = Date.now();
    this.notify();
  }

  private add(e: IndexedFragment): void {
    // As a cover set: a fragment another one already covers adds nothing.
    const f = e.fragment;
    if (f.begin === f.end) return;
    if (this.fragments.some((x) => x.fragment.begin <= f.begin && x.fragment.end >= f.end)) return;
    this.fragments = this.fragments.filter((x) => !(x.fragment.begin >= e.fragment.begin && x.fragment.end <= e.fragment.end));
    this.fragments.push(e);
    this.fragments.sort((a, b) => (a.fragment.begin < b.fragment.begin ? -1 : a.fragment.begin > b.fragment.begin ? 1 : 0));
  }

  private async persist(e: IndexedFragment): Promise<void> {
    const f = e.fragment;
    const content = e.content;
    if (!f.backing_store || !content) return;
    let delay = 500;
    while (!this.closed) {
      try {
        const store = this.openStore(f.backing_store);
        const path = fragmentContentPath(f);
        if (!(await store.exists(path))) {
          const body = f.compression_codec === CompressionCodec.GZIP ? gzipSync(content) : content;
          await store.put(path, body);
        }
        e.fragment = { ...f, mod_time: BigInt(Math.floor(Date.now() / 1000)) };
        e.content = undefined;
        this.log.debug('persisted fragment', { journal: f.journal, path });
        return;
      } catch (err) {
        this.log.warn('persisting fragment failed; retrying', { journal: f.journal, err: (err as Error).message });
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 10_000);
      }
    }
  }

  private scheduleRefresh(): void {
    const ns = durationToNanos(this.spec.fragment?.refresh_interval);
    const ms = ns > 0n ? Number(ns / 1_000_000n) : 5 * 60_000;
    this.refreshTimer = setTimeout(() => {
      void this.refresh().finally(() => {
        if (!this.closed) this.scheduleRefresh();
      });
    }, ms);
    this.refreshTimer.unref();
  }

  private lastRefresh = 0;
  private refreshing: Promise<void> | undefined;

  /**
   * Refresh the index now unless it was refreshed in the last second: for a reader whose offset
   * falls before the spool with nothing indexed there (a replica that joined late has not yet
   * listed what the others persisted).
   */
  refreshSoon(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    if (Date.now() - this.lastRefresh < 1000) return Promise.resolve();
    this.refreshing = this.refresh().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** List the spec's stores and add what they hold to the index. */
  async refresh(): Promise<void> {
    this.lastRefresh = Date.now();
    const urls = this.spec.fragment?.stores ?? [];
    for (const url of this.stores.fileOnly ? ['file:///'] : urls) {
      try {
        const store = this.openStore(url);
        for await (const l of store.listFragments(this.name)) {
          if (l.kind !== 'fragment') continue;
          const f: Fragment = { ...l.fragment, backing_store: url };
          if (!this.fragments.some((x) => x.fragment.begin === f.begin && x.fragment.end === f.end)) this.add({ fragment: f });
        }
      } catch (e) {
        this.log.warn('listing fragment store failed', { journal: this.name, store: url, err: (e as Error).message });
      }
    }
    this.notify();
  }

  /** Every fragment of the index and the current spool (if non-empty), in offset order. */
  listFragments(): IndexedFragment[] {
    const out = [...this.fragments];
    if (this.spool.contentLength > 0n) out.push({ fragment: this.spool.fragment });
    return out;
  }

  /**
   * The fragment holding `offset`, or the next one after it; undefined when there is none
   * (the offset is at or past the end).
   */
  query(offset: bigint): { entry: IndexedFragment; spool: boolean } | undefined {
    const sf = this.spool.fragment;
    if (offset >= sf.begin && offset < sf.end) return { entry: { fragment: sf }, spool: true };
    for (const e of this.fragments) {
      if (offset >= e.fragment.begin && offset < e.fragment.end) return { entry: e, spool: false };
    }
    const next = this.fragments.find((e) => e.fragment.begin > offset);
    if (next) return { entry: next, spool: false };
    if (sf.begin > offset && sf.end > sf.begin) return { entry: { fragment: sf }, spool: true };
    return undefined;
  }

  /** The uncompressed content of an indexed (closed or persisted) fragment. */
  async content(e: IndexedFragment): Promise<Buffer> {
    if (e.content) return e.content;
    const f = e.fragment;
    const raw = await this.openStore(f.backing_store).get(fragmentContentPath(f));
    return f.compression_codec === CompressionCodec.GZIP || f.compression_codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION ? gunzipSync(raw) : raw;
  }

  async signedUrl(f: Fragment, ttlMs: number): Promise<string> {
    if (!f.backing_store || f.mod_time === 0n) return '';
    return this.openStore(f.backing_store).signGet(fragmentContentPath(f), ttlMs);
  }

  /** Resolve at the next commit or roll (or after `ms`). */
  waitForChange(signal: AbortSignal, ms = 1000): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.waiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.waiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  notify(): void {
    for (const w of [...this.waiters]) w();
  }

  close(): void {
    this.closed = true;
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.notify();
  }
}
