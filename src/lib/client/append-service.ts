// The append service: per-journal append queues with their retry policy, plus `appendStream`
// for one atomic append of a stream.
//
// Records for a journal are appended in input order, one append at a time per journal. An append
// streams queued records as they come, and commits once it holds `maxBatchBytes` or no record
// arrived for `lingerMs` (each append commits atomically). It keeps what it sent until the commit,
// so a failure after which the broker cannot have committed it (see appendMayHaveCommitted in
// appender.ts) is retried by replaying it: every record commits exactly once, or its journal
// fails. A journal's failure fails its queue and is reported by flush().
//
// Buffering. Records wait in memory up to `maxBufferedBytes` (queued, plus what appends under way
// keep for replay). Without `disk`, a fast producer then waits on `backpressure()`. With `disk`,
// records past the memory bound go to temporary files instead (one current file per journal
// queue, removed from the directory as soon as it is created, so only our descriptor keeps it:
// nothing is left behind by a crash), and the producer waits only once those files hold
// `disk.maxBytes`. A queue is a list of entries in record order, each either a record in memory
// or a run of whole records in a file, so order per journal holds whichever way a record went,
// and an append replays its file runs by reading them again. A file is closed (which frees its
// space) once every record in it has committed; a queue that keeps spilling while it drains
// starts a new file every `disk.fileBytes`, so space is given back as the backlog moves on.
// See docs/append-buffering.md.
import { EventEmitter } from 'node:events';
import { closeSync, openSync, read as fsRead, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AppendResponse } from '../protocol/gen/broker/protocol.js';
import { GazctlError } from '../protocol/errors.js';
import {
  appendMayHaveCommitted,
  describeAppendWait,
  isRetryableAppendError,
  isRetryableQueuedAppendError,
  MAX_APPEND_MESSAGE,
  type AppendOptions,
  type Appender,
} from './appender.js';
import type { AppendMetrics } from './append-metrics.js';
import { abortError, backoff, sleep } from './retry.js';

/** What the append service needs from its client (a JournalClient). */
export interface AppendClient {
  append(journal: string, opts?: AppendOptions): Appender;
}

/** A retry the service is about to make, and what it waits for (for a warning). */
export interface AppendRetryInfo {
  journal: string;
  attempt: number;
  delayMs: number;
  error: unknown;
  /** What the retry waits for, in words. */
  waitingFor: string;
}

/** Spilling queued records to temporary files (see the top of this module). */
export interface AppendDiskOptions {
  /** Directory of the temporary files (default: `os.tmpdir()`). */
  dir?: string;
  /** Bytes of the files (written, not yet freed) past which `backpressure()` waits (default 1 GiB). */
  maxBytes?: number;
  /** A queue's file is not extended past this; the next record starts a new file (default 64 MiB). */
  fileBytes?: number;
}

export interface AppendServiceOptions {
  /** Largest append (default 3 MiB; a larger record goes alone). */
  maxBatchBytes?: number;
  /**
   * Bytes buffered in memory (queued, or sent and not yet committed) before `backpressure()` waits,
   * or, with `disk`, before records go to disk instead (default 4 MiB).
   */
  maxBufferedBytes?: number;
  /** Spill records past `maxBufferedBytes` to temporary files (default: memory only). */
  disk?: AppendDiskOptions;
  /** Where the service reports its figures and counts (see append-metrics.ts; default: nowhere). */
  metrics?: AppendMetrics;
  /** How long an append waits for more records before it commits (default 5 ms). */
  lingerMs?: number;
  /** After each append commits: its journal, the bytes it held and the broker's answer. */
  onCommitted?: (journal: string, bytes: number, response: AppendResponse) => void;
  /** When a journal's queue fails for good (every later push to it throws `error`). */
  onFailed?: (journal: string, error: Error) => void;
  /** Time budget of each batch, retries included (0 or absent: none). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Failures worth retrying (default: all but terminal statuses and cancellation). */
  retryable?: (err: unknown) => boolean;
  /**
   * Retry an append even when the broker may have committed it (its records may then be in the
   * journal twice). Right for records whose readers drop re-sends, such as messages with UUIDs
   * (Gazette's own append service retries so); wrong for plain records (the default: false).
   */
  retryAmbiguous?: boolean;
  onRetry?: (info: AppendRetryInfo) => void;
  /** Overrides the backoff schedule (tests). */
  delay?: (attempt: number) => number;
}

/** What an append service holds at a moment (its metrics report these). */
export interface AppendBufferFigures {
  /** Bytes of records in memory: queued, or kept by appends under way for replay. */
  memoryBytes: number;
  /** Bytes written to its temporary files and not yet freed (files close once fully committed). */
  diskBytes: number;
  /** Temporary files open. */
  diskFiles: number;
  /** `disk.maxBytes`, or 0 without disk buffering. */
  diskLimitBytes: number;
  /** Bytes of records taken by appends under way (from memory or disk), not yet committed. */
  inflightBytes: number;
}

/** `backpressure()` gave up: the buffers stayed full for the caller's whole timeout. */
export class AppendWaitTimeoutError extends GazctlError {}

/** A temporary file of queued records could not be created, written or read. */
export class AppendBufferError extends GazctlError {}

/** Bytes gathered before they are written to a spill file in one call. */
const SPILL_WRITE_BYTES = 256 * 1024;

/**
 * A temporary file holding records of one journal queue. It is unlinked as soon as it is created:
 * the open descriptor keeps it alive, and closing it (or the process ending in any way) frees it.
 */
class SpillFile {
  /** Bytes added (written, or gathered to be written). */
  size = 0;
  /** Bytes of records in it that have not committed yet; at 0 the file is closed. */
  live = 0;
  private written = 0;
  private gathered: Buffer[] = [];
  closed = false;
  /**
   * Set when a write failed: the records gathered for it are lost, so reading them fails the
   * queue with this error (when the append reaches them), and later records of the queue are
   * refused at once (push throws it).
   */
  failure?: AppendBufferError;

  private constructor(
    private readonly fd: number,
    readonly dir: string,
  ) {}

  static create(dir: string): SpillFile {
    const path = join(dir, `gazctl-append-${randomBytes(8).toString('hex')}`);
    let fd: number;
    try {
      fd = openSync(path, 'wx+', 0o600);
    } catch (err) {
      throw new AppendBufferError(`cannot create an append buffer file in ${dir}: ${(err as Error).message}`, { cause: err });
    }
    try {
      unlinkSync(path);
    } catch (err) {
      closeSync(fd);
      throw new AppendBufferError(`cannot unlink append buffer file ${path}: ${(err as Error).message}`, { cause: err });
    }
    return new SpillFile(fd, dir);
  }

  /** Adds `data` at the end; returns where it starts. */
  add(data: Buffer): number {
    const at = this.size;
    this.gathered.push(data);
    this.size += data.length;
    if (this.size - this.written >= SPILL_WRITE_BYTES) this.flush();
    return at;
  }

  /** Writes what was gathered (synchronously: `push` never waits, and page-cache writes are quick). */
  private flush(): void {
    if (this.gathered.length === 0 || this.failure) return;
    const buf = this.gathered.length === 1 ? this.gathered[0]! : Buffer.concat(this.gathered);
    this.gathered = [];
    try {
      for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off, buf.length - off, this.written + off);
    } catch (err) {
      this.failure = new AppendBufferError(`cannot write to an append buffer file in ${this.dir}: ${(err as Error).message}`, { cause: err });
      return;
    }
    this.written += buf.length;
  }

  /** Reads `len` bytes at `pos` (a fresh buffer: the transport may hold on to it). */
  async read(pos: number, len: number): Promise<Buffer> {
    if (pos + len > this.written) this.flush();
    if (this.failure && pos + len > this.written) throw this.failure;
    const buf = Buffer.allocUnsafe(len);
    for (let off = 0; off < len; ) {
      const n = await new Promise<number>((resolve, reject) =>
        fsRead(this.fd, buf, off, len - off, pos + off, (err, bytes) => (err ? reject(err) : resolve(bytes))),
      ).catch((err: Error) => {
        throw new AppendBufferError(`cannot read an append buffer file in ${this.dir}: ${err.message}`, { cause: err });
      });
      if (n === 0) throw new AppendBufferError(`append buffer file in ${this.dir} ended early (at ${pos + off} of ${pos + len})`);
      off += n;
    }
    return buf;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.gathered = [];
    closeSync(this.fd);
  }
}

/** Whole records in a spill file. */
interface Run {
  file: SpillFile;
  pos: number;
  len: number;
}

/** A record (or run of records) in memory, or a run of records in a spill file. */
type Entry = Buffer | Run;

function entryLength(e: Entry): number {
  return Buffer.isBuffer(e) ? e.length : e.len;
}

/**
 * A first-in first-out list. Array.shift() copies the whole array once it is large (tens of
 * thousands of small records: a 2-million-record backlog took minutes to drain that way).
 */
class Fifo<T> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  first(): T | undefined {
    return this.items[this.head];
  }

  last(): T | undefined {
    return this.length > 0 ? this.items[this.items.length - 1] : undefined;
  }

  shift(): T | undefined {
    if (this.length === 0) return undefined;
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined as T; // let it be collected
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Removes and returns everything. */
  drain(): T[] {
    const out = this.items.slice(this.head);
    this.items = [];
    this.head = 0;
    return out;
  }
}

interface Queue {
  entries: Fifo<Entry>;
  bytes: number;
  running: boolean;
  error?: Error;
  /** The file this queue spills to now (a new one is started when absent). */
  file?: SpillFile;
}

export class AppendService {
  private queues = new Map<string, Queue>();
  /** Bytes of records in memory (queued or kept for replay). */
  private memoryBytes = 0;
  /** Sizes of the open spill files. */
  private diskBytes = 0;
  private diskFiles = 0;
  private inflightBytes = 0;
  private inflight = new Set<Promise<void>>();
  private events = new EventEmitter();
  private readonly maxBatch: number;
  private readonly maxBuffered: number;
  private readonly lingerMs: number;
  private readonly disk?: { dir: string; maxBytes: number; fileBytes: number };
  /** Aborts appends and retry sleeps on close(), or when the caller's signal aborts. */
  private readonly stop = new AbortController();
  private closed = false;
  /** Set by flush(): no more records are coming, so appends commit without lingering. */
  private flushing = false;

  constructor(
    private readonly client: AppendClient,
    private readonly opts: AppendServiceOptions = {},
  ) {
    this.maxBatch = opts.maxBatchBytes ?? 3 * 1024 * 1024;
    this.maxBuffered = opts.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.lingerMs = opts.lingerMs ?? 5;
    if (opts.disk) {
      this.disk = {
        dir: opts.disk.dir ?? tmpdir(),
        maxBytes: opts.disk.maxBytes ?? 1024 * 1024 * 1024,
        fileBytes: opts.disk.fileBytes ?? 64 * 1024 * 1024,
      };
    }
    this.events.setMaxListeners(0);
    const outer = opts.signal;
    if (outer) {
      if (outer.aborted) this.stop.abort(outer.reason);
      else outer.addEventListener('abort', () => this.stop.abort(outer.reason), { once: true });
    }
    opts.metrics?.track(this);
  }

  /** What the service holds now. */
  figures(): AppendBufferFigures {
    return {
      memoryBytes: this.memoryBytes,
      diskBytes: this.diskBytes,
      diskFiles: this.diskFiles,
      diskLimitBytes: this.disk?.maxBytes ?? 0,
      inflightBytes: this.inflightBytes,
    };
  }

  /** Queues one record (or a run of whole records) for `journal`. Never waits; see `backpressure`. */
  push(journal: string, data: Buffer): void {
    let q = this.queues.get(journal);
    if (!q) {
      q = { entries: new Fifo<Entry>(), bytes: 0, running: false };
      this.queues.set(journal, q);
    }
    if (q.error) throw q.error;
    if (this.closed) throw closedError();
    this.flushing = false;
    if (this.disk && data.length > 0 && this.memoryBytes + data.length > this.maxBuffered) this.spill(q, data);
    else {
      q.entries.push(data);
      this.memoryBytes += data.length;
    }
    q.bytes += data.length;
    if (!q.running) this.start(journal, q);
    else this.events.emit(`more:${journal}`);
  }

  /** Adds `data` to the queue's spill file, extending the queue's last run when it can. */
  private spill(q: Queue, data: Buffer): void {
    const disk = this.disk!;
    let f = q.file;
    if (f?.failure) throw f.failure;
    if (!f) {
      f = SpillFile.create(disk.dir);
      q.file = f;
      this.diskFiles++;
    }
    const pos = f.add(data);
    f.live += data.length;
    this.diskBytes += data.length;
    const last = q.entries.last();
    if (last !== undefined && !Buffer.isBuffer(last) && last.file === f && last.pos + last.len === pos && last.len + data.length <= this.maxBatch) {
      last.len += data.length;
    } else q.entries.push({ file: f, pos, len: data.length });
    // Later records start a new file, so this one can be freed once its records committed.
    if (f.size >= disk.fileBytes) q.file = undefined;
  }

  /** Gives back what `entries` held (they committed, or were dropped). */
  private release(q: Queue, entries: Entry[]): void {
    for (const e of entries) {
      if (Buffer.isBuffer(e)) {
        this.memoryBytes -= e.length;
        continue;
      }
      e.file.live -= e.len;
      if (e.file.live === 0 && !e.file.closed) {
        e.file.close();
        this.diskBytes -= e.file.size;
        this.diskFiles--;
        if (q.file === e.file) q.file = undefined;
      }
    }
  }

  /** Whether producers should wait: the disk buffer (with disk) or the memory buffer is over its limit. */
  private full(): boolean {
    return this.disk ? this.diskBytes > this.disk.maxBytes : this.memoryBytes > this.maxBuffered;
  }

  /**
   * Resolves once the buffers are under their limit; throws a journal's failure. With
   * `timeoutMs` (> 0), a wait that lasts longer throws AppendWaitTimeoutError (and is counted in
   * the metrics); `signal` ends the wait too.
   */
  async backpressure(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    const started = Date.now();
    const deadline = opts.timeoutMs !== undefined && opts.timeoutMs > 0 ? started + opts.timeoutMs : undefined;
    while (this.full() && !this.firstError() && !this.closed) {
      if (opts.signal?.aborted) throw abortError(opts.signal);
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) {
        this.opts.metrics?.waitTimedOut();
        const f = this.figures();
        const what = this.disk
          ? `${formatBytes(f.diskBytes)} buffered on disk in ${this.disk.dir} (limit ${formatBytes(this.disk.maxBytes)})`
          : `${formatBytes(f.memoryBytes)} buffered in memory (limit ${formatBytes(this.maxBuffered)})`;
        throw new AppendWaitTimeoutError(`appends are not keeping up: waited ${Date.now() - started} ms for ${what} to drain`);
      }
      await this.nextDrain(left, opts.signal);
    }
    const err = this.firstError() ?? (this.closed ? closedError() : undefined);
    if (err) throw err;
  }

  /** Resolves at the next release of buffered bytes, after `ms` (if given), or on abort. */
  private nextDrain(ms: number | undefined, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.events.off('drained', done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      this.events.on('drained', done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  private firstError(): Error | undefined {
    for (const q of this.queues.values()) if (q.error) return q.error;
    return undefined;
  }

  /** Resolves true when a record for `journal` is queued within the linger time. */
  private waitForMore(journal: string, q: Queue): Promise<boolean> {
    // Don't linger when no record can come: input ended, or the producer waits on us.
    if (q.entries.length > 0) return Promise.resolve(true);
    if (this.flushing || this.full() || this.lingerMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const ev = `more:${journal}`;
      const done = (more: boolean) => {
        clearTimeout(timer);
        this.events.off(ev, onMore);
        this.events.off('flushing', onFlush);
        resolve(more);
      };
      const onMore = () => done(true);
      const onFlush = () => done(q.entries.length > 0);
      const timer = setTimeout(() => done(q.entries.length > 0), this.lingerMs);
      this.events.on(ev, onMore);
      this.events.on('flushing', onFlush);
    });
  }

  /** Streams one entry into an append (a file run is read again on every attempt). */
  private async send(a: Appender, e: Entry): Promise<void> {
    if (Buffer.isBuffer(e)) return a.write(e);
    for (let at = 0; at < e.len; at += MAX_APPEND_MESSAGE) await a.write(await e.file.read(e.pos + at, Math.min(MAX_APPEND_MESSAGE, e.len - at)));
  }

  /**
   * One append of the records queued for `journal`: streams them as they arrive, commits at
   * `maxBatch` bytes or when none arrived for the linger time, and retries (replaying what it
   * sent) while the broker cannot have committed it. `taken` holds the entries it took.
   */
  private async appendBatch(journal: string, q: Queue, taken: { entries: Entry[]; bytes: number }): Promise<AppendResponse> {
    const o = this.opts;
    const retryable = o.retryable ?? isRetryableQueuedAppendError;
    const deadline = o.timeoutMs !== undefined && o.timeoutMs > 0 ? Date.now() + o.timeoutMs : undefined;
    const kept = taken.entries;
    /** Moves queued entries into the batch (whole ones, up to maxBatch; at least one). */
    const take = (): boolean => {
      let took = false;
      while (q.entries.length > 0 && (kept.length === 0 || taken.bytes + entryLength(q.entries.first()!) <= this.maxBatch)) {
        const e = q.entries.shift()!;
        const n = entryLength(e);
        q.bytes -= n;
        kept.push(e);
        taken.bytes += n;
        this.inflightBytes += n;
        took = true;
      }
      return took;
    };
    for (let attempt = 0; ; attempt++) {
      const a = this.client.append(journal, { signal: this.stop.signal });
      try {
        let sent = 0;
        for (;;) {
          while (sent < kept.length) await this.send(a, kept[sent++]!);
          if (take()) continue;
          if (taken.bytes >= this.maxBatch || q.entries.length > 0) break; // full: the next record starts the next append
          if (!(await this.waitForMore(journal, q))) break;
        }
        return await a.commit();
      } catch (err) {
        a.abort();
        if (err instanceof AppendBufferError || !retryable(err) || (!o.retryAmbiguous && appendMayHaveCommitted(err, a.commitSent))) throw err;
        const ms = (o.delay ?? backoff)(attempt);
        if (deadline !== undefined && Date.now() + ms >= deadline) throw err;
        o.metrics?.retried();
        o.onRetry?.({ journal, attempt, delayMs: ms, error: err, waitingFor: describeAppendWait(err) });
        await sleep(ms, this.stop.signal);
      }
    }
  }

  private start(journal: string, q: Queue): void {
    q.running = true;
    const p = (async () => {
      while (q.entries.length > 0 && !q.error) {
        const taken = { entries: [] as Entry[], bytes: 0 };
        try {
          const res = await this.appendBatch(journal, q, taken);
          this.opts.metrics?.appended(taken.bytes);
          this.opts.onCommitted?.(journal, taken.bytes, res);
        } catch (err) {
          q.error ??= err as Error;
          this.opts.onFailed?.(journal, q.error);
        }
        this.inflightBytes -= taken.bytes;
        this.release(q, taken.entries);
        this.events.emit('drained');
      }
      if (q.error) this.drop(q);
      q.running = false;
    })();
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  /** Drops what a failed queue still holds (its records will not be appended). */
  private drop(q: Queue): void {
    const entries = q.entries.drain();
    q.bytes = 0;
    this.release(q, entries);
    this.events.emit('drained');
  }

  /** Waits for every queued record to commit; throws the first failure. */
  async flush(): Promise<void> {
    this.flushing = true;
    this.events.emit('flushing');
    while (this.inflight.size > 0) await Promise.all([...this.inflight]);
    const err = this.firstError();
    if (err) throw err;
  }

  /**
   * Stops the service: appends under way are aborted (rolled back), records not yet committed are
   * dropped (their queues fail with "closed"), and the temporary files are closed, which frees
   * them. Call flush() first to append everything.
   */
  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      for (const [journal, q] of this.queues) {
        if (q.error) continue;
        q.error = closedError();
        if (!q.running) this.opts.onFailed?.(journal, q.error);
        this.drop(q);
      }
      this.stop.abort(closedError());
    }
    while (this.inflight.size > 0) await Promise.all([...this.inflight]);
    this.opts.metrics?.untrack(this);
  }
}

function closedError(): GazctlError {
  return new GazctlError('the append service is closed');
}

function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

/** A failure reading the source of {@link appendStream} (never retried). */
export class AppendSourceError extends Error {}

export interface AppendStreamOptions extends Omit<AppendServiceOptions, 'maxBatchBytes' | 'maxBufferedBytes' | 'onCommitted'> {
  /**
   * Bytes of the stream kept so a failed append can be replayed (default 8 MiB). Past it, the
   * kept bytes are dropped and a failure is final: the stream cannot be read again.
   */
  replayBytes?: number;
  /** Called after each chunk is written. */
  onWrite?: (bytes: number) => void;
}

/**
 * Appends everything `source` yields to `journal` as one atomic append. While what was read so
 * far fits in `replayBytes`, a failure after which the broker cannot have committed (the same
 * rule as the append service) is retried by replaying it; that covers the failover case, where
 * the broker refuses the append as soon as the stream opens.
 */
export async function appendStream(
  client: AppendClient,
  journal: string,
  source: AsyncIterable<Uint8Array>,
  opts: AppendStreamOptions = {},
): Promise<AppendResponse> {
  const limit = opts.replayBytes ?? 8 * 1024 * 1024;
  const it = source[Symbol.asyncIterator]();
  let kept: Uint8Array[] = [];
  let keptBytes = 0;
  let replayable = true;
  let eof = false;
  const deadline = opts.timeoutMs !== undefined && opts.timeoutMs > 0 ? Date.now() + opts.timeoutMs : undefined;
  const retryable = opts.retryable ?? isRetryableAppendError;
  for (let attempt = 0; ; attempt++) {
    const a = client.append(journal, { signal: opts.signal });
    try {
      for (const k of kept) await a.write(k);
      while (!eof) {
        let r: IteratorResult<Uint8Array>;
        try {
          r = await it.next();
        } catch (err) {
          throw new AppendSourceError((err as Error).message, { cause: err });
        }
        if (r.done) {
          eof = true;
          break;
        }
        if (replayable) {
          kept.push(r.value);
          keptBytes += r.value.length;
          if (keptBytes > limit) {
            replayable = false;
            kept = [];
          }
        }
        await a.write(r.value);
        opts.onWrite?.(r.value.length);
      }
      return await a.commit();
    } catch (err) {
      a.abort();
      if (err instanceof AppendSourceError || !replayable || !retryable(err) || appendMayHaveCommitted(err, a.commitSent)) throw err;
      const ms = (opts.delay ?? backoff)(attempt);
      if (deadline !== undefined && Date.now() + ms >= deadline) throw err;
      opts.onRetry?.({ journal, attempt, delayMs: ms, error: err, waitingFor: describeAppendWait(err) });
      await sleep(ms, opts.signal);
    }
  }
}
