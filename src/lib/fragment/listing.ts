// Listing a journal's fragment objects in every one of its stores: the input of the fork and
// retention planners (forks.ts, retention.ts).
//
// For each journal, each store of its `fragment.stores` is listed under `<journal>/`,
// recursively, so fragments under any path postfix are found. Every object comes back: as a
// FragmentObject when its name parses as a fragment of the journal, else as an `unparseable`
// entry with the reason (a broker skips those; an operator should see them). Several stores
// (and journals) are listed at once, up to `concurrency`; entries of one store keep that
// store's listing order, entries of different stores interleave.
//
// Journal names nest: with journals `a/b` and `a/b/c`, every object of `a/b/c` is under `a/b/`
// too, and its path relative to `a/b/` (`c/<name>`) reads like a fragment of `a/b` with path
// postfix `c`. Both are laid out as `<journal>/<postfix>/<name>` and the postfix template is free
// text, so the path alone cannot tell them apart. Given the names of every journal
// (`journals`), an object under `<journal>/<p>/` where `<journal>/<p>` is itself a journal (at
// any depth of `p`) is that other journal's: it comes back as a `nested` entry, never as a
// fragment or an unparseable object of this one. Without `journals` such objects are parsed as
// this journal's, as a broker does.
//
// A store that fails (no credentials, a missing bucket, an unreachable endpoint) ends the
// whole listing with its StoreError, or, with `continueOnError`, is reported as one `failed`
// entry while the other stores go on: a prune reports such stores and keeps working.

import type { JournalSpec } from '../protocol/gen/broker/protocol.js';
import { StoreError, openStore, type FragmentStore, type OpenStoreOptions } from '../stores/index.js';
import { FragmentObjectParser, type FragmentObject } from './objects.js';
import { ValidationError } from '../protocol/errors.js';

/** The parts of a JournalSpec a listing needs. */
export type ListableJournal = Pick<JournalSpec, 'name'> & { fragment?: Pick<NonNullable<JournalSpec['fragment']>, 'stores'> | undefined };

export interface ListFragmentsOptions {
  /** How stores are opened (file root, S3 credentials and timeouts); S3 credentials default to the environment. */
  stores?: OpenStoreOptions;
  /** Opens a store by URL, instead of `openStore(url, stores)`; stores it returns are not closed here. */
  openStore?: (url: string) => FragmentStore;
  /** Store listings under way at once. Default 4. */
  concurrency?: number;
  /** Report a failing store as a `failed` entry and go on, instead of throwing its error. */
  continueOnError?: boolean;
  signal?: AbortSignal;
  /**
   * The names of every journal (not only the listed ones): objects of a journal nested under a
   * listed one are returned as `nested` entries. See the module comment.
   */
  journals?: ReadonlySet<string>;
}

/** An object under `<journal>/` that belongs to another journal nested under it (`owner`). */
export interface NestedObject {
  journal: string;
  store: string;
  /** Object path relative to the store root: `<owner>/…`. */
  path: string;
  /** The journal whose prefix the object is under: `<journal>/<p>`. */
  owner: string;
}

/** An object under `<journal>/` whose name is not a fragment name. */
export interface UnparseableObject {
  journal: string;
  store: string;
  /** Object path relative to the store root: `<journal>/…`. */
  path: string;
  size: number;
  /** Store modification time, unix seconds (0 when unknown). */
  modTime: number;
  reason: string;
}

/** A store that could not be listed (with `continueOnError`). */
export interface FailedListing {
  journal: string;
  store: string;
  error: StoreError;
}

export type FragmentListingEntry =
  | { kind: 'fragment'; object: FragmentObject }
  | { kind: 'unparseable'; object: UnparseableObject }
  | { kind: 'nested'; object: NestedObject }
  | { kind: 'failed'; failure: FailedListing };

export interface CollectedFragments {
  objects: FragmentObject[];
  unparseable: UnparseableObject[];
  nested: NestedObject[];
  failed: FailedListing[];
}

/** Every fragment object of one journal in each of its stores. */
export function listJournalFragments(spec: ListableJournal, opts: ListFragmentsOptions = {}): AsyncGenerator<FragmentListingEntry, void, undefined> {
  return listFragmentObjects([spec], opts);
}

/** {@link listFragmentObjects}, collected. */
export async function collectFragmentObjects(specs: Iterable<ListableJournal>, opts: ListFragmentsOptions = {}): Promise<CollectedFragments> {
  const out: CollectedFragments = { objects: [], unparseable: [], nested: [], failed: [] };
  for await (const e of listFragmentObjects(specs, opts)) {
    if (e.kind === 'fragment') out.objects.push(e.object);
    else if (e.kind === 'unparseable') out.unparseable.push(e.object);
    else if (e.kind === 'nested') out.nested.push(e.object);
    else out.failed.push(e.failure);
  }
  return out;
}

/**
 * The journal nested under `journal` that owns the object at `rel` (relative to `<journal>/`):
 * the deepest `<journal>/<p>` in `journals` for a directory prefix `p` of `rel`, if any.
 */
export function nestedOwner(journal: string, rel: string, journals: ReadonlySet<string> | undefined): string | undefined {
  // A set lookup per directory level of the object's path: cheap at any number of journals.
  if (journals === undefined || journals.size <= 1) return undefined;
  let owner: string | undefined;
  for (let i = rel.indexOf('/'); i !== -1; i = rel.indexOf('/', i + 1)) {
    const name = `${journal}/${rel.slice(0, i)}`;
    if (journals.has(name)) owner = name;
  }
  return owner;
}

const unix = (d: Date): number => {
  const t = d.getTime();
  return Number.isFinite(t) && t > 0 ? Math.floor(t / 1000) : 0;
};

/** Every fragment object of each journal in each of its stores (duplicate store URLs listed once). */
export async function* listFragmentObjects(
  specs: Iterable<ListableJournal>,
  opts: ListFragmentsOptions = {},
): AsyncGenerator<FragmentListingEntry, void, undefined> {
  const tasks: { journal: string; store: string }[] = [];
  for (const spec of specs) {
    for (const store of new Set(spec.fragment?.stores ?? [])) tasks.push({ journal: spec.name, store });
  }
  if (tasks.length === 0) return;
  const concurrency = Math.max(1, Math.floor(opts.concurrency ?? 4));

  // Stores are opened once per URL; those opened here are closed at the end.
  const opened = new Map<string, FragmentStore>();
  const own: FragmentStore[] = [];
  const storeFor = (url: string): FragmentStore => {
    let s = opened.get(url);
    if (s === undefined) {
      if (opts.openStore) s = opts.openStore(url);
      else {
        s = openStore(url, opts.stores);
        own.push(s);
      }
      opened.set(url, s);
    }
    return s;
  };

  const stop = new AbortController();
  const onOuterAbort = () => stop.abort(opts.signal!.reason);
  if (opts.signal?.aborted) throw abortReason(opts.signal);
  opts.signal?.addEventListener('abort', onOuterAbort, { once: true });

  const queue = new EntryQueue(1024, stop.signal);
  let next = 0;
  let firstError: unknown;

  const worker = async (): Promise<void> => {
    while (next < tasks.length && !stop.signal.aborted) {
      const { journal, store } = tasks[next++]!;
      try {
        const s = storeFor(store);
        // One parser per journal and store: the journal's name is validated once, not once per
        // object (at listing scale that check dominated the parse).
        const parser = new FragmentObjectParser(journal);
        for await (const o of s.list(`${journal}/`, { signal: stop.signal })) {
          if (stop.signal.aborted) return;
          const owner = nestedOwner(journal, o.path, opts.journals);
          if (owner !== undefined) {
            await queue.push({ kind: 'nested', object: { journal, store, path: `${journal}/${o.path}`, owner } });
            continue;
          }
          let object: FragmentObject;
          try {
            object = parser.parse(store, o.path, o.size, unix(o.modTime));
          } catch (e) {
            if (!(e instanceof ValidationError)) throw e;
            await queue.push({ kind: 'unparseable', object: { journal, store, path: `${journal}/${o.path}`, size: o.size, modTime: unix(o.modTime), reason: e.message } });
            continue;
          }
          await queue.push({ kind: 'fragment', object });
        }
      } catch (e) {
        if (stop.signal.aborted) return;
        const error = asStoreError(store, journal, e);
        if (!opts.continueOnError) {
          firstError ??= error;
          stop.abort(error);
          return;
        }
        await queue.push({ kind: 'failed', failure: { journal, store, error } });
      }
    }
  };

  const workers = Promise.all(Array.from({ length: Math.min(concurrency, tasks.length) }, worker)).finally(() => queue.close());
  try {
    for (;;) {
      const e = await queue.take();
      if (e === undefined) break;
      yield e;
    }
    if (firstError !== undefined) throw firstError;
    if (opts.signal?.aborted) throw abortReason(opts.signal);
  } finally {
    stop.abort(new Error('listing closed'));
    queue.close();
    await workers.catch(() => undefined);
    opts.signal?.removeEventListener('abort', onOuterAbort);
    for (const s of own) (s as { close?: () => void }).close?.();
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

function asStoreError(store: string, journal: string, e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const msg = e instanceof Error ? e.message : String(e);
  return new StoreError(`store ${store}: list ${journal}/: ${msg.split('\n')[0]}`, { cause: e });
}

/** A bounded queue between the listing workers and the consumer. */
class EntryQueue {
  private items: FragmentListingEntry[] = [];
  private closed = false;
  private wakeTaker: (() => void) | undefined;
  private wakePushers: (() => void)[] = [];

  /** Aborting `signal` closes the queue and drops what it holds. */
  constructor(
    private readonly highWater: number,
    signal: AbortSignal,
  ) {
    signal.addEventListener(
      'abort',
      () => {
        this.items = [];
        this.close();
      },
      { once: true },
    );
  }

  async push(e: FragmentListingEntry): Promise<void> {
    while (this.items.length >= this.highWater && !this.closed) {
      await new Promise<void>((r) => this.wakePushers.push(r));
    }
    if (this.closed) return;
    this.items.push(e);
    this.wakeTaker?.();
  }

  /** The next entry; undefined once closed and drained. */
  async take(): Promise<FragmentListingEntry | undefined> {
    while (this.items.length === 0) {
      if (this.closed) return undefined;
      await new Promise<void>((r) => (this.wakeTaker = r));
      this.wakeTaker = undefined;
    }
    const e = this.items.shift()!;
    if (this.items.length < this.highWater) for (const w of this.wakePushers.splice(0)) w();
    return e;
  }

  close(): void {
    this.closed = true;
    this.wakeTaker?.();
    for (const w of this.wakePushers.splice(0)) w();
  }
}
