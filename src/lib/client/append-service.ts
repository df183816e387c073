// Per-journal append queues. Records for a journal are appended in input order; records that
// queue up while an append is in flight are batched into the next append (each batch commits
// atomically, cut at `maxBatchBytes`). A journal's first failure fails its queue and is
// reported by flush(). Total buffered bytes are bounded so a fast producer waits.
import { once } from 'node:events';
import { EventEmitter } from 'node:events';

export type AppendBatch = (journal: string, chunks: Buffer[], bytes: number) => Promise<void>;

interface Queue {
  chunks: Buffer[];
  bytes: number;
  running: boolean;
  error?: Error;
}

export interface AppendServiceOptions {
  maxBatchBytes?: number;
  maxBufferedBytes?: number;
  onCommitted?: (journal: string, bytes: number) => void;
}

export class AppendService {
  private queues = new Map<string, Queue>();
  private buffered = 0;
  private inflight = new Set<Promise<void>>();
  private events = new EventEmitter();
  private readonly maxBatch: number;
  private readonly maxBuffered: number;

  constructor(private readonly appendBatch: AppendBatch, private readonly opts: AppendServiceOptions = {}) {
    this.maxBatch = opts.maxBatchBytes ?? 64 * 1024 * 1024;
    this.maxBuffered = opts.maxBufferedBytes ?? 128 * 1024 * 1024;
  }

  /** Queues one record (or a run of whole records) for `journal`. Never waits; see `backpressure`. */
  push(journal: string, data: Buffer): void {
    let q = this.queues.get(journal);
    if (!q) {
      q = { chunks: [], bytes: 0, running: false };
      this.queues.set(journal, q);
    }
    if (q.error) throw q.error;
    q.chunks.push(data);
    q.bytes += data.length;
    this.buffered += data.length;
    if (!q.running) this.start(journal, q);
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

  private start(journal: string, q: Queue): void {
    q.running = true;
    const p = (async () => {
      while (q.chunks.length > 0 && !q.error) {
        // Take whole records up to the batch limit (always at least one).
        let take = 0;
        let bytes = 0;
        while (take < q.chunks.length && (take === 0 || bytes + q.chunks[take]!.length <= this.maxBatch)) {
          bytes += q.chunks[take]!.length;
          take++;
        }
        const batch = q.chunks.splice(0, take);
        q.bytes -= bytes;
        try {
          await this.appendBatch(journal, batch, bytes);
          this.opts.onCommitted?.(journal, bytes);
        } catch (err) {
          q.error = err as Error;
        }
        this.buffered -= bytes;
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
    while (this.inflight.size > 0) await Promise.all([...this.inflight]);
    const err = this.firstError();
    if (err) throw err;
  }
}
