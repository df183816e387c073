// Publishing messages with UUIDs, as Gazette's message.Publisher does.
//
// Every message gets a UUID of this publisher's producer id, a clock that ticks once per message,
// and flags: OUTSIDE_TXN for publishCommitted (readers apply it at once), CONTINUE_TXN for
// publishUncommitted (readers hold it until an acknowledgement commits it). The UUID is assigned
// when the record is queued to its journal, and each journal's records are appended in queue
// order, so clocks increase along every journal, which the sequencers of readers rely on.
//
// A transaction: publishUncommitted any number of messages, then buildAckIntents() gives one
// ACK_TXN message per journal written since the last call. Those intents must be stored durably
// (a consumer puts them in the checkpoint it commits) *before* they are appended with
// writeAckIntents(), and appended again after a crash, so that either every journal of the
// transaction gets its ACK or none does until a recovery re-sends them. An ACK commits every
// earlier CONTINUE_TXN message of the producer in its journal; a reader that sees an ACK with a
// clock it already acknowledged rolls the pending messages back instead.
// (It lives in the client library, beside the append queues it writes through; the message
// library below it holds the UUIDs, encoders and checkpoint pieces it uses.)
import type { AppendResponse } from '../protocol/gen/broker/protocol.js';
import { AppendService, type AppendClient, type AppendServiceOptions } from './append-service.js';
import type { AckIntent } from '../message/checkpoint.js';
import type { MappingFunc, MessageEncoder } from '../message/encoder.js';
import { MessageClock, MessageFlags, buildUUID, newProducerID, type ProducerID, type UUID } from '../message/uuid.js';

export interface PublisherOptions {
  /**
   * The clock to tick. A consumer shares one per shard and moves it to wall time at each
   * transaction's start. Without one, the publisher keeps its own and moves it to wall time
   * before every message.
   */
  clock?: MessageClock;
  /** The producer id (default: a new random one). */
  producer?: ProducerID;
  /**
   * Options of the append queues. Defaults: no linger (an append commits once its queue is
   * empty); failures are retried (ambiguous ones too) until a terminal status (JOURNAL_NOT_FOUND,
   * NOT_ALLOWED, REGISTER_MISMATCH, …), `signal` or `timeoutMs`.
   */
  append?: Omit<AppendServiceOptions, 'onCommitted' | 'onFailed'>;
}

/** A queued message. */
export interface Published {
  journal: string;
  uuid: UUID;
  /** Resolves once the append holding the record committed (rejects if its journal's queue failed). */
  committed: Promise<void>;
}

interface Track {
  /** Records of this tick not yet handed to the append queue (they go as one run). */
  batch: Buffer[];
  /** Bytes queued, and bytes committed, since the publisher began. */
  queued: number;
  committed: number;
  /** End offset of the journal after the latest commit. */
  end: bigint;
  waiters: { upTo: number; resolve: () => void; reject: (e: Error) => void }[];
  error?: Error;
}

interface Intent<M> {
  journal: string;
  encoder: MessageEncoder<M>;
}

export class Publisher {
  readonly producer: ProducerID;
  private readonly clock: MessageClock;
  private readonly autoUpdate: boolean;
  private readonly appends: AppendService;
  private readonly tracks = new Map<string, Track>();
  /** Journals written by publishUncommitted since the last buildAckIntents, in first-write order. */
  private intents = new Map<string, Intent<unknown>>();

  constructor(client: AppendClient, opts: PublisherOptions = {}) {
    this.producer = opts.producer ?? newProducerID();
    this.autoUpdate = opts.clock === undefined;
    this.clock = opts.clock ?? MessageClock.now();
    this.appends = new AppendService(client, {
      lingerMs: 0,
      // A re-sent record has the same UUID, which every reader's sequencer drops; so, as Gazette's
      // publisher does, an append is retried even when the broker may have committed it.
      retryAmbiguous: true,
      ...opts.append,
      onCommitted: (journal, bytes, res) => this.committed(journal, bytes, res),
      onFailed: (journal, err) => this.failed(journal, err),
    });
  }

  /** Publishes `message` for readers to apply at once (OUTSIDE_TXN). */
  publishCommitted<M>(mapping: MappingFunc<M>, encoder: MessageEncoder<M>, message: M): Published {
    return this.publish(mapping, encoder, message, MessageFlags.OUTSIDE_TXN);
  }

  /**
   * Publishes `message` as part of the open transaction (CONTINUE_TXN): readers apply it once an
   * ACK of buildAckIntents() reaches its journal. Its journal joins the next buildAckIntents().
   */
  publishUncommitted<M>(mapping: MappingFunc<M>, encoder: MessageEncoder<M>, message: M): Published {
    const p = this.publish(mapping, encoder, message, MessageFlags.CONTINUE_TXN);
    if (!this.intents.has(p.journal)) this.intents.set(p.journal, { journal: p.journal, encoder: encoder as MessageEncoder<unknown> });
    return p;
  }

  /**
   * The acknowledgements of every journal written by publishUncommitted since the last call, each
   * with a fresh ACK_TXN UUID, in the order the journals were first written. Store them durably
   * before writeAckIntents(). A consumer runtime calls this itself at each commit.
   */
  buildAckIntents(): AckIntent[] {
    const out: AckIntent[] = [];
    for (const i of this.intents.values()) {
      const uuid = buildUUID(this.producer, this.clock.tick(), MessageFlags.ACK_TXN);
      out.push({ journal: i.journal, intent: i.encoder.encode(i.encoder.newAcknowledgement(i.journal), uuid) });
    }
    this.intents = new Map();
    return out;
  }

  /**
   * Appends ACK intents (after the messages already queued to their journals). Resolves with each
   * journal's end offset once all have committed. With `onMissing`, a journal that does not exist
   * is reported and skipped (recovered intents may name journals deleted since), else it fails.
   */
  async writeAckIntents(intents: Iterable<AckIntent>, opts: { onMissing?: (journal: string, err: Error) => void } = {}): Promise<Map<string, bigint>> {
    const ends = new Map<string, bigint>();
    const waits: Promise<void>[] = [];
    for (const a of intents) {
      const done = this.enqueue(a.journal, a.intent);
      waits.push(
        done.then(
          () => void ends.set(a.journal, this.tracks.get(a.journal)!.end),
          (err: Error) => {
            if (opts.onMissing && isJournalNotFound(err)) opts.onMissing(a.journal, err);
            else throw err;
          },
        ),
      );
    }
    await Promise.all(waits);
    return ends;
  }

  /**
   * Promises of the appends queued so far that have not committed yet (one per journal). A
   * consumer's store waits on them before committing a checkpoint that steps past the messages
   * which caused them. Records queued later are not waited for.
   */
  pending(): Promise<void>[] {
    const out: Promise<void>[] = [];
    for (const [, t] of this.tracks) if (t.committed < t.queued || t.error) out.push(this.waitFor(t, t.queued));
    return out;
  }

  /** Waits until every queued message committed; throws the first failure. */
  async flush(): Promise<void> {
    await Promise.all(this.pending());
  }

  /**
   * Stops the append queues: what has not committed is dropped (its waiters reject) and buffer
   * files, if `append.disk` was given, are freed. Call flush() first to append everything.
   */
  async close(): Promise<void> {
    await this.appends.close();
  }

  /** End offsets of the journals written, as of their latest commits. */
  publishedThrough(): Map<string, bigint> {
    const out = new Map<string, bigint>();
    for (const [j, t] of this.tracks) if (t.committed > 0) out.set(j, t.end);
    return out;
  }

  private publish<M>(mapping: MappingFunc<M>, encoder: MessageEncoder<M>, message: M, flags: number): Published {
    if (this.autoUpdate) this.clock.update(Date.now());
    const journal = mapping(message);
    // The UUID is built only once the journal is known and right before queuing: the queue's
    // order is the journal's order, so clocks increase along the journal.
    const uuid = buildUUID(this.producer, this.clock.tick(), flags);
    const record = encoder.encode(message, uuid);
    const t = this.track(journal);
    const upTo = this.add(journal, t, record);
    // The promise is made only if asked for: most publishes are waited for through pending().
    let committed: Promise<void> | undefined;
    const self = this;
    return {
      journal,
      uuid,
      get committed() {
        return (committed ??= self.waitFor(t, upTo));
      },
    };
  }

  private track(journal: string): Track {
    let t = this.tracks.get(journal);
    if (!t) {
      t = { batch: [], queued: 0, committed: 0, end: 0n, waiters: [] };
      this.tracks.set(journal, t);
    }
    if (t.error) throw t.error;
    return t;
  }

  /**
   * Adds a record to the journal's batch; the batch goes to the append queue as one run of
   * records at the end of the current tick (one write instead of one per record). Returns the
   * journal's queued byte count through this record.
   */
  private add(journal: string, t: Track, record: Buffer): number {
    if (t.batch.length === 0) queueMicrotask(() => this.release(journal, t));
    t.batch.push(record);
    t.queued += record.length;
    return t.queued;
  }

  private release(journal: string, t: Track): void {
    const run = t.batch.length === 1 ? t.batch[0]! : Buffer.concat(t.batch);
    t.batch = [];
    try {
      this.appends.push(journal, run);
    } catch (err) {
      this.failed(journal, err as Error);
    }
  }

  private enqueue(journal: string, record: Buffer): Promise<void> {
    const t = this.track(journal);
    return this.waitFor(t, this.add(journal, t, record));
  }

  private waitFor(t: Track, upTo: number): Promise<void> {
    let p: Promise<void>;
    if (t.committed >= upTo) p = Promise.resolve();
    else if (t.error) p = Promise.reject(t.error);
    else p = new Promise<void>((resolve, reject) => t.waiters.push({ upTo, resolve, reject }));
    // Handled here so that an ignored publish does not crash the process; awaiting it still throws.
    p.catch(() => {});
    return p;
  }

  private committed(journal: string, bytes: number, res: AppendResponse): void {
    const t = this.tracks.get(journal);
    if (!t) return;
    t.committed += bytes;
    if (res.commit) t.end = res.commit.end;
    const keep: Track['waiters'] = [];
    for (const w of t.waiters) {
      if (w.upTo <= t.committed) w.resolve();
      else keep.push(w);
    }
    t.waiters = keep;
  }

  private failed(journal: string, err: Error): void {
    const t = this.tracks.get(journal);
    if (!t) return;
    t.error = err;
    for (const w of t.waiters) w.reject(err);
    t.waiters = [];
  }
}

function isJournalNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { statusName?: string }).statusName === 'JOURNAL_NOT_FOUND';
}
