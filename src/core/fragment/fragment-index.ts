// The broker's per-journal fragment index: one CoverSet over local fragments (spool content
// committed on this broker, not yet persisted) and remote ones (objects listed from the
// journal's stores, whoever wrote them). Reads query it for the fragment covering an offset;
// ListFragments pages through it; blocking reads wait on it.
//
// * `spoolCommit(lf)` adds the spool's latest committed fragment (a longer fragment with the same
//   begin replaces the previous one) and wakes blocked queries.
// * `replaceRemote(fragments)` installs a fresh store listing. Local fragments that the listing
//   covers (by one member or a contiguous run) are dropped: they are persisted; the rest stay.
//   The first call resolves `firstRefresh`.
// * `query()` follows upstream's rules: offset -1 means the write head; a gap before a remote
//   fragment is skipped when that fragment is the first one, or was persisted more than six hours
//   ago (its content will not be filled in any more); fragments persisted before
//   `beginModTime` are skipped; with `block`, the query waits for the index to cover the offset.
import { CoverSet, fragmentContentPath } from '../../lib/protocol/fragment.js';
import { Status, type Fragment } from '../../lib/protocol/gen/broker/protocol.js';
import type { FragmentStore } from '../../lib/stores/index.js';
import type { LocalFragment } from './spool.js';

/** Gaps before remote fragments older than this are skipped by reads. */
export const OFFSET_JUMP_AGE_MS = 6 * 3600 * 1000;

export interface QueryRequest {
  /** Offset to read from; -1 for the current write head. */
  offset: bigint;
  /** Wait until the offset is available (else answer OFFSET_NOT_YET_AVAILABLE). */
  block?: boolean;
  /** Skip persisted fragments with an earlier mod time (unix seconds; 0: none). */
  beginModTime?: bigint;
  signal?: AbortSignal;
}

export type QueryResult =
  | {
      status: Status.OK;
      /** The offset to read from: the request's, or where a skipped gap ends. */
      offset: bigint;
      writeHead: bigint;
      fragment: Fragment;
      /** Set when the fragment is local: read its content with readLocal/streamLocal. */
      local?: LocalFragment;
    }
  | { status: Status.OFFSET_NOT_YET_AVAILABLE; offset: bigint; writeHead: bigint };

export interface ListRequest {
  /** Fragments beginning at or after this offset (the previous page's next_page_token). */
  pageToken?: bigint;
  /** At most this many (default 1000). */
  pageLimit?: number;
  /** Unix seconds bounds on mod time; local fragments fail a non-zero `endModTime`. */
  beginModTime?: bigint;
  endModTime?: bigint;
  /** Sign GET URLs for persisted fragments, valid this long. */
  signatureTtlMs?: number;
}

export interface ListedFragment {
  spec: Fragment;
  signedUrl: string;
}

export interface IndexOptions {
  now?: () => Date;
  /** Opens a fragment's backing store (for signed URLs). */
  openStore?: (url: string) => FragmentStore;
}

/** Aborted waits reject with this (or with the signal's reason). */
export class IndexClosedError extends Error {}

/**
 * Members of `a` not covered by `b`: a member stays unless one member of `b`, or a contiguous or
 * overlapping run of them, spans its whole range.
 */
export function coverSetDifference(a: Iterable<Fragment>, b: CoverSet): Fragment[] {
  const bs = b.members();
  const out: Fragment[] = [];
  for (const f of a) {
    let covered = f.begin;
    for (const m of bs) {
      if (m.begin > covered) break;
      if (m.end > covered) covered = m.end;
      if (covered >= f.end) break;
    }
    if (covered < f.end) out.push(f);
  }
  return out;
}

export class FragmentIndex {
  private set = new CoverSet();
  private localSet = new CoverSet();
  private readonly locals = new WeakMap<Fragment, LocalFragment>();
  private wake: { promise: Promise<void>; resolve: () => void } = deferred();
  private readonly first = deferred();
  private refreshed = false;
  private closed: Error | undefined;
  private readonly now: () => Date;
  private readonly openStore: ((url: string) => FragmentStore) | undefined;

  constructor(readonly journal: string, opts: IndexOptions = {}) {
    this.now = opts.now ?? (() => new Date());
    this.openStore = opts.openStore;
  }

  /** Resolves after the first `replaceRemote`. */
  get firstRefresh(): Promise<void> {
    return this.first.promise;
  }
  get hasRefreshed(): boolean {
    return this.refreshed;
  }

  /** Members in offset order (local ones have empty backing_store). */
  fragments(): Fragment[] {
    return this.set.members();
  }

  /** The LocalFragment behind a member, if it is local. */
  localOf(f: Fragment): LocalFragment | undefined {
    return this.locals.get(f);
  }

  beginOffset(): bigint {
    return this.set.beginOffset();
  }
  endOffset(): bigint {
    return this.set.endOffset();
  }

  /** [begin, end, mod time of the last member] (zeros when empty), as upstream's Summary. */
  summary(): { begin: bigint; end: bigint; modTime: bigint } {
    const m = this.set.members();
    const last = m[m.length - 1];
    return { begin: m[0]?.begin ?? 0n, end: last?.end ?? 0n, modTime: last?.mod_time ?? 0n };
  }

  /** Adds the spool's latest committed content. */
  spoolCommit(lf: LocalFragment): void {
    const f = lf.fragment;
    if (f.begin === f.end) return;
    this.locals.set(f, lf);
    this.set.add(f);
    this.localSet.add(f);
    this.notify();
  }

  /** Installs a store listing (see the top of this file). */
  replaceRemote(remote: Iterable<Fragment>): void {
    const set = remote instanceof CoverSet ? new CoverSet(remote.members()) : new CoverSet(remote);
    const keep = coverSetDifference(this.localSet, set);
    this.localSet = new CoverSet(keep);
    for (const f of keep) set.add(f);
    this.set = set;
    this.notify();
    if (!this.refreshed) {
      this.refreshed = true;
      this.first.resolve();
    }
  }

  /**
   * Adds one stored fragment now, without waiting for the next listing (e.g. the fragment a
   * flush just persisted); local fragments it covers are dropped.
   */
  addRemote(f: Fragment): void {
    const one = new CoverSet([f]);
    const keep = new Set(coverSetDifference(this.localSet, one));
    this.localSet = new CoverSet([...this.localSet].filter((m) => keep.has(m)));
    this.set.add(f);
    this.notify();
  }

  /** Fails pending and later blocking queries (the journal left this broker). */
  close(err: Error = new IndexClosedError(`index of ${this.journal} is closed`)): void {
    this.closed = err;
    this.notify();
  }

  /** Resolves when the index changes next. */
  changed(signal?: AbortSignal): Promise<void> {
    return this.waitOn(this.wake.promise, signal);
  }

  /** Resolves once the index covers `offset` (its end is past it), or rejects on abort/close. */
  async waitFor(offset: bigint, signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (this.closed) throw this.closed;
      if (this.set.longestOverlapping(offset) || this.endOffset() > offset) return;
      await this.changed(signal);
    }
  }

  /** The fragment to read `req.offset` from (see the top of this file). */
  async query(req: QueryRequest): Promise<QueryResult> {
    let offset = req.offset;
    if (offset === -1n) offset = this.endOffset();
    for (;;) {
      if (this.closed) throw this.closed;
      const members = this.set.members();
      let { index, found } = this.set.longestOverlappingIndex(offset);
      const next = members[index];
      if (!found && next && next.mod_time !== 0n) {
        const cutoff = BigInt(Math.floor((this.now().getTime() - OFFSET_JUMP_AGE_MS) / 1000));
        if (index === 0 || next.mod_time < cutoff) {
          offset = next.begin;
          found = true;
        }
      }
      if (found) {
        const f = members[index]!;
        if (f.mod_time !== 0n && f.mod_time < (req.beginModTime ?? 0n)) {
          offset = f.end;
          continue;
        }
        const out: QueryResult = { status: Status.OK, offset, writeHead: this.endOffset(), fragment: f };
        const lf = this.locals.get(f);
        if (lf) out.local = lf;
        return out;
      }
      if (!req.block) return { status: Status.OFFSET_NOT_YET_AVAILABLE, offset, writeHead: this.endOffset() };
      await this.changed(req.signal);
    }
  }

  /** A signed GET URL for a persisted member (undefined for local ones or without openStore). */
  async signedUrl(f: Fragment, ttlMs: number): Promise<string | undefined> {
    if (!f.backing_store || f.mod_time === 0n || !this.openStore) return undefined;
    return this.openStore(f.backing_store).signGet(fragmentContentPath(f), ttlMs);
  }

  /** One page of ListFragments: fragments from `pageToken` within the mod-time bounds. */
  async list(req: ListRequest = {}): Promise<{ fragments: ListedFragment[]; nextPageToken: bigint }> {
    const members = this.set.members();
    const limit = req.pageLimit && req.pageLimit > 0 ? req.pageLimit : 1000;
    const token = req.pageToken ?? 0n;
    const begin = req.beginModTime ?? 0n;
    const end = req.endModTime ?? 0n;
    let i = members.findIndex((f) => f.begin >= token);
    if (i === -1) i = members.length;
    const out: ListedFragment[] = [];
    for (; i < members.length && out.length < limit; i++) {
      const f = members[i]!;
      if ((f.mod_time !== 0n && f.mod_time < begin) || (end !== 0n && (f.mod_time === 0n || f.mod_time > end))) continue;
      let signedUrl = '';
      if (req.signatureTtlMs !== undefined && f.backing_store !== '') {
        signedUrl = (await this.signedUrl(f, req.signatureTtlMs)) ?? '';
      }
      out.push({ spec: { ...f }, signedUrl });
    }
    return { fragments: out, nextPageToken: i < members.length ? members[i]!.begin : 0n };
  }

  private notify(): void {
    const w = this.wake;
    this.wake = deferred();
    w.resolve();
  }

  private waitOn(p: Promise<void>, signal?: AbortSignal): Promise<void> {
    if (!signal) return p;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      void p.then(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Lists `journal` in every store of `urls`, in order, into one CoverSet (a later store wins an
 * identical range). Objects that are not fragment names are passed to `onUnparseable` and
 * skipped. A store that fails to list fails the walk.
 */
export async function walkAllStores(
  journal: string,
  urls: readonly string[],
  open: (url: string) => FragmentStore,
  opts: { signal?: AbortSignal; onUnparseable?: (store: string, path: string, reason: string) => void } = {},
): Promise<CoverSet> {
  const set = new CoverSet();
  for (const url of urls) {
    const store = open(url);
    const listing = opts.signal ? store.listFragments(journal, { signal: opts.signal }) : store.listFragments(journal);
    for await (const e of listing) {
      if (e.kind === 'fragment') {
        if (e.fragment.journal !== journal) throw new Error(`fragment ${e.path} is not of journal ${journal}`);
        set.add(e.fragment);
      } else {
        opts.onUnparseable?.(url, e.path, e.reason);
      }
    }
  }
  return set;
}

/** An object under a journal's prefix whose name is not a fragment name. */
export interface StrayObject {
  store: string;
  /** Path relative to `<journal>/`. */
  path: string;
  reason: string;
}

/**
 * Reports each stray object of a journal's stores once: when a complete listing first shows it
 * (again, after a listing without it). Stores commonly hold such objects (a README, notes, an
 * operator's copy), and a listing runs every refresh interval: a warning per object per
 * listing would flood the log with the same lines. Only the previous complete listing's strays
 * are remembered, so memory follows what the stores hold.
 */
export class StrayObjects {
  private known = new Set<string>();

  constructor(private readonly report: (o: StrayObject) => void) {}

  /** Records one complete listing's stray objects, reporting those the previous one lacked. */
  listed(objects: readonly StrayObject[]): void {
    const now = new Set<string>();
    for (const o of objects) {
      const key = `${o.store}\u0000${o.path}`;
      if (now.has(key)) continue;
      now.add(key);
      if (!this.known.has(key)) this.report(o);
    }
    this.known = now;
  }
}

/**
 * {@link walkAllStores}, handing the listing's stray objects to `strays` once the walk is
 * complete (a failed walk reports nothing, and forgets nothing).
 */
export async function walkAllStoresTracked(
  journal: string,
  urls: readonly string[],
  open: (url: string) => FragmentStore,
  strays: StrayObjects,
  signal?: AbortSignal,
): Promise<CoverSet> {
  const found: StrayObject[] = [];
  const walkOpts: { signal?: AbortSignal; onUnparseable: (store: string, path: string, reason: string) => void } = {
    onUnparseable: (store, path, reason) => found.push({ store, path, reason }),
  };
  if (signal) walkOpts.signal = signal;
  const set = await walkAllStores(journal, urls, open, walkOpts);
  if (!signal?.aborted) strays.listed(found);
  return set;
}

export interface RefreshOptions {
  /** The journal's current store URLs and refresh interval (read each round: specs change). */
  spec: () => { stores: readonly string[]; refreshIntervalMs: number } | undefined;
  open: (url: string) => FragmentStore;
  signal: AbortSignal;
  /** A failed listing; the next round comes after the interval as usual. */
  onError?: (err: unknown) => void;
  onUnparseable?: (store: string, path: string, reason: string) => void;
  /** Reports each stray object once (see StrayObjects); with it, `onUnparseable` is not called. */
  strays?: StrayObjects;
}

/**
 * Refreshes `index` from the journal's stores now and then every refresh interval until the
 * signal aborts. A journal without stores gets an empty listing (its first refresh still
 * resolves). Resolves when stopped.
 */
export async function runIndexRefresh(index: FragmentIndex, opts: RefreshOptions): Promise<void> {
  while (!opts.signal.aborted) {
    const spec = opts.spec();
    if (!spec) return;
    try {
      let set: CoverSet;
      if (opts.strays) set = await walkAllStoresTracked(index.journal, spec.stores, opts.open, opts.strays, opts.signal);
      else {
        const walkOpts: { signal: AbortSignal; onUnparseable?: (s: string, p: string, r: string) => void } = { signal: opts.signal };
        if (opts.onUnparseable) walkOpts.onUnparseable = opts.onUnparseable;
        set = await walkAllStores(index.journal, spec.stores, opts.open, walkOpts);
      }
      if (opts.signal.aborted) return;
      index.replaceRemote(set);
    } catch (e) {
      if (opts.signal.aborted) return;
      opts.onError?.(e);
    }
    const ms = spec.refreshIntervalMs > 0 ? spec.refreshIntervalMs : 5 * 60_000;
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        opts.signal.removeEventListener('abort', done);
        resolve();
      }
      opts.signal.addEventListener('abort', done, { once: true });
    });
  }
}
