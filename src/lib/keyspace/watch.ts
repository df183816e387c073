// A prefix watch that never ends by itself.
//
// It delivers every change under the prefix after a starting revision, one revision at a time
// and in order, and it remembers the last revision it delivered. Whatever breaks the stream —
// etcd going away, a transport EOF, a stream etcd cancels (for instance on leader loss), a
// failed reconnect — it waits a little (doubling up to a cap) and opens a new stream starting
// right after that revision, so nothing is missed or repeated. The one thing resuming cannot
// fix is compaction: when etcd no longer has the history after our revision, the watch lists
// the prefix afresh, hands that snapshot and the size of the gap to `onResync`, and carries on
// after the snapshot's revision.
//
// It ends only when closed (close(), its AbortSignal, or the client's close()), or when one of
// the caller's callbacks throws; then `done` rejects with that error.
import type { IWatchResponse } from 'etcd3';

import { sleep } from '../concurrency.js';
import type { Keyspace } from './client.js';
import { decodeKv, prefixRangeEnd, type KeyValue } from './kv.js';

export interface WatchEvent {
  type: 'put' | 'delete';
  /** The key after the change; for a delete, key and modRevision (the deletion's) only. */
  kv: KeyValue;
  /** The key before the change, when asked for with `prevKv` and etcd still had it. */
  prevKv?: KeyValue;
}

/** Every change of one revision under the prefix. */
export interface WatchChanges {
  revision: bigint;
  events: WatchEvent[];
}

/** The history after `missedAfter` was compacted away: the prefix as of `revision`. */
export interface WatchResync {
  /** Last revision delivered before the gap. */
  missedAfter: bigint;
  /** etcd's compaction revision: history below it is gone. */
  compactRevision: bigint;
  /** Revision of the snapshot; changes are delivered again from the next one. */
  revision: bigint;
  /** Every key under the prefix at `revision`. */
  kvs: KeyValue[];
}

export interface WatchPrefixOptions {
  /**
   * Deliver changes made after this revision. Default: the revision current when the watch
   * first reaches etcd, which can be later than the call; pass one to be sure of a start.
   */
  afterRevision?: bigint;
  /** Called for each revision with changes under the prefix, awaited before the next. */
  onChanges(changes: WatchChanges): void | Promise<void>;
  /** Called when a gap was caused by compaction; see {@link WatchResync}. */
  onResync(resync: WatchResync): void | Promise<void>;
  /** Called before each retry with what went wrong; informational. */
  onRetry?(err: Error, attempt: number, delayMs: number): void;
  /** Include the previous key-values in events. */
  prevKv?: boolean;
  signal?: AbortSignal;
  /** Retry delays: from `minMs` (default 100), doubling up to `maxMs` (default 2000). */
  backoff?: { minMs?: number; maxMs?: number };
}

class Compacted extends Error {
  constructor(readonly compactRevision: bigint) {
    super(`watch history compacted up to revision ${compactRevision}`);
  }
}

class CallbackFailed extends Error {
  constructor(readonly error: unknown) {
    super('a watch callback failed');
  }
}

/** A queue of stream responses that one consumer awaits. */
class Inbox<T> {
  private items: T[] = [];
  private wake: (() => void) | undefined;
  push(x: T): void {
    this.items.push(x);
    this.wake?.();
  }
  async next(): Promise<T> {
    while (this.items.length === 0) await new Promise<void>((r) => (this.wake = r));
    this.wake = undefined;
    return this.items.shift()!;
  }
}

const big = (s: string | undefined): bigint => (s ? BigInt(s) : 0n);

export class PrefixWatch {
  private readonly stop = new AbortController();
  private rev: bigint | undefined;
  private attempt = 0;
  /** Resolves when the watch is closed; rejects when a callback threw. */
  readonly done: Promise<void>;

  /** @internal Use {@link Keyspace.watchPrefix}. */
  constructor(
    private readonly ks: Keyspace,
    readonly prefix: string,
    private readonly opts: WatchPrefixOptions,
  ) {
    this.rev = opts.afterRevision;
    const stopNow = () => this.stop.abort();
    const signals = [opts.signal, ks.closeSignal].filter((s): s is AbortSignal => s !== undefined);
    for (const s of signals) {
      if (s.aborted) stopNow();
      else s.addEventListener('abort', stopNow, { once: true });
    }
    this.done = this.run().finally(() => {
      for (const s of signals) s.removeEventListener('abort', stopNow);
    });
  }

  /** The last revision delivered (or resynced to); undefined until the start revision is known. */
  get revision(): bigint | undefined {
    return this.rev;
  }

  /** Stop watching. `done` resolves once the stream is gone. */
  close(): Promise<void> {
    this.stop.abort();
    return this.done.catch(() => undefined);
  }

  private async run(): Promise<void> {
    const signal = this.stop.signal;
    const minMs = this.opts.backoff?.minMs ?? 100;
    const maxMs = this.opts.backoff?.maxMs ?? 2000;
    let compacted: bigint | undefined;
    while (!signal.aborted) {
      try {
        if (this.rev === undefined) this.rev = await this.ks.revision();
        if (compacted !== undefined) {
          await this.resync(compacted);
          compacted = undefined;
        }
        await this.session(this.rev);
      } catch (e) {
        if (signal.aborted) break;
        if (e instanceof CallbackFailed) throw e.error;
        if (e instanceof Compacted) {
          compacted = e.compactRevision;
          continue;
        }
        this.attempt++;
        const delay = Math.min(maxMs, minMs * 2 ** Math.min(this.attempt - 1, 20));
        this.opts.onRetry?.(e instanceof Error ? e : new Error(String(e)), this.attempt, delay);
        // Rejects only once closed, which ends the loop.
        await sleep(delay, signal).catch(() => undefined);
      }
    }
  }

  private async callback(fn: () => void | Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      throw new CallbackFailed(e);
    }
  }

  private async resync(compactRevision: bigint): Promise<void> {
    const { kvs, revision } = await this.ks.range(this.prefix);
    const missedAfter = this.rev!;
    await this.callback(() => this.opts.onResync({ missedAfter, compactRevision, revision, kvs }));
    this.rev = revision;
  }

  /** One watch stream from `after + 1`; returns only by throwing. */
  private async session(after: bigint): Promise<void> {
    const signal = this.stop.signal;
    const inbox = new Inbox<IWatchResponse | Error>();
    const stream = await this.ks.openWatchStream();
    stream.on('data', (r) => inbox.push(r));
    stream.on('error', (e) => inbox.push(e));
    stream.on('end', () => inbox.push(new Error('watch stream ended')));
    const onAbort = () => inbox.push(new Error('watch closed'));
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      stream.write({
        create_request: {
          key: Buffer.from(this.prefix),
          range_end: prefixRangeEnd(this.prefix),
          start_revision: (after + 1n).toString(),
          progress_notify: true,
          prev_kv: this.opts.prevKv ?? false,
        },
      });
      for (;;) {
        const r = await inbox.next();
        if (r instanceof Error) throw r;
        if (signal.aborted) throw new Error('watch closed');
        const compact = big(r.compact_revision);
        if (compact > 0n) throw new Compacted(compact);
        if (r.canceled) throw new Error(`etcd canceled the watch: ${r.cancel_reason || 'no reason given'}`);
        if (r.created) {
          this.attempt = 0; // a working stream resets the back-off
          continue;
        }
        if (r.events.length === 0) {
          // A progress notification: everything up to the header revision has been sent.
          const rev = big(r.header?.revision);
          if (rev > this.rev!) this.rev = rev;
          continue;
        }
        await this.deliver(r);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      try {
        stream.cancel();
      } catch {
        // already gone
      }
    }
  }

  private async deliver(r: IWatchResponse): Promise<void> {
    let batch: WatchChanges | undefined;
    const flush = async () => {
      if (!batch) return;
      const b = batch;
      batch = undefined;
      if (b.revision <= this.rev!) return; // never deliver a revision twice
      await this.callback(() => this.opts.onChanges(b));
      this.rev = b.revision;
    };
    for (const ev of r.events) {
      const kv = decodeKv(ev.kv);
      const event: WatchEvent = { type: ev.type === 'Delete' ? 'delete' : 'put', kv };
      if (ev.prev_kv && ev.prev_kv.key && ev.prev_kv.key.length > 0) event.prevKv = decodeKv(ev.prev_kv);
      if (batch && batch.revision !== kv.modRevision) await flush();
      batch ??= { revision: kv.modRevision, events: [] };
      batch.events.push(event);
    }
    await flush();
  }
}
