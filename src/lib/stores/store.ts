// The fragment store interface: where persisted journal fragments live. One implementation per
// URL scheme (file.ts for file://, s3.ts for s3://), all addressed the same way:
//
// * A store is named by its URL, as in a JournalSpec's `fragment.stores` (`file:///dir/`,
//   `s3://bucket/prefix/?args`). Its path ends in `/`, and the optional `find` / `replace`
//   query arguments rewrite object paths: the first occurrence of `find` in a path is replaced
//   before the path is appended to the store's prefix (a way to rename journals without moving
//   their fragments).
// * Methods take paths relative to the store: a fragment's content path
//   (`<journal>/<path postfix>/<name>`, see fragmentContentPath) or, for listings, a prefix
//   such as `<journal>/`.
// * Listings are async iterations, so a prefix with a very large number of objects is walked,
//   not collected. `put` takes streamed content.
import { request as httpRequest, type Agent } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';

import { GazctlError, ValidationError } from '../protocol/errors.js';
import type { Fragment } from '../protocol/gen/broker/protocol.js';
import { parseFragmentPath } from '../protocol/fragment.js';
import { socksAgent, socksServer } from '../socks.js';

/** A store operation failed. */
export class StoreError extends GazctlError {}
/** The object does not exist. */
export class StoreNotFoundError extends StoreError {}
/** The store failed its health check; the message says at which step. */
export class StoreHealthError extends StoreError {}

/** What a {@link StoreAuthError} is about. */
export type StoreAuthKind =
  /** The credentials were refused (unknown key, wrong secret) or none were found. */
  | 'credentials'
  /** The credentials are valid but lack permission for the operation (e.g. delete). */
  | 'denied'
  /** The bucket (or, for file://, the store directory) does not exist. */
  | 'no-bucket';

/**
 * The store refused the request for want of credentials or permissions, or its bucket is
 * missing: something an operator fixes in configuration, not by retrying. `isAuthError` is
 * true for it.
 */
export class StoreAuthError extends StoreError {
  constructor(
    message: string,
    readonly kind: StoreAuthKind,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The store could not be reached at all (connection refused, timed out, name not found). */
export class StoreUnreachableError extends StoreError {}

export interface HealthOptions {
  signal?: AbortSignal;
  /**
   * Also check that objects can be deleted: put a probe object under this store-relative
   * prefix (e.g. `<journal>/` or `.test/`) and remove it. Brokers don't need delete
   * permission; a prune does.
   */
  deleteUnder?: string;
}

/** One object of a listing. */
export interface StoreObject {
  /** Path relative to the listed prefix, `/`-separated. */
  path: string;
  modTime: Date;
  /** Size in bytes as stored (compressed, for compressed fragments). */
  size: number;
}

/** One entry of a journal's fragment listing. */
export type FragmentListing =
  | {
      kind: 'fragment';
      /** Path relative to `<journal>/`. */
      path: string;
      /** Parsed from the path; `mod_time` (unix seconds) and `backing_store` filled in. */
      fragment: Fragment;
      size: number;
    }
  | {
      /** An object under the journal whose path is not a fragment name. */
      kind: 'unparseable';
      path: string;
      modTime: Date;
      size: number;
      /** Why it does not parse. */
      reason: string;
    };

/** Content for {@link FragmentStore.put}: bytes, or a stream of them. */
export type PutContent = Uint8Array | string | Readable | AsyncIterable<Uint8Array>;

export interface PutOptions {
  /** Expected number of bytes; the put fails (and leaves no object) when the content differs. */
  contentLength?: number;
  /** `Content-Encoding` to record with the object where the backend has one (e.g. `gzip`). */
  contentEncoding?: string;
  signal?: AbortSignal;
}

export interface OpenOptions {
  /** First byte to read (default 0). */
  start?: number;
  /** Byte after the last to read (default: the end of the object). */
  end?: number;
  signal?: AbortSignal;
}

export interface FragmentStore {
  /** The store URL, as configured; the `backing_store` of its fragments. */
  readonly url: string;
  /** URL scheme without the colon: `file`, `s3`. */
  readonly scheme: string;
  /** Every object under `prefix` (e.g. `<journal>/`), recursively; paths relative to it. */
  list(prefix: string, opts?: { signal?: AbortSignal }): AsyncIterable<StoreObject>;
  /**
   * The objects under `<journal>/`, each parsed as a fragment of `journal` (a directory path
   * between the journal and the name is its path postfix) or reported as unparseable.
   */
  listFragments(journal: string, opts?: { signal?: AbortSignal }): AsyncIterable<FragmentListing>;
  exists(path: string): Promise<boolean>;
  /** The raw stored bytes of `[start, end)`; rejects with StoreNotFoundError when absent. */
  open(path: string, opts?: OpenOptions): Promise<Readable>;
  /** Like `open`, collected into one buffer. */
  get(path: string, opts?: OpenOptions): Promise<Buffer>;
  /** Write an object whole: readers see either the old object (or none) or all of the new one. */
  put(path: string, content: PutContent, opts?: PutOptions): Promise<void>;
  /** Remove an object; rejects with StoreNotFoundError when absent. */
  remove(path: string): Promise<void>;
  /** A URL that reads the object with a plain GET, valid for about `ttlMs`. */
  signGet(path: string, ttlMs: number): Promise<string>;
  /**
   * Resolve when the store works end to end (put, get, list, sign, and delete when
   * `deleteUnder` is given); else a StoreHealthError whose cause is the failing operation's.
   */
  health(opts?: HealthOptions): Promise<void>;
  /** Whether an error from this store means missing permissions or a missing bucket/directory. */
  isAuthError(err: unknown): boolean;
}

/** Object path for `path` in a store with prefix `prefix` and the `find`/`replace` rewrite. */
export function rewritePath(prefix: string, path: string, find: string, replace: string): string {
  return prefix + (find === '' ? path : path.replace(find, () => replace));
}

/** Query arguments every scheme takes, matched case-insensitively (first value wins). */
export function rewriteArgs(url: URL): { find: string; replace: string } {
  let find: string | undefined;
  let replace: string | undefined;
  for (const [k, v] of url.searchParams) {
    const key = k.toLowerCase();
    if (key === 'find') find ??= v;
    else if (key === 'replace') replace ??= v;
  }
  return { find: find ?? '', replace: replace ?? '' };
}

/** Parse a listing of `<journal>/` into fragments and unparseable objects. */
export async function* parseFragmentListing(
  storeUrl: string,
  journal: string,
  objects: AsyncIterable<StoreObject>,
): AsyncGenerator<FragmentListing, void, undefined> {
  for await (const o of objects) {
    let fragment: Fragment;
    try {
      fragment = parseFragmentPath(journal, o.path);
    } catch (e) {
      if (!(e instanceof ValidationError)) throw e;
      yield { kind: 'unparseable', path: o.path, modTime: o.modTime, size: o.size, reason: e.message };
      continue;
    }
    fragment.mod_time = BigInt(Math.floor(o.modTime.getTime() / 1000));
    fragment.backing_store = storeUrl;
    yield { kind: 'fragment', path: o.path, fragment, size: o.size };
  }
}

const HEALTH_PATH = '.test/health-check';
const HEALTH_CONTENT = 'health-check\n';

/**
 * The health check brokers run on a store: put a small object under `.test/`, read it back,
 * find it in a listing of `.test/`, sign a GET URL for it and, when that URL is http(s), fetch
 * it. With `deleteUnder`, then put a probe object under that prefix and remove it. Each
 * failure names its step.
 */
export async function checkStoreHealth(store: FragmentStore, opts: HealthOptions = {}): Promise<void> {
  const step = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof StoreHealthError) throw e;
      throw new StoreHealthError(`store ${store.url}: health check ${what} failed: ${(e as Error).message}`, { cause: e });
    }
  };
  await step('PUT', () => store.put(HEALTH_PATH, HEALTH_CONTENT, { signal: opts.signal }));
  const got = await step('GET', () => store.get(HEALTH_PATH, { signal: opts.signal }));
  if (got.toString('utf8') !== HEALTH_CONTENT) {
    throw new StoreHealthError(`store ${store.url}: health check GET returned ${JSON.stringify(got.toString('utf8'))}`);
  }
  const found = await step('LIST', async () => {
    for await (const o of store.list('.test/', opts)) if (o.path === 'health-check') return true;
    return false;
  });
  if (!found) throw new StoreHealthError(`store ${store.url}: health check LIST did not find the test object`);
  const signed = await step('sign', () => store.signGet(HEALTH_PATH, 5 * 60_000));
  if (/^https?:/.test(signed)) {
    const body = await step('fetch', async () => {
      const socks = socksServer();
      if (!socks) {
        const res = await fetch(signed, { signal: opts.signal });
        if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
        return res.text();
      }
      // fetch() takes no http.Agent: through a SOCKS proxy, node:http(s) with the proxy's agent.
      return await getText(signed, socksAgent(socks, signed.startsWith('https:')), opts.signal);
    });
    if (body !== HEALTH_CONTENT) throw new StoreHealthError(`store ${store.url}: health check fetch returned ${JSON.stringify(body)}`);
  } // else a file:// URL: nothing to fetch
  if (opts.deleteUnder !== undefined) {
    let prefix = opts.deleteUnder;
    if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
    const probe = `${prefix}.health-check-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    await step(`PUT of ${probe}`, () => store.put(probe, HEALTH_CONTENT, { signal: opts.signal }));
    await step(`DELETE of ${probe}`, () => store.remove(probe));
  }
}

/** The body of a GET of `url` (status 200 only) through `agent`. */
function getText(url: string, agent: Agent, signal?: AbortSignal): Promise<string> {
  const req = url.startsWith('https:') ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const r = req(url, { method: 'GET', agent, signal }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`HTTP ${res.statusCode}`));
        return;
      }
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
      res.on('error', reject);
    });
    r.on('error', reject);
    r.end();
  });
}
