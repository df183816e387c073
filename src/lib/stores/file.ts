// The file:// fragment store: objects are files under a local root directory (a broker's
// `--broker.file-root`, gazctl's `--file-root`). Store `file:///dir/` keeps path `p` at
// `<root>/dir/<p>` (after the optional find/replace rewrite); the URL has no host.
//
// Writes go to a `.partial-…` file beside the target, are synced, and are renamed into place,
// so a reader never sees half an object. Paths that would resolve outside the root (through
// `..`) are refused.
import { randomBytes } from 'node:crypto';
import { open, mkdir, readdir, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';

import { checkStoreURL } from '../protocol/validate/store-url.js';
import {
  StoreError,
  StoreNotFoundError,
  checkStoreHealth,
  parseFragmentListing,
  rewriteArgs,
  rewritePath,
  type FragmentListing,
  type FragmentStore,
  type HealthOptions,
  type OpenOptions,
  type PutContent,
  type PutOptions,
  type StoreObject,
} from './store.js';

export interface FileStoreOptions {
  /** Local directory rooting file:// stores. */
  root: string;
}

const INVALID_DIR = 'invalid file store directory';

function code(e: unknown): string | undefined {
  return (e as NodeJS.ErrnoException | undefined)?.code;
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

async function* chunks(content: PutContent): AsyncGenerator<Uint8Array, void, undefined> {
  if (typeof content === 'string') yield Buffer.from(content);
  else if (content instanceof Uint8Array) yield content;
  else for await (const c of content as AsyncIterable<Uint8Array | string>) yield typeof c === 'string' ? Buffer.from(c) : c;
}

export class FileStore implements FragmentStore {
  readonly scheme = 'file';
  /** The absolute local root. */
  readonly root: string;
  private readonly prefix: string;
  private readonly find: string;
  private readonly replace: string;

  constructor(
    readonly url: string,
    opts: FileStoreOptions,
  ) {
    const problem = checkStoreURL(url);
    if (problem) throw new StoreError(`store ${JSON.stringify(url)}: ${problem}`);
    const u = new URL(url);
    if (u.protocol !== 'file:') throw new StoreError(`store ${JSON.stringify(url)} is not a file:// store`);
    if (!opts.root) throw new StoreError(`store ${url}: no local root directory is configured for file:// stores`);
    this.root = resolve(opts.root);
    this.prefix = decodeURIComponent(u.pathname);
    ({ find: this.find, replace: this.replace } = rewriteArgs(u));
  }

  /** The store-relative object path of `path`, after the rewrite: what signed URLs name. */
  private objectPath(path: string): string {
    return rewritePath(this.prefix, path, this.find, this.replace);
  }

  /** The local file of `path`. */
  localPath(path: string): string {
    const p = resolve(join(this.root, this.objectPath(path)));
    if (p !== this.root && !p.startsWith(this.root + sep)) {
      throw new StoreError(`store ${this.url}: path ${JSON.stringify(path)} leaves the root directory ${this.root}`);
    }
    return p;
  }

  private fail(op: string, path: string, e: unknown): StoreError {
    if (e instanceof StoreError) return e;
    const msg = `store ${this.url}: ${op} ${path}: ${(e as Error).message}`;
    return code(e) === 'ENOENT' ? new StoreNotFoundError(msg, { cause: e }) : new StoreError(msg, { cause: e });
  }

  async *list(prefix: string, opts: { signal?: AbortSignal } = {}): AsyncGenerator<StoreObject, void, undefined> {
    const top = this.localPath(prefix);
    try {
      if (!(await stat(top)).isDirectory()) return;
    } catch (e) {
      if (code(e) === 'ENOENT' || code(e) === 'ENOTDIR') return;
      throw this.fail('list', prefix, e);
    }
    // Depth first, names in byte order, directories where their names sort: the order a Go
    // broker's filepath.Walk lists the same tree in.
    const walk = async function* (this: FileStore, dir: string, rel: string): AsyncGenerator<StoreObject, void, undefined> {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if (code(e) === 'ENOENT') return; // removed while we walked
        throw this.fail('list', prefix + rel, e);
      }
      entries.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
      for (const ent of entries) {
        if (opts.signal?.aborted) throw abortError(opts.signal);
        const full = join(dir, ent.name);
        const path = rel + ent.name;
        if (ent.isDirectory()) {
          yield* walk.call(this, full, path + '/');
          continue;
        }
        let st;
        try {
          st = await stat(full);
        } catch (e) {
          if (code(e) === 'ENOENT') continue; // removed while we walked
          throw this.fail('list', prefix + path, e);
        }
        yield { path, modTime: st.mtime, size: st.size };
      }
    };
    yield* walk.call(this, top, '');
  }

  listFragments(journal: string, opts: { signal?: AbortSignal } = {}): AsyncIterable<FragmentListing> {
    return parseFragmentListing(this.url, journal, this.list(journal + '/', opts));
  }

  async exists(path: string): Promise<boolean> {
    try {
      await stat(this.localPath(path));
      return true;
    } catch (e) {
      if (code(e) === 'ENOENT') return false;
      throw this.fail('stat', path, e);
    }
  }

  async open(path: string, opts: OpenOptions = {}): Promise<Readable> {
    const start = opts.start ?? 0;
    if (!Number.isSafeInteger(start) || start < 0) throw new StoreError(`store ${this.url}: open ${path}: bad start ${start}`);
    if (opts.end !== undefined && (!Number.isSafeInteger(opts.end) || opts.end < 0)) {
      throw new StoreError(`store ${this.url}: open ${path}: bad end ${opts.end}`);
    }
    if (opts.signal?.aborted) throw abortError(opts.signal);
    let fh: FileHandle;
    try {
      fh = await open(this.localPath(path), 'r');
    } catch (e) {
      throw this.fail('open', path, e);
    }
    if (opts.end !== undefined && opts.end <= start) {
      await fh.close();
      return Readable.from([]);
    }
    const stream = fh.createReadStream({
      start,
      end: opts.end === undefined ? undefined : opts.end - 1, // inclusive
      highWaterMark: 1 << 20,
    });
    const signal = opts.signal;
    if (signal) {
      const onAbort = () => stream.destroy(abortError(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      stream.once('close', () => signal.removeEventListener('abort', onAbort));
    }
    return stream;
  }

  async get(path: string, opts: OpenOptions = {}): Promise<Buffer> {
    const stream = await this.open(path, opts);
    const parts: Buffer[] = [];
    try {
      for await (const c of stream) parts.push(c as Buffer);
    } catch (e) {
      throw this.fail('read', path, e);
    }
    return Buffer.concat(parts);
  }

  async put(path: string, content: PutContent, opts: PutOptions = {}): Promise<void> {
    // Like a Go broker, refuse to create the store's own directory: a missing one usually
    // means a wrong root or URL, which should fail loudly rather than scatter files.
    const base = resolve(join(this.root, this.prefix));
    try {
      if (!(await stat(base)).isDirectory()) throw new Error('not a directory');
    } catch (e) {
      throw new StoreError(`store ${this.url}: put ${path}: ${INVALID_DIR} ${base}: ${(e as Error).message}`, { cause: e });
    }
    const target = this.localPath(path);
    const dir = dirname(target);
    const tmp = join(dir, `.partial-${basename(target)}-${randomBytes(6).toString('hex')}`);
    let fh: FileHandle | undefined;
    try {
      await mkdir(dir, { recursive: true, mode: 0o750 });
      fh = await open(tmp, 'wx', 0o640);
      let n = 0;
      for await (const c of chunks(content)) {
        if (opts.signal?.aborted) throw abortError(opts.signal);
        let off = 0;
        while (off < c.length) off += (await fh.write(c, off, c.length - off)).bytesWritten;
        n += c.length;
      }
      if (opts.contentLength !== undefined && n !== opts.contentLength) {
        throw new StoreError(`store ${this.url}: put ${path}: content has ${n} bytes, expected ${opts.contentLength}`);
      }
      await fh.sync();
      await fh.close();
      fh = undefined;
      await rename(tmp, target);
    } catch (e) {
      await fh?.close().catch(() => undefined);
      await rm(tmp, { force: true }).catch(() => undefined);
      throw this.fail('put', path, e);
    }
  }

  async remove(path: string): Promise<void> {
    try {
      await unlink(this.localPath(path));
    } catch (e) {
      throw this.fail('remove', path, e);
    }
  }

  /** `file://` + the object path; file URLs need no signature and never expire. */
  async signGet(path: string, _ttlMs: number): Promise<string> {
    return 'file://' + this.objectPath(path);
  }

  health(opts: HealthOptions = {}): Promise<void> {
    return checkStoreHealth(this, opts);
  }

  isAuthError(err: unknown): boolean {
    for (let e = err; e; e = (e as { cause?: unknown }).cause) {
      const c = code(e);
      if (c === 'EACCES' || c === 'EPERM') return true;
      if (e instanceof Error && e.message.includes(INVALID_DIR)) return true;
      if (!(e instanceof Error)) break;
    }
    return false;
  }
}

/**
 * Open the object a signed `file://` URL names, under `root`: the URL's path is relative to the
 * root itself (what store `file:///` holds). Used for direct fragment reads.
 */
export function openFileURL(root: string, url: string | URL, opts: OpenOptions = {}): Promise<Readable> {
  const u = typeof url === 'string' ? new URL(url) : url;
  if (u.protocol !== 'file:') throw new StoreError(`${u.href} is not a file:// URL`);
  const path = decodeURIComponent(u.pathname).replace(/^\/+/, '');
  return new FileStore('file:///', { root }).open(path, opts);
}
