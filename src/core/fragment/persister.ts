// Persists closed spools: compresses a LocalFragment with its codec and puts it at its content
// path, `<journal>/<postfix><begin>-<end>-<sum><ext>`, in the journal's first fragment store.
//
// * The postfix comes from the spec's path_postfix_template, evaluated on the spool (postfix.ts);
//   the resulting path must parse back as a fragment of the journal, else persisting fails (a
//   store listing would skip the object otherwise).
// * Idempotent: an object already at the path is taken as persisted (the name carries the
//   content's SHA-1, so the same name means the same content).
// * The compressed bytes are written to an unlinked temporary file first, so the put knows its
//   length and a retried put does not compress again. GZIP_OFFLOAD_DECOMPRESSION objects are put
//   with `Content-Encoding: gzip`.
// * `persist()` retries with exponential backoff until the object is stored or its signal aborts.
//   With `exiting`, a store refusing for want of permissions is skipped in favour of the next
//   store of the spec, as upstream brokers do while shutting down.
// * At most `concurrency` persists run at once; hooks report bytes pending and each outcome.
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';

import { compressor } from '../../lib/codecs/index.js';
import { sleep } from '../../lib/concurrency.js';
import { fragmentContentPath, parseFragmentPath } from '../../lib/protocol/fragment.js';
import { CompressionCodec, type Fragment, type JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import { openStore, type FragmentStore, type OpenStoreOptions } from '../../lib/stores/index.js';
import { evaluatePostfixTemplate } from './postfix.js';
import { SpoolFile, streamLocal, type LocalFragment } from './spool.js';

export interface PersisterHooks {
  /** Uncompressed bytes of spools accepted by persist() and not yet stored. */
  pendingBytes?(bytes: number): void;
  /** A fragment was stored (or found already stored); `storedBytes` as written (0 if found). */
  persisted?(fragment: Fragment, storedBytes: number): void;
  /** An attempt failed and will be retried after `retryInMs`. */
  failed?(fragment: Fragment, err: unknown, retryInMs: number): void;
}

export interface PersisterOptions {
  /** How stores are opened (default: `openStore` with `stores`, cached by URL). */
  openStore?: (url: string) => FragmentStore;
  /** Options for the default `openStore` (file root, s3 credentials). */
  stores?: OpenStoreOptions;
  /** Directory of temporary compressed files (default: the OS temp directory). */
  tempDir?: string;
  /** First retry delay (default 1 s), doubling up to `maxBackoffMs` (default 60 s). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Persists running at once (default 32). */
  concurrency?: number;
  hooks?: PersisterHooks;
  /** Clock for mod times (tests). */
  now?: () => Date;
}

export interface PersistOptions {
  signal?: AbortSignal;
  /** The broker is shutting down: fall back to later stores on permission errors. */
  exiting?: boolean;
}

/** The spool cannot be persisted as configured (bad template, unparseable path): not retried. */
export class PersistConfigError extends Error {}

/** The path postfix and content path `lf` is persisted at for `spec`. */
export function persistPath(lf: LocalFragment, spec: JournalSpec, backingStore = ''): { postfix: string; path: string; fragment: Fragment } {
  const f = lf.fragment;
  let postfix: string;
  try {
    postfix = evaluatePostfixTemplate(
      spec.fragment?.path_postfix_template ?? '',
      {
        journal: f.journal,
        begin: f.begin,
        end: f.end,
        compressionCodec: f.compression_codec,
        firstAppendTime: lf.firstAppendTime ?? new Date(0),
        registers: lf.registers,
        backingStore,
      },
      spec,
    );
  } catch (e) {
    throw new PersistConfigError(`journal ${f.journal}: ${(e as Error).message}`, { cause: e });
  }
  const fragment: Fragment = { ...f, path_postfix: postfix.replace(/^\/+|\/+$/g, ''), backing_store: backingStore };
  const path = fragmentContentPath(fragment);
  try {
    const back = parseFragmentPath(f.journal, path.slice(f.journal.length + 1));
    fragment.path_postfix = back.path_postfix;
  } catch (e) {
    throw new PersistConfigError(`journal ${f.journal}: path postfix ${JSON.stringify(postfix)} gives ${path}, which does not parse as a fragment: ${(e as Error).message}`, { cause: e });
  }
  if (!path.startsWith(f.journal + '/')) {
    throw new PersistConfigError(`journal ${f.journal}: path postfix ${JSON.stringify(postfix)} leaves the journal's directory`);
  }
  return { postfix: fragment.path_postfix, path, fragment };
}

/** The compressed form of one fragment, kept across retries. */
class Compressed {
  private file: SpoolFile | undefined;
  length = 0;

  constructor(private readonly lf: LocalFragment, private readonly dir: string | undefined) {}

  async ensure(): Promise<SpoolFile> {
    if (this.file && !this.file.isClosed) return this.file;
    const file = new SpoolFile(this.dir);
    let at = 0;
    await pipeline(
      streamLocal(this.lf),
      compressor(this.lf.fragment.compression_codec),
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          try {
            file.writeAt(chunk, at);
            at += chunk.length;
            cb();
          } catch (e) {
            cb(e as Error);
          }
        },
      }),
    );
    this.file = file;
    this.length = at;
    return file;
  }

  release(): void {
    this.file?.close();
    this.file = undefined;
  }
}

export class Persister {
  private readonly stores = new Map<string, FragmentStore>();
  private readonly open: (url: string) => FragmentStore;
  private pending = 0;
  private running = 0;
  private readonly waiters: (() => void)[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly concurrency: number;
  private readonly initialBackoff: number;
  private readonly maxBackoff: number;
  private readonly hooks: PersisterHooks;
  private readonly now: () => Date;

  constructor(private readonly opts: PersisterOptions = {}) {
    this.open =
      opts.openStore ??
      ((url) => {
        let s = this.stores.get(url);
        if (!s) this.stores.set(url, (s = openStore(url, opts.stores)));
        return s;
      });
    this.concurrency = opts.concurrency ?? 32;
    this.initialBackoff = opts.initialBackoffMs ?? 1000;
    this.maxBackoff = opts.maxBackoffMs ?? 60_000;
    this.hooks = opts.hooks ?? {};
    this.now = opts.now ?? (() => new Date());
  }

  /** Uncompressed bytes accepted by persist() and not yet stored. */
  get pendingBytes(): number {
    return this.pending;
  }

  /**
   * Stores `lf` in the first store of `spec.fragment.stores`, retrying until it is there. Resolves
   * with the stored fragment (backing_store and path_postfix set, mod_time the clock's reading
   * when the put finished), or undefined when the fragment is empty or the spec has no stores.
   * Rejects with PersistConfigError when the path cannot be made, or with the signal's reason.
   */
  async persist(lf: LocalFragment, spec: JournalSpec, opts: PersistOptions = {}): Promise<Fragment | undefined> {
    const size = Number(lf.fragment.end - lf.fragment.begin);
    if (size === 0 || (spec.fragment?.stores ?? []).length === 0) return undefined;
    const job = this.run(lf, spec, opts, size);
    this.inFlight.add(job);
    void job.then(
      () => this.inFlight.delete(job),
      () => this.inFlight.delete(job),
    );
    return job;
  }

  /** Resolves once every persist() so far has settled. */
  async idle(): Promise<void> {
    while (this.inFlight.size) await Promise.allSettled([...this.inFlight]);
  }

  private async run(lf: LocalFragment, spec: JournalSpec, opts: PersistOptions, size: number): Promise<Fragment | undefined> {
    this.pending += size;
    this.hooks.pendingBytes?.(this.pending);
    const compressed = new Compressed(lf, this.opts.tempDir);
    try {
      await this.acquire(opts.signal);
      try {
        let backoff = this.initialBackoff;
        for (;;) {
          try {
            return await this.attempt(lf, spec, compressed, opts);
          } catch (e) {
            if (e instanceof PersistConfigError || opts.signal?.aborted) throw e;
            this.hooks.failed?.(lf.fragment, e, backoff);
            await sleep(backoff, opts.signal);
            backoff = Math.min(backoff * 2, this.maxBackoff);
          }
        }
      } finally {
        this.releaseSlot();
      }
    } finally {
      compressed.release();
      this.pending -= size;
      this.hooks.pendingBytes?.(this.pending);
    }
  }

  /** One attempt over the spec's stores (the first, or later ones on permission errors when exiting). */
  private async attempt(lf: LocalFragment, spec: JournalSpec, compressed: Compressed, opts: PersistOptions): Promise<Fragment | undefined> {
    const urls = spec.fragment?.stores ?? [];
    for (let i = 0; i < urls.length; i++) {
      const url = urls[i]!;
      const { path, fragment } = persistPath(lf, spec, url);
      const store = this.open(url);
      const fallBack = (e: unknown) => opts.exiting === true && i + 1 < urls.length && store.isAuthError(e);
      let exists: boolean;
      try {
        exists = await store.exists(path);
      } catch (e) {
        if (fallBack(e)) continue;
        throw e;
      }
      const done = (stored: number): Fragment => {
        fragment.mod_time = BigInt(Math.floor(this.now().getTime() / 1000));
        this.hooks.persisted?.(fragment, stored);
        return fragment;
      };
      if (exists) return done(0);
      const codec = fragment.compression_codec;
      try {
        if (codec === CompressionCodec.NONE) {
          const size = Number(fragment.end - fragment.begin);
          await store.put(path, streamLocal(lf), { contentLength: size, signal: opts.signal });
          return done(size);
        }
        const file = await compressed.ensure();
        const put: { contentLength: number; signal?: AbortSignal; contentEncoding?: string } = { contentLength: compressed.length };
        if (opts.signal) put.signal = opts.signal;
        if (codec === CompressionCodec.GZIP_OFFLOAD_DECOMPRESSION) put.contentEncoding = 'gzip';
        await store.put(path, file.stream(0, compressed.length), put);
        return done(compressed.length);
      } catch (e) {
        if (fallBack(e)) continue;
        throw e;
      }
    }
    return undefined;
  }

  private async acquire(signal?: AbortSignal): Promise<void> {
    while (this.running >= this.concurrency) {
      if (signal?.aborted) throw signal.reason;
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal?.removeEventListener('abort', wake);
          const i = this.waiters.indexOf(wake);
          if (i !== -1) this.waiters.splice(i, 1);
          resolve();
        };
        this.waiters.push(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    }
    if (signal?.aborted) throw signal.reason;
    this.running++;
  }

  private releaseSlot(): void {
    this.running--;
    this.waiters.shift()?.();
  }
}
