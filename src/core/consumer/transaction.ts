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
import { backoff, sleep } from '../../lib/client/retry.js';
import { isTransientFailure } from './transient.js';
import type { Publisher } from '../../lib/client/publisher.js';
import { BrokerStatusError } from '../../lib/protocol/errors.js';
import { QueueOutcome, Sequencer } from '../../lib/message/sequencer.js';
import { buildCheckpoint, flattenAckIntents, flattenProducerStates, flattenReadThrough, type AckIntent } from '../../lib/message/checkpoint.js';
import { Status as BrokerStatus } from '../../lib/protocol/gen/broker/protocol.js';
import { RecordSplitter } from '../../lib/message/framing.js';
import type { JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import type { Checkpoint, ShardSpec_Source } from '../../lib/protocol/gen/consumer/protocol.js';
import type { Application, Envelope, MessageDecoder, Shard, Store } from './app.js';

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

/** A source's read failure, queued after its envelopes. */
class QueuedFailure {
  constructor(readonly error: unknown) {}
}

/** A record of a source that the application's decoder refused. */
class DecodeError extends Error {}

/**
 * The records of one chunk read from a source, made into envelopes (decoded) only as the
 * transaction loop takes them. Queueing a chunk as one item, rather than an envelope per record,
 * keeps a full read queue (8,192 records a shard by default) from being thousands of objects that
 * live through garbage collections: an envelope is now made just before it is consumed and dies
 * young, which is what made eight shards in one process spend a fifth of their time collecting.
 */
class RecordBatch {
  private next = 0;
  private pos = 0;
  constructor(
    readonly journal: string,
    private readonly buf: Buffer,
    private readonly ends: number[],
    /** Journal offset of buf[0], the first record's begin. */
    private at: bigint,
    private readonly decoder: MessageDecoder,
  ) {}

  get remaining(): number {
    return this.ends.length - this.next;
  }

  /** The next record as an envelope; throws a DecodeError for a record the decoder refuses. */
  take(): Envelope {
    const e = this.ends[this.next++]!;
    const pos = this.pos;
    const begin = this.at;
    const end = begin + BigInt(e - pos);
    const decoder = this.decoder;
    let message: unknown;
    try {
      message = decoder.decodeRange ? decoder.decodeRange(this.buf, pos, e) : decoder.decode(this.buf.subarray(pos, e));
    } catch (err) {
      throw new DecodeError(`reading ${this.journal}: ${this.journal}@${begin}: decoding message: ${describe(err)}`, { cause: err });
    }
    this.at = end;
    this.pos = e;
    return { journal: this.journal, begin, end, message, uuid: decoder.uuid(message) };
  }
}

type Item = RecordBatch | QueuedFailure;

/**
 * A bounded queue of read records between the source readers and the transaction loop, counted
 * in records. A reader adds a whole chunk's records and then waits while the queue holds more
 * than its capacity, so records read ahead are bounded by the capacity plus one chunk per source.
 */
class EnvelopeQueue {
  private items: Item[] = [];
  private head = 0;
  /** Records queued and not yet taken, plus queued failures. */
  private count = 0;
  private readers: Array<() => void> = [];
  private writers: Array<() => void> = [];

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.count;
  }

  /** Adds an item; returns a promise only when the queue is full (to wait on before the next push). */
  push(item: Item, signal: AbortSignal): Promise<void> | undefined {
    this.add(item, signal);
    if (this.count >= this.capacity && !signal.aborted) return this.untilRoom(signal);
    return undefined;
  }

  private async untilRoom(signal: AbortSignal): Promise<void> {
    while (this.count >= this.capacity && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.writers.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  private add(item: Item, signal: AbortSignal): void {
    if (signal.aborted && !(item instanceof QueuedFailure)) return;
    const n = item instanceof QueuedFailure ? 1 : item.remaining;
    if (n === 0) return;
    this.items.push(item);
    this.count += n;
    const r = this.readers;
    this.readers = [];
    for (const wake of r) wake();
  }

  /** The next envelope or failure, if one is ready. Throws a DecodeError for a record that does not decode. */
  shift(): Envelope | QueuedFailure | undefined {
    while (this.head < this.items.length) {
      const item = this.items[this.head]!;
      if (item instanceof QueuedFailure) {
        this.drop();
        return item;
      }
      if (item.remaining === 0) {
        this.drop();
        continue;
      }
      this.count--;
      // Blocked writers (one per source journal) are woken once the queue has drained to half its
      // capacity, not at every shift: waking all of them for each free slot made each of N readers
      // re-wait (a promise and an abort listener) per record, a cost growing with the shards' sources.
      if (this.writers.length > 0 && this.count <= this.capacity >> 1) {
        const w = this.writers;
        this.writers = [];
        for (const wake of w) wake();
      }
      return item.take();
    }
    return undefined;
  }

  /** Drops the item at the head (taken or exhausted). */
  private drop(): void {
    if (this.items[this.head] instanceof QueuedFailure) this.count--;
    this.items[this.head++] = undefined as unknown as Item;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  /** Resolves once an item is ready (at once when one is). */
  ready(): Promise<void> {
    if (this.count > 0) return Promise.resolve();
    return new Promise((resolve) => this.readers.push(resolve));
  }
}

/** Outcomes of Sequencer.queue() after which committed messages wait to be dequeued. */
const COMMIT_OUTCOMES = new Set<string>([QueueOutcome.OUTSIDE_COMMIT, QueueOutcome.ACK_EMPTY, QueueOutcome.ACK_COMMIT_RING, QueueOutcome.ACK_COMMIT_REPLAY]);
/** Outcomes of a duplicate that no further message is expected to follow (upstream's txnRead). */
const DUPLICATE_OUTCOMES = new Set<string>([
  QueueOutcome.ACK_ROLLBACK,
  QueueOutcome.CONTINUE_ALREADY_ACKED,
  QueueOutcome.CONTINUE_TXN_CLOCK_LARGER,
  QueueOutcome.OUTSIDE_ALREADY_ACKED,
]);

/** Producers more than a day behind their journal's newest ACK are pruned at checkpoints (upstream). */
export const SEQUENCER_PRUNE_HORIZON_NANOS = 24n * 3600n * 1_000_000_000n;
/** Ring of the exactly-once sequencer, when the ShardSpec gives none (upstream's default). */
const DEFAULT_RING_SIZE = 8192;

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
  publisher: Publisher;
  /** Stores the recorder's hints every `hintsIntervalMs` (between transactions, as upstream). */
  storeHints?: () => Promise<void>;
  hintsIntervalMs?: number;
  /** Looks up a source journal's spec (for the app's decoder). */
  journalSpec: (journal: string) => Promise<JournalSpec>;
  signal: AbortSignal;
  log: { warn(msg: string, f?: Record<string, unknown>): void; debug(msg: string, f?: Record<string, unknown>): void };
  /** Read through brokers rather than do_not_proxy (a process without routing of its own). */
  proxyReads?: boolean;
  /** Wait for the ACK of a sequence begun in the transaction, up to maxTxnMs (not ShardSpec.disable_wait_for_ack). */
  waitForAck?: boolean;
  /** Ring size of the sequencer (ShardSpec.ring_buffer_size; default 8192 as upstream). */
  ringSize?: number;
  /** Called when a transaction completed (committed, its ACKs written): its messages and their bytes. */
  completed?: (messages: number, bytes: number) => void;
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
      if (!isTransientFailure(err)) throw err;
      await sleep(backoff(attempt), signal).catch(() => undefined);
    }
  }
  const ends: number[] = [];
  let attempt = 0;
  while (!signal.aborted) {
    const splitter = new RecordSplitter(decoder.framing);
    const base = offset;
    const reader = o.journals.read({ journal, offset, block: true, ...(o.proxyReads ? { do_not_proxy: false } : {}) }, { signal });
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
        const at = base + splitter.offset;
        // Records are found as end positions in `buf`, queued as one batch, and decoded as the
        // transaction loop takes them (RecordBatch).
        const buf = splitter.pushEnds(content, ends);
        attempt = 0;
        if (ends.length === 0) continue;
        offset = at + BigInt(ends[ends.length - 1]!);
        const full = queue.push(new RecordBatch(journal, buf, ends.slice(), at, decoder), signal);
        if (full) await full;
      }
    } catch (err) {
      if (signal.aborted) return;
      // As upstream's RetryReader: every read failure is retried with backoff except a journal
      // that does not exist (after the reader's own attempts) or is suspended. (A record that
      // does not decode fails the shard when the transaction loop takes it: RecordBatch.)
      if (err instanceof BrokerStatusError && (err.status === BrokerStatus.JOURNAL_NOT_FOUND || err.status === BrokerStatus.SUSPENDED)) throw err;
      o.log.warn('source read failed (will retry)', { journal, offset, err: describe(err), attempt });
      await sleep(backoff(attempt++), signal).catch(() => undefined);
    }
  }
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

/** Reads `journal` over [begin, end) as envelopes (a sequence's replay). */
async function* readRange(o: TransactionsOptions, journal: string, begin: bigint, end: bigint, signal: AbortSignal): AsyncGenerator<Envelope> {
  const decoder = o.app.newMessage(await o.journalSpec(journal));
  const splitter = new RecordSplitter(decoder.framing);
  let at = begin;
  const reader = o.journals.read({ journal, offset: begin, end_offset: end, block: true, ...(o.proxyReads ? { do_not_proxy: false } : {}) }, { signal });
  for await (const chunk of reader) {
    if (chunk.content.length === 0) continue;
    const content = Buffer.from(chunk.content);
    chunk.release?.();
    for (const rec of splitter.push(content)) {
      const message = decoder.decode(rec);
      const next = at + BigInt(rec.length);
      yield { journal, begin: at, end: next, message, uuid: decoder.uuid(message) };
      at = next;
    }
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
  const start = new Map<string, bigint>();
  for (const [j, s] of Object.entries(o.checkpoint.sources)) start.set(j, s.read_through);
  const seq = new Sequencer<unknown>(flattenReadThrough(o.checkpoint), flattenProducerStates(o.checkpoint), o.ringSize && o.ringSize > 0 ? o.ringSize : DEFAULT_RING_SIZE, (msg, fields) =>
    o.log.warn(msg, fields),
  );

  const readers: Promise<void>[] = [];
  for (const src of o.sources) {
    let offset = start.get(src.journal) ?? 0n;
    if (offset < src.min_offset) offset = src.min_offset;
    readers.push(
      readSource(o, queue, src.journal, offset, signal).catch((error: unknown) => {
        if (!signal.aborted) return queue.push(new QueuedFailure(new Error(`reading ${src.journal}: ${describe(error)}`, { cause: error })), new AbortController().signal);
      }),
    );
  }
  const aborted = new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });

  /** The previous transaction: its commit, then its ACKs. */
  let prev: Tracked | undefined;
  /** Offsets the previous transaction reports as progress once it completes. */
  let prevReadThrough: Map<string, bigint> | undefined;
  let inTxn = false;
  const hintsEvery = o.hintsIntervalMs ?? 5 * 60_000;
  let hintsTimer = o.storeHints ? new Deadline(hintsEvery) : undefined;

  /** Appends ACK intents through the publisher (after its queued messages); a journal gone since is skipped when `lenient`. */
  const writeAcks = (acks: AckIntent[], lenient: boolean): Promise<Map<string, bigint>> =>
    o.publisher.writeAckIntents(
      acks,
      lenient ? { onMissing: (journal) => o.log.warn('discarding recovered ACK intent of a journal that does not exist', { journal }) } : {},
    );

  // Per message the loop stays synchronous (no await) unless a replay reads the journal again.
  const stepSeq = (): Promise<boolean> | boolean => (seq.replaying ? seq.stepAsync() : seq.step());

  /**
   * Queues read envelopes into the sequencer until a committed message is ready; false when none
   * is. A promise only while a replay is being read.
   */
  const pump = (): Promise<boolean> | boolean => {
    while (!seq.dequeued) {
      const item = queue.shift();
      if (!item) return false;
      if (item instanceof QueuedFailure) throw item.error;
      const env = item;
      const outcome = seq.queue(env);
      if (outcome === 'ackCommitReplay') {
        const r = seq.replayRange();
        seq.startReplay(readRange(o, r.journal, r.begin, r.end, signal)[Symbol.asyncIterator]());
      }
      if (COMMIT_OUTCOMES.has(outcome)) {
        const stepped = stepSeq();
        if (stepped instanceof Promise) return stepped.then(() => pump());
      } else if (DUPLICATE_OUTCOMES.has(outcome) && !inTxn) {
        // A duplicate begins nothing; report it as read so that a Stat waiting for its offset
        // does not stall (upstream: progress of an idle shard, or the previous transaction's).
        if (prevReadThrough && prev && !prev.settled) prevReadThrough.set(env.journal, env.end);
        else o.progress.signal((rt) => rt.set(env.journal, env.end));
      }
    }
    return true;
  };

  const checkPrev = () => {
    if (prev?.settled && prev.error !== undefined) throw new Error(`store commit: ${describe(prev.error)}`, { cause: prev.error });
  };
  const maybeStoreHints = async () => {
    if (o.storeHints && hintsTimer?.fired) {
      await o.storeHints();
      hintsTimer = new Deadline(hintsEvery);
    }
  };

  try {
    // Acknowledge (again) the messages of the recovered checkpoint's transaction first.
    const recoveredAcks = flattenAckIntents(o.checkpoint);
    if (recoveredAcks.length > 0) prev = track(writeAcks(recoveredAcks, true).then(() => undefined));

    for (;;) {
      checkPrev();
      await maybeStoreHints();
      // Idle: wait for the first committed message of the next transaction.
      for (;;) {
        const ready = pump();
        if (ready instanceof Promise ? await ready : ready) break;
        if (signal.aborted) return;
        const waits: Promise<unknown>[] = [queue.ready(), aborted];
        if (prev && !prev.settled) waits.push(prev.promise.catch(() => undefined));
        if (hintsTimer) waits.push(hintsTimer.wait);
        await Promise.race(waits);
        checkPrev();
        await maybeStoreHints();
      }

      // A transaction begins with this message.
      inTxn = true;
      await o.app.beginTxn?.(o.shard, o.store);
      const minD = new Deadline(o.minTxnMs);
      const maxD = new Deadline(o.maxTxnMs);
      let consumed = 0;
      let consumedBytes = 0;
      let commit: Promise<void> | undefined;
      try {
        for (;;) {
          for (;;) {
            if (maxD.fired || signal.aborted) break;
            if (!seq.dequeued) {
              const ready = pump();
              if (!(ready instanceof Promise ? await ready : ready)) break;
            }
            const env = seq.dequeued!;
            consumedBytes += Number(env.end - env.begin);
            const done = o.app.consume(o.shard, o.store, env, o.publisher);
            if (done) await done;
            // Let timers (maxD) and reads run now and then during a long synchronous run.
            if (++consumed % 1024 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
            const stepped = stepSeq();
            if (stepped instanceof Promise) await stepped;
          }
          if (maxD.fired || signal.aborted) break;
          checkPrev();
          if (prev && !prev.settled) {
            // The previous commit is in flight: keep consuming until it resolves or maxD.
            await Promise.race([queue.ready(), prev.promise.catch(() => undefined), maxD.wait, aborted]);
            continue;
          }
          if (!minD.fired) {
            await Promise.race([queue.ready(), minD.wait, aborted]);
            continue;
          }
          if (o.waitForAck && seq.hasPending()) {
            // A sequence begun in this transaction awaits its ACK: wait for it, up to maxD.
            await Promise.race([queue.ready(), maxD.wait, aborted]);
            continue;
          }
          break;
        }
        // Closed mid-transaction: nothing of it is committed (the next primary reads it again).
        if (signal.aborted) return;
        // Stalled on the previous commit (if still in flight), then commit this one.
        if (prev && !prev.settled) await prev.promise.catch(() => undefined);
        checkPrev();
        await o.app.finalizeTxn(o.shard, o.store, o.publisher);
        const { offsets, states } = seq.checkpoint(SEQUENCER_PRUNE_HORIZON_NANOS);
        const acks = o.publisher.buildAckIntents();
        const cp = buildCheckpoint({ readThrough: offsets, producerStates: states, ackIntents: acks });
        // The transaction's own writes must be durable before its checkpoint (their ACKs) is.
        const waitFor = o.publisher.pending();
        commit = o.store.startCommit(o.shard, cp, waitFor);
        // After the commit, the ACKs of the transaction's messages: downstream readers may then
        // apply them. A fault in between is covered by the intents in the checkpoint.
        const readThrough = new Map(offsets);
        const messages = consumed;
        const bytes = consumedBytes;
        const full = commit.then(async () => {
          const written = await writeAcks(acks, false);
          o.progress.signal((rt, publishAt) => {
            for (const [j, off] of readThrough) rt.set(j, off);
            for (const [j, off] of written) publishAt.set(j, off);
          });
          o.completed?.(messages, bytes);
        });
        prev = track(full);
        prevReadThrough = readThrough;
        o.log.debug('transaction committing', { shard: o.shard.id, messages: consumed });
      } finally {
        inTxn = false;
        minD.cancel();
        maxD.cancel();
        if (o.app.finishedTxn) {
          const outcome = commit ?? Promise.reject(new Error('transaction failed before its commit'));
          outcome.catch(() => undefined);
          o.app.finishedTxn(o.shard, o.store, outcome);
        }
      }
    }
  } catch (err) {
    // Once closed, failures are those of the teardown (aborted reads, a stopped recorder).
    if (o.signal.aborted) return;
    throw err;
  } finally {
    hintsTimer?.cancel();
    inner.abort();
    await Promise.allSettled(readers);
    if (prev && !prev.settled) await prev.promise.catch(() => undefined);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
