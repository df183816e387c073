// The primary's transaction loop, after upstream's consumer/transaction.go.
//
// Source journals are read by one reader task each into a bounded queue of decoded envelopes.
// A transaction begins with its first committed message and consumes messages until its
// minimum duration has passed and no message is ready (or its maximum duration has passed);
// while the previous transaction's commit is still in flight it goes on consuming (up to the
// maximum duration) rather than committing. Then the application finalizes, the checkpoint
// (read-through offsets, producer states, ACK intents) is built, and the store starts
// committing it. Commits are pipelined one deep: transaction N+1 runs while N commits, and N+1
// starts its own commit only after N's has resolved. Progress (the read-through offsets Stat
// waits for) moves when a commit resolves.
import type { JournalClient } from '../../lib/client/journal-client.js';
import { backoff, isAbortError, isTransient, sleep } from '../../lib/client/retry.js';
import { RecordSplitter } from '../../lib/message/framing.js';
import { MessageFlags, getFlags } from '../../lib/message/uuid.js';
import type { JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import type { Checkpoint, ShardSpec_Source } from '../../lib/protocol/gen/consumer/protocol.js';
import type { Application, Envelope, MessageDecoder, Shard, Store, TxnPublisher } from './app.js';

/** Read-through progress of a primary, with waiters (Stat). */
export class Progress {
  readonly readThrough = new Map<string, bigint>();
  readonly publishAt = new Map<string, bigint>();
  private waiters: Array<() => void> = [];

  /** Applies `fn` to the offsets and wakes every waiter. */
  signal(fn: (readThrough: Map<string, bigint>, publishAt: Map<string, bigint>) => void): void {
    fn(this.readThrough, this.publishAt);
    const w = this.waiters;
    this.waiters = [];
    for (const wake of w) wake();
  }

  /** Wakes waiters without a change (e.g. the replica closed). */
  wakeAll(): void {
    this.signal(() => undefined);
  }

  /** Resolves at the next signal. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Whether every journal of `offsets` is read through at least that far. */
  reached(offsets: Map<string, bigint>): boolean {
    for (const [j, o] of offsets) if ((this.readThrough.get(j) ?? 0n) < o) return false;
    return true;
  }
}

/** An envelope, or the error a source reader ended with. */
type Item = { env: Envelope; error?: undefined } | { env?: undefined; error: unknown };

/** A bounded queue between the source readers and the transaction loop. */
class EnvelopeQueue {
  private items: Item[] = [];
  private head = 0;
  private readers: Array<() => void> = [];
  private writers: Array<() => void> = [];

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.items.length - this.head;
  }

  async push(item: Item, signal: AbortSignal): Promise<void> {
    while (this.size >= this.capacity && !signal.aborted) {
      await new Promise<void>((resolve) => {
        this.writers.push(resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
    }
    if (signal.aborted && item.env) return;
    this.items.push(item);
    const r = this.readers;
    this.readers = [];
    for (const wake of r) wake();
  }

  /** The next item, if one is ready. */
  shift(): Item | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined as unknown as Item;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    const w = this.writers;
    this.writers = [];
    for (const wake of w) wake();
    return item;
  }

  /** Resolves once an item is ready (at once when one is). */
  ready(): Promise<void> {
    if (this.size > 0) return Promise.resolve();
    return new Promise((resolve) => this.readers.push(resolve));
  }
}

/**
 * Sequencing of read-uncommitted messages. Until the exactly-once Sequencer lands (seq's
 * `src/lib/message/sequencer.ts`), messages outside a transaction (OUTSIDE_TXN, which includes
 * the zero UUID of plain lines) and acknowledgements (ACK_TXN) are committed as read, as
 * upstream's sequencer dequeues them; a CONTINUE_TXN message fails the shard rather than being
 * applied before its transaction commits (or after it rolled back).
 */
function sequenceMinimal(env: Envelope): 'dequeue' {
  const flags = getFlags(env.uuid);
  if (flags & MessageFlags.CONTINUE_TXN) {
    throw new Error(
      `${env.journal}@${env.begin}: a transactional message (CONTINUE_TXN) needs the exactly-once sequencer, which this build lacks`,
    );
  }
  return 'dequeue';
}

export interface TransactionsOptions {
  shard: Shard;
  app: Application;
  store: Store;
  journals: JournalClient;
  sources: ShardSpec_Source[];
  /** The checkpoint to start from (restored from the store). */
  checkpoint: Checkpoint;
  minTxnMs: number;
  maxTxnMs: number;
  /** Capacity of the read queue (ShardSpec.read_channel_size, default 8192 as upstream). */
  readQueueSize?: number;
  progress: Progress;
  publisher: TxnPublisher;
  /** Stores the recorder's hints every `hintsIntervalMs` (between transactions, as upstream). */
  storeHints?: () => Promise<void>;
  hintsIntervalMs?: number;
  /** Looks up a source journal's spec (for the app's decoder). */
  journalSpec: (journal: string) => Promise<JournalSpec>;
  signal: AbortSignal;
  log: { warn(msg: string, f?: Record<string, unknown>): void; debug(msg: string, f?: Record<string, unknown>): void };
  /** Read through brokers rather than do_not_proxy (a process without routing of its own). */
  proxyReads?: boolean;
}

const DEFAULT_READ_QUEUE = 8192;

/** Reads one source journal into `queue` from `offset`, until aborted or a final failure. */
async function readSource(o: TransactionsOptions, queue: EnvelopeQueue, journal: string, offset: bigint, signal: AbortSignal): Promise<void> {
  let decoder: MessageDecoder | undefined;
  for (let attempt = 0; !decoder; attempt++) {
    try {
      decoder = o.app.newMessage(await o.journalSpec(journal));
    } catch (err) {
      if (signal.aborted) return;
      if (!isTransient(err)) throw err;
      await sleep(backoff(attempt), signal).catch(() => undefined);
    }
  }
  let attempt = 0;
  while (!signal.aborted) {
    const splitter = new RecordSplitter(decoder.framing);
    const base = offset;
    const reader = o.journals.read({ journal, offset, block: true, do_not_proxy: !o.proxyReads }, { signal });
    try {
      for await (const chunk of reader) {
        if (chunk.content.length === 0) continue;
        const expected = base + splitter.offset + BigInt(splitter.pending);
        if (chunk.offset !== expected) {
          // The broker skipped a range (content deleted or unreadable): drop any partial record
          // and read on from where it resumed, as upstream's reader adopts the jump.
          o.log.warn('source read jumped', { journal, from: expected, to: chunk.offset });
          chunk.release?.();
          offset = chunk.offset;
          break;
        }
        // Pooled content is copied: records may be held past the chunk's release.
        const content = chunk.release ? Buffer.from(chunk.content) : Buffer.from(chunk.content.buffer, chunk.content.byteOffset, chunk.content.length);
        chunk.release?.();
        let at = base + splitter.offset;
        for (const rec of splitter.push(content)) {
          const end = at + BigInt(rec.length);
          const message = decoder.decode(rec);
          await queue.push({ env: { journal, begin: at, end, message, uuid: decoder.uuid(message) } }, signal);
          at = end;
          offset = end;
        }
        attempt = 0;
      }
    } catch (err) {
      if (signal.aborted) return;
      if (!isTransient(err)) throw err;
      o.log.warn('source read failed (will retry)', { journal, offset, err: describe(err), attempt });
      await sleep(backoff(attempt++), signal).catch(() => undefined);
    }
  }
}

function emptyCheckpoint(): Checkpoint {
  return { sources: {}, ack_intents: {} };
}

/** A promise with its state observable. */
interface Tracked {
  promise: Promise<void>;
  settled: boolean;
  error?: unknown;
}

function track(p: Promise<void>): Tracked {
  const t: Tracked = { promise: p, settled: false };
  p.then(
    () => {
      t.settled = true;
    },
    (err: unknown) => {
      t.settled = true;
      t.error = err ?? new Error('commit failed');
    },
  );
  return t;
}

/** A timer flag: `fired` turns true after `ms`; `wait` resolves then. */
class Deadline {
  fired = false;
  private timer: NodeJS.Timeout | undefined;
  readonly wait: Promise<void>;
  constructor(ms: number) {
    this.wait = new Promise((resolve) => {
      if (ms <= 0) {
        this.fired = true;
        resolve();
        return;
      }
      this.timer = setTimeout(() => {
        this.fired = true;
        resolve();
      }, ms);
    });
  }
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

/**
 * Runs transactions until `signal` aborts (resolves, after the commit in flight settles) or a
 * failure (rejects: a source read, the application, or a commit failed).
 */
export async function runTransactions(o: TransactionsOptions): Promise<void> {
  const inner = new AbortController();
  const signal = AbortSignal.any([o.signal, inner.signal]);
  const queue = new EnvelopeQueue(o.readQueueSize && o.readQueueSize > 0 ? o.readQueueSize : DEFAULT_READ_QUEUE);
  const readers: Promise<void>[] = [];
  for (const src of o.sources) {
    let offset = o.checkpoint.sources[src.journal]?.read_through ?? 0n;
    if (offset < src.min_offset) offset = src.min_offset;
    readers.push(
      readSource(o, queue, src.journal, offset, signal).catch((error: unknown) => {
        if (!signal.aborted) return queue.push({ error: new Error(`reading ${src.journal}: ${describe(error)}`, { cause: error }) }, new AbortController().signal);
      }),
    );
  }
  const aborted = new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });

  // Offsets read through so far, carried from transaction to transaction.
  const readThrough = new Map<string, bigint>();
  for (const [j, s] of Object.entries(o.checkpoint.sources)) readThrough.set(j, s.read_through);

  let prev: Tracked | undefined;
  let nextHintsAt = Date.now() + (o.hintsIntervalMs ?? 5 * 60_000);

  const takeCommitted = (): Envelope | undefined => {
    const item = queue.shift();
    if (!item) return undefined;
    if (!item.env) throw item.error;
    sequenceMinimal(item.env);
    return item.env;
  };
  const checkPrev = () => {
    if (prev?.settled && prev.error !== undefined) throw new Error(`store commit: ${describe(prev.error)}`, { cause: prev.error });
  };

  try {
    for (;;) {
      checkPrev();
      if (o.storeHints && Date.now() >= nextHintsAt) {
        await o.storeHints();
        nextHintsAt = Date.now() + (o.hintsIntervalMs ?? 5 * 60_000);
      }
      // Idle: wait for the first message of the next transaction.
      let first: Envelope | undefined;
      while (!(first = takeCommitted())) {
        if (signal.aborted) return;
        const waits: Promise<unknown>[] = [queue.ready(), aborted];
        if (prev && !prev.settled) waits.push(prev.promise.catch(() => undefined));
        if (o.storeHints) waits.push(sleep(Math.max(0, nextHintsAt - Date.now()), signal).catch(() => undefined));
        await Promise.race(waits);
        checkPrev();
        if (prev?.settled && !prev.error) prev = undefined;
        if (o.storeHints && Date.now() >= nextHintsAt) {
          await o.storeHints();
          nextHintsAt = Date.now() + (o.hintsIntervalMs ?? 5 * 60_000);
        }
      }

      // A transaction begins.
      await o.app.beginTxn?.(o.shard, o.store);
      const minD = new Deadline(o.minTxnMs);
      const maxD = new Deadline(o.maxTxnMs);
      let consumed = 0;
      const consume = async (env: Envelope) => {
        await o.app.consume(o.shard, o.store, env, o.publisher);
        readThrough.set(env.journal, env.end);
        consumed++;
      };
      let commit: Promise<void> | undefined;
      try {
        await consume(first!);
        for (;;) {
          let env: Envelope | undefined;
          while (!maxD.fired && (env = takeCommitted())) await consume(env);
          if (maxD.fired || signal.aborted) break;
          checkPrev();
          if (prev && !prev.settled) {
            await Promise.race([queue.ready(), prev.promise.catch(() => undefined), maxD.wait, aborted]);
            continue;
          }
          if (!minD.fired) {
            await Promise.race([queue.ready(), minD.wait, aborted]);
            continue;
          }
          break;
        }
        // Stalled on the previous commit (if still in flight), then commit this one.
        if (prev && !prev.settled) await prev.promise.catch(() => undefined);
        checkPrev();
        await o.app.finalizeTxn(o.shard, o.store, o.publisher);
        const cp = emptyCheckpoint();
        for (const [j, off] of readThrough) cp.sources[j] = { read_through: off, producers: [] };
        const waitFor = o.publisher.pending?.() ?? [];
        commit = o.store.startCommit(o.shard, cp, waitFor);
        const done = track(commit);
        const committed = new Map(readThrough);
        void commit.then(
          () =>
            o.progress.signal((rt) => {
              for (const [j, off] of committed) rt.set(j, off);
            }),
          () => undefined,
        );
        prev = done;
        o.log.debug('transaction committing', { shard: o.shard.id, messages: consumed });
      } finally {
        minD.cancel();
        maxD.cancel();
        if (o.app.finishedTxn) o.app.finishedTxn(o.shard, o.store, commit ?? Promise.reject(new Error('transaction failed before its commit')));
      }
    }
  } catch (err) {
    if (signal.aborted && isAbortError(err)) return;
    throw err;
  } finally {
    inner.abort();
    await Promise.allSettled(readers);
    if (prev && !prev.settled) await prev.promise.catch(() => undefined);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
