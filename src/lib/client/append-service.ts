// The append service: per-journal append queues with their retry policy, plus `appendStream`
// for one atomic append of a stream.
//
// Records for a journal are appended in input order, one append at a time per journal. An append
// streams queued records as they come, and commits once it holds `maxBatchBytes` or no record
// arrived for `lingerMs` (each append commits atomically). It keeps what it sent until the commit,
// so a failure after which the broker cannot have committed it (see appendMayHaveCommitted in
// appender.ts) is retried by replaying it: every record commits exactly once, or its journal
// fails. A journal's failure fails its queue and is reported by flush(). Buffered bytes (queued
// plus kept for replay) are bounded so a fast producer waits on `backpressure()`.
import { EventEmitter, once } from 'node:events';
import type { AppendResponse } from '../protocol/gen/broker/protocol.js';
import {
  appendMayHaveCommitted,
  describeAppendWait,
  isRetryableAppendError,
  isRetryableQueuedAppendError,
  type AppendOptions,
  type Appender,
} from './appender.js';
import { backoff, sleep } from './retry.js';

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

export interface AppendServiceOptions {
  /** Largest append (default 3 MiB; a larger record goes alone). */
  maxBatchBytes?: number;
  /** Bytes buffered (queued, or sent and not yet committed) before `backpressure()` waits (default 4 MiB). */
  maxBufferedBytes?: number;
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

interface Queue {
  chunks: Buffer[];
  bytes: number;
  running: boolean;
  error?: Error;
}

export class AppendService {
  private queues = new Map<string, Queue>();
  private buffered = 0;
  private inflight = new Set<Promise<void>>();
  private events = new EventEmitter();
  private readonly maxBatch: number;
  private readonly maxBuffered: number;
  private readonly lingerMs: number;
  /** Set by flush(): no more records are coming, so appends commit without lingering. */
  private flushing = false;

  constructor(
    private readonly client: AppendClient,
    private readonly opts: AppendServiceOptions = {},
  ) {
    this.maxBatch = opts.maxBatchBytes ?? 3 * 1024 * 1024;
    this.maxBuffered = opts.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.lingerMs = opts.lingerMs ?? 5;
  }

  /** Queues one record (or a run of whole records) for `journal`. Never waits; see `backpressure`. */
  push(journal: string, data: Buffer): void {
    let q = this.queues.get(journal);
    if (!q) {
      q = { chunks: [], bytes: 0, running: false };
      this.queues.set(journal, q);
    }
    if (q.error) throw q.error;
    this.flushing = false;
    q.chunks.push(data);
    q.bytes += data.length;
    this.buffered += data.length;
    if (!q.running) this.start(journal, q);
    else this.events.emit(`more:${journal}`);
  }

  /** Resolves once buffered bytes are under the limit; throws a journal's failure. */
  async backpressure(): Promise<void> {
    while (this.buffered > this.maxBuffered && !this.firstError()) await once(this.events, 'drained');
    const err = this.firstError();
    if (err) throw err;
  }

  private firstError(): Error | undefined {
    for (const q of this.queues.values()) if (q.error) return q.error;
    return undefined;
  }

  /** Resolves true when a record for `journal` is queued within the linger time. */
  private waitForMore(journal: string, q: Queue): Promise<boolean> {
    // Don't linger when no record can come: input ended, or the producer waits on us.
    if (q.chunks.length > 0) return Promise.resolve(true);
    if (this.flushing || this.buffered > this.maxBuffered || this.lingerMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const ev = `more:${journal}`;
      const done = (more: boolean) => {
        clearTimeout(timer);
        this.events.off(ev, onMore);
        this.events.off('flushing', onFlush);
        resolve(more);
      };
      const onMore = () => done(true);
      const onFlush = () => done(q.chunks.length > 0);
      const timer = setTimeout(() => done(q.chunks.length > 0), this.lingerMs);
      this.events.on(ev, onMore);
      this.events.on('flushing', onFlush);
    });
  }

  /**
   * One append of the records queued for `journal`: streams them as they arrive, commits at
   * `maxBatch` bytes or when none arrived for the linger time, and retries (replaying what it
   * sent) while the broker cannot have committed it. `taken.bytes` counts the records it took.
   */
  private async appendBatch(journal: string, q: Queue, taken: { bytes: number }): Promise<AppendResponse> {
    const o = this.opts;
    const retryable = o.retryable ?? isRetryableQueuedAppendError;
    const deadline = o.timeoutMs !== undefined && o.timeoutMs > 0 ? Date.now() + o.timeoutMs : undefined;
    const kept: Buffer[] = [];
    let bytes = 0;
    /** Moves queued records into the batch (whole records, up to maxBatch; at least one). */
    const take = (): boolean => {
      let took = false;
      while (q.chunks.length > 0 && (kept.length === 0 || bytes + q.chunks[0]!.length <= this.maxBatch)) {
        const c = q.chunks.shift()!;
        q.bytes -= c.length;
        kept.push(c);
        bytes += c.length;
        taken.bytes = bytes;
        took = true;
      }
      return took;
    };
    for (let attempt = 0; ; attempt++) {
      const a = this.client.append(journal, { signal: o.signal });
      try {
        let sent = 0;
        for (;;) {
          while (sent < kept.length) await a.write(kept[sent++]!);
          if (take()) continue;
          if (bytes >= this.maxBatch || q.chunks.length > 0) break; // full: the next record starts the next append
          if (!(await this.waitForMore(journal, q))) break;
        }
        return await a.commit();
      } catch (err) {
        a.abort();
        if (!retryable(err) || (!o.retryAmbiguous && appendMayHaveCommitted(err, a.commitSent))) throw err;
        const ms = (o.delay ?? backoff)(attempt);
        if (deadline !== undefined && Date.now() + ms >= deadline) throw err;
        o.onRetry?.({ journal, attempt, delayMs: ms, error: err, waitingFor: describeAppendWait(err) });
        await sleep(ms, o.signal);
      }
    }
  }

  private start(journal: string, q: Queue): void {
    q.running = true;
    const p = (async () => {
      while (q.chunks.length > 0 && !q.error) {
        const taken = { bytes: 0 };
        try {
          const res = await this.appendBatch(journal, q, taken);
          this.opts.onCommitted?.(journal, taken.bytes, res);
        } catch (err) {
          q.error = err as Error;
          this.opts.onFailed?.(journal, q.error);
        }
        this.buffered -= taken.bytes;
        this.events.emit('drained');
      }
      if (q.error) {
        this.buffered -= q.bytes;
        q.chunks = [];
        q.bytes = 0;
        this.events.emit('drained');
      }
      q.running = false;
    })();
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  /** Waits for every queued record to commit; throws the first failure. */
  async flush(): Promise<void> {
    this.flushing = true;
    this.events.emit('flushing');
    while (this.inflight.size > 0) await Promise.all([...this.inflight]);
    const err = this.firstError();
    if (err) throw err;
  }
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
