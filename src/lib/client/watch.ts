// A watched listing: the journals matching a selector, kept current by a List watch.
import { EventEmitter } from 'node:events';
import type { Header, LabelSelector, ListResponse } from '../protocol/gen/broker/protocol.js';
import type { CallOptions } from './rpc.js';

/** What a JournalWatch needs from its client. */
export interface WatchSource {
  list(selector: LabelSelector, opts?: CallOptions): Promise<ListResponse>;
  watch(selector: LabelSelector, opts?: Omit<CallOptions, 'timeoutMs'> & { resume?: Header }): AsyncGenerator<ListResponse, void, undefined>;
}

/**
 * The journals matching a selector, kept current. `ready()` resolves with the first snapshot: a
 * List within the time budget of the options (so an unreachable service fails in time). After
 * that a watch, which retries by itself, replaces `snapshot` whenever the listing changes and
 * emits 'change'. Iterating yields the first snapshot, then each newer one (a slow consumer
 * skips to the latest). `close()` ends the watch; a failing watch rejects `done`, ends the
 * iteration with that error and emits 'error' when someone listens.
 */
export class JournalWatch extends EventEmitter implements AsyncIterable<ListResponse> {
  /** The latest snapshot (undefined until the first one). */
  snapshot: ListResponse | undefined;
  /** Snapshots received so far. */
  version = 0;
  private readonly ac = new AbortController();
  private readonly first: Promise<ListResponse>;
  /** Settles when the watch ends: resolves on close(), rejects with a watch failure. */
  readonly done: Promise<void>;
  private failure: unknown;
  private readonly signal: AbortSignal;

  constructor(source: WatchSource, selector: LabelSelector, opts: CallOptions = {}) {
    super();
    const signal = opts.signal ? AbortSignal.any([opts.signal, this.ac.signal]) : this.ac.signal;
    this.signal = signal;
    const first = source.list(selector, { ...opts, signal });
    first.catch(() => undefined);
    this.first = first;
    this.done = (async () => {
      let snap: ListResponse;
      try {
        snap = await first;
      } catch (err) {
        if (signal.aborted) return;
        throw err;
      }
      this.update(snap);
      // Let the caller act on the first snapshot (a read sends its first RPC) before the watch's
      // call is made, which costs grpc-js some ms the first time. The watch resumes from the
      // snapshot's header, so no change in between is missed.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (signal.aborted) return;
      try {
        for await (const next of source.watch(selector, { signal, retry: opts.retry, onRetry: opts.onRetry, resume: snap.header })) this.update(next);
      } catch (err) {
        if (!signal.aborted) throw err;
      }
    })();
    this.done.catch((err: unknown) => {
      this.failure = err;
      if (this.listenerCount('error') > 0) this.emit('error', err);
      this.emit('change');
    });
  }

  private update(snap: ListResponse): void {
    this.snapshot = snap;
    this.version++;
    this.emit('change', snap);
  }

  /** The first snapshot (throws when the listing fails, e.g. the service is unreachable in time). */
  ready(): Promise<ListResponse> {
    return this.first;
  }

  /** Stops watching. */
  close(): void {
    this.ac.abort();
  }

  get closed(): boolean {
    return this.signal.aborted;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ListResponse, void, undefined> {
    let seen = 0;
    await this.first;
    for (;;) {
      if (this.failure !== undefined) throw this.failure;
      if (this.version > seen) {
        seen = this.version;
        yield this.snapshot!;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.off('change', wake);
          this.signal.removeEventListener('abort', wake);
          resolve();
        };
        this.on('change', wake);
        this.signal.addEventListener('abort', wake, { once: true });
      });
    }
  }
}
