// The Sequencer turns read-uncommitted messages (every record of the source journals, in the
// order they are read) into read-committed ones: the messages a consumer may apply, each once.
// It is a port of Gazette's message.Sequencer (v0.103.0) that keeps its exact behaviour, quirks
// included, because a shard's checkpoint is shared with Go members: a checkpoint written by one
// implementation is resumed by the other, and both must dequeue the same messages from it.
//
// How it works. Every message UUID names a producer and carries a clock and flags (uuid.ts).
// Per (journal, producer) the sequencer keeps a partial sequence: the clock of the last
// acknowledgement (`minClock`, exclusive), the largest clock queued since (`maxClock`), and the
// journal offset where the pending sequence began (`begin`, -1 when nothing is pending).
//   - OUTSIDE_TXN commits itself at once (unless its clock is not past the last ACK: a
//     duplicate). A message with a zero clock (no UUID at all, e.g. a plain line written by
//     `gazctl journals append`) is always committed, and never indexed.
//   - CONTINUE_TXN is held back. A clock not past `maxClock` is a re-send and is dropped.
//   - ACK_TXN commits every held message with a clock up to and including its own (the larger
//     ones are dropped), and is itself the last message of the committed sequence. An ACK whose
//     clock equals the last ACK rolls the pending messages back; one below it too (a producer that
//     recovered an older checkpoint), with an error logged.
// Queued messages are kept in a fixed-size ring buffer, linked per producer, so that a committed
// sequence is normally dequeued straight from memory. If part of the sequence fell out of the
// ring (a long transaction, or a sequence begun before the consumer restarted from a checkpoint),
// queue() answers `ackCommitReplay` and the caller re-reads the journal range replayRange()
// names and hands it to startReplay().
//
// A journal's read-through offset only moves past a committed sequence once all of it has been
// dequeued; until then it stays at the sequence's first unconsumed message, so that a sequencer
// restored from a checkpoint queues the ACK again and re-emits just the rest.
import type { Clock, ProducerID, UUID } from './uuid.js';
import { MessageFlags, getClock, getFlags, formatUUID, hasZeroClock } from './uuid.js';
import { GazctlError } from '../protocol/errors.js';

/** One message read from a journal, and where. */
export interface Envelope<M = unknown> {
  journal: string;
  /** Offsets of the message's record: [begin, end). */
  begin: bigint;
  end: bigint;
  message: M;
  /** The message's UUID (16 zero bytes for a message without one). */
  uuid: UUID;
}

/** What the sequencer remembers of a producer of a journal between checkpoints. */
export interface ProducerState {
  journal: string;
  producer: ProducerID;
  /** Clock of the producer's last acknowledgement (0 when only its first clock is known). */
  lastAck: Clock;
  /** Offset of the first message of the producer's pending sequence, or -1n when none is pending. */
  begin: bigint;
}

/** What queue() decided about a message (Gazette's QueueOutcome, with its metric names). */
export const QueueOutcome = {
  /** An OUTSIDE_TXN message at or below the last ACK: ignored. */
  OUTSIDE_ALREADY_ACKED: 'outsideAlreadyAcked',
  /** An OUTSIDE_TXN message committed: dequeue it with step(). */
  OUTSIDE_COMMIT: 'outsideCommit',
  /** A CONTINUE_TXN message at or below the last ACK: ignored. */
  CONTINUE_ALREADY_ACKED: 'continueAlreadyAcked',
  /** A CONTINUE_TXN message not above the pending sequence's largest clock: ignored. */
  CONTINUE_TXN_CLOCK_LARGER: 'continueRingClockLarger',
  /** A CONTINUE_TXN message begins a pending sequence. */
  CONTINUE_BEGIN_SPAN: 'continueBeginSpan',
  /** A CONTINUE_TXN message extends a pending sequence. */
  CONTINUE_EXTEND_SPAN: 'continueExtendSpan',
  /** An ACK_TXN at or below the last ACK: the pending sequence is discarded. */
  ACK_ROLLBACK: 'ackRollback',
  /** An ACK_TXN with nothing pending: it alone is committed; dequeue it with step(). */
  ACK_EMPTY: 'ackEmpty',
  /** An ACK_TXN committing a sequence wholly in the ring: dequeue with step(). */
  ACK_COMMIT_RING: 'ackCommitRing',
  /** An ACK_TXN committing a sequence partly out of the ring: replayRange(), startReplay(), then step(). */
  ACK_COMMIT_REPLAY: 'ackCommitReplay',
} as const;
export type QueueOutcome = (typeof QueueOutcome)[keyof typeof QueueOutcome];

/** True for the outcomes after which committed messages wait to be dequeued. */
export function isCommitOutcome(o: QueueOutcome): boolean {
  return o === QueueOutcome.OUTSIDE_COMMIT || o === QueueOutcome.ACK_EMPTY || o === QueueOutcome.ACK_COMMIT_RING || o === QueueOutcome.ACK_COMMIT_REPLAY;
}

/** A source of replayed envelopes: a sync or async iterator over the journal range of replayRange(). */
export type ReplayIterator<M> = Iterator<Envelope<M>> | AsyncIterator<Envelope<M>>;

export class SequencerError extends GazctlError {}

/** Receives the errors Gazette logs without failing (clock anomalies of producers). */
export type SequencerLogger = (msg: string, fields: Record<string, unknown>) => void;

interface Partial {
  journal: string;
  producer: ProducerID;
  /** Exclusive minimum clock of the current sequence (the last ACK, tightened while dequeuing). */
  minClock: Clock;
  /** Inclusive maximum clock of the current sequence. */
  maxClock: Clock;
  /** Offset of the sequence's first message, or -1n. */
  begin: bigint;
  /** Ring indices (inclusive) of the sequence's messages still in the ring, or -1. */
  ringStart: number;
  ringStop: number;
}

/** Where `dequeued` points: nowhere, a ring slot, or the last envelope read from the replay. */
const NONE = -1;
const REPLAY = -2;

/** A producer id (the 6 bytes at `at`) as a number: 48 bits are exact in a double. */
function producerNumber(b: Uint8Array, at: number): number {
  return (b[at]! * 0x10000 + ((b[at + 1]! << 8) | b[at + 2]!)) * 0x1000000 + ((b[at + 3]! << 16) | (b[at + 4]! << 8) | b[at + 5]!);
}

const MASK64 = (1n << 64n) - 1n;

export class Sequencer<M = unknown> {
  private readonly offsets: Map<string, bigint>;
  /** Partial sequences by journal, then by producer id (as a number). */
  private readonly partials = new Map<string, Map<number, Partial>>();
  /** Sequences begun or extended since the last checkpoint(). */
  private readonly pending = new Set<Partial>();
  private emit: Partial | undefined;
  private readonly cap: number;
  /** Ring of envelopes; `held[i]` is false once slot i was dequeued or evicted (Gazette: Message == nil). */
  private readonly ring: (Envelope<M> | undefined)[] = [];
  private readonly held: boolean[] = [];
  /** Next slot of the same producer's sequence, or -1. */
  private readonly next: number[] = [];
  /** Clock of each slot's message, computed when it was queued. */
  private readonly ringClock: Clock[] = [];
  private head = 0;
  private replayIt: ReplayIterator<M> | undefined;
  private replayAsync = false;
  private replayEnv: Envelope<M> | undefined;
  /** replayEnv was just read and not yet looked at. */
  private replayFresh = false;
  private dequeuedRef = NONE;
  /** The ring slot released by the last step, to be cleared at the next (see beginStep). */
  private released = NONE;
  private dequeuedClock: Clock = 0n;
  private readonly log: SequencerLogger;

  /**
   * @param offsets read-through offsets to start from (a checkpoint's; copied)
   * @param states producer states of the checkpoint
   * @param buffer size of the ring (Gazette's consumers default to 8192); at least 1
   */
  constructor(offsets: Map<string, bigint> | undefined, states: Iterable<ProducerState>, buffer: number, log?: SequencerLogger) {
    this.offsets = new Map(offsets ?? []);
    this.cap = buffer > 0 ? Math.floor(buffer) : 1;
    this.log = log ?? (() => {});
    for (const s of states) {
      this.producersOf(s.journal).set(producerNumber(s.producer, 0), { journal: s.journal, producer: Uint8Array.from(s.producer), minClock: s.lastAck, maxClock: s.lastAck, begin: s.begin, ringStart: -1, ringStop: -1 });
    }
  }

  /** The committed message to apply now, or undefined when no sequence is being dequeued. */
  get dequeued(): Envelope<M> | undefined {
    return this.resolve(this.dequeuedRef);
  }

  /** True while a replay iterator is in use (step() must then be stepAsync() for an async one). */
  get replaying(): boolean {
    return this.replayIt !== undefined;
  }

  /** True while committed messages remain to be dequeued (queue() must not be called). */
  get emitting(): boolean {
    return this.emit !== undefined;
  }

  private producersOf(journal: string): Map<number, Partial> {
    let m = this.partials.get(journal);
    if (m === undefined) {
      m = new Map();
      this.partials.set(journal, m);
    }
    return m;
  }

  private resolve(ref: number): Envelope<M> | undefined {
    if (ref === NONE) return undefined;
    if (ref === REPLAY) return this.replayEnv ?? zeroEnvelope<M>();
    return this.ring[ref];
  }

  /** Applies the next read-uncommitted envelope. Throws if committed messages remain to dequeue. */
  queue(env: Envelope<M>): QueueOutcome {
    if (this.emit !== undefined) throw new SequencerError('committed messages remain to dequeue');
    this.evictAtHead();

    const uuid = env.uuid;
    let clock: Clock;
    let flags: number;
    let partial: Partial;
    let real: Clock; // the UUID's own clock (kept in the ring: a message is dequeued by it)

    if (hasZeroClock(uuid)) {
      // No clock (usually no UUID at all): committed at once and not indexed, with a synthetic
      // clock of 1 so that it is above its throw-away sequence's minimum.
      partial = { journal: env.journal, producer: uuid.subarray(10, 16), minClock: 0n, maxClock: 0n, begin: -1n, ringStart: -1, ringStop: -1 };
      flags = MessageFlags.OUTSIDE_TXN;
      clock = 1n;
      real = 0n;
    } else {
      clock = real = getClock(uuid);
      flags = getFlags(uuid);
      const producers = this.producersOf(env.journal);
      const id = producerNumber(uuid, 10);
      const found = producers.get(id);
      if (found === undefined) {
        partial = { journal: env.journal, producer: uuid.slice(10, 16), minClock: clock - 1n, maxClock: clock - 1n, begin: -1n, ringStart: -1, ringStop: -1 };
        producers.set(id, partial);
      } else {
        partial = found;
      }
    }

    // Decide first, then mutate.
    let outcome: QueueOutcome;
    switch (flags) {
      case MessageFlags.CONTINUE_TXN:
        if (clock <= partial.minClock) outcome = QueueOutcome.CONTINUE_ALREADY_ACKED;
        else if (clock <= partial.maxClock) outcome = QueueOutcome.CONTINUE_TXN_CLOCK_LARGER;
        else if (partial.begin === -1n) outcome = QueueOutcome.CONTINUE_BEGIN_SPAN;
        else outcome = QueueOutcome.CONTINUE_EXTEND_SPAN;
        break;
      case MessageFlags.ACK_TXN:
        if (clock < partial.minClock) {
          // A producer (typically a consumer shard) recovered a checkpoint older than the one of
          // its furthest progress. Gazette accepts the reset and falls back to at-least-once for
          // the interval in between rather than risk never processing later messages.
          this.logError(env, partial, 'unexpected ACK_TXN which is less than lastACK (loss of exactly-once semantics)');
          outcome = QueueOutcome.ACK_ROLLBACK;
        } else if (clock === partial.minClock) outcome = QueueOutcome.ACK_ROLLBACK;
        else if (partial.begin === -1n) outcome = QueueOutcome.ACK_EMPTY;
        else if (partial.ringStart === -1) outcome = QueueOutcome.ACK_COMMIT_REPLAY;
        else if (partial.begin !== this.ring[partial.ringStart]!.begin) outcome = QueueOutcome.ACK_COMMIT_REPLAY;
        else outcome = QueueOutcome.ACK_COMMIT_RING;
        break;
      default:
        if (flags !== MessageFlags.OUTSIDE_TXN) this.logError(env, partial, 'unexpected UUID flags');
        // Any other flags are taken as OUTSIDE_TXN.
        if (clock <= partial.minClock) outcome = QueueOutcome.OUTSIDE_ALREADY_ACKED;
        else {
          if (partial.begin !== -1n) {
            this.logError(env, partial, 'unexpected OUTSIDE_TXN with a preceding CONTINUE_TXN (mixed use of publishUncommitted and publishCommitted to the same journal?)');
          }
          outcome = QueueOutcome.OUTSIDE_COMMIT;
        }
    }

    // Each case either starts an emit or moves the read-through offset, never both.
    switch (outcome) {
      case QueueOutcome.OUTSIDE_ALREADY_ACKED:
      case QueueOutcome.CONTINUE_ALREADY_ACKED:
      case QueueOutcome.CONTINUE_TXN_CLOCK_LARGER:
        this.offsets.set(env.journal, env.end);
        break;
      case QueueOutcome.CONTINUE_BEGIN_SPAN:
      case QueueOutcome.CONTINUE_EXTEND_SPAN:
        if (outcome === QueueOutcome.CONTINUE_BEGIN_SPAN) {
          partial.begin = env.begin;
          this.pending.add(partial);
        }
        this.addAtHead(env, partial, real);
        partial.maxClock = clock;
        this.offsets.set(env.journal, env.end);
        break;
      case QueueOutcome.ACK_ROLLBACK:
        partial.minClock = clock;
        partial.maxClock = clock;
        partial.begin = -1n;
        partial.ringStart = -1;
        partial.ringStop = -1;
        this.pending.delete(partial);
        this.offsets.set(env.journal, env.end);
        break;
      default:
        // OUTSIDE_COMMIT, ACK_EMPTY, ACK_COMMIT_RING, ACK_COMMIT_REPLAY.
        this.addAtHead(env, partial, real);
        if (outcome === QueueOutcome.ACK_EMPTY) {
          partial.begin = env.begin;
        } else if (outcome === QueueOutcome.OUTSIDE_COMMIT) {
          // A pending sequence of the producer (if any) is clobbered: in effect rolled back.
          partial.begin = env.begin;
          partial.ringStart = partial.ringStop;
        }
        // Commit through `clock`; queued messages above it are dropped while dequeuing.
        partial.maxClock = clock;
        this.emit = partial;
    }
    return outcome;
  }

  /** The journal and [begin, end) range to re-read for a sequence answered with ackCommitReplay. */
  replayRange(): { journal: string; begin: bigint; end: bigint } {
    const e = this.emit;
    if (e === undefined) throw new SequencerError('no committed sequence to replay');
    // The committing message is always in the ring (it was added last), so ringStart is valid.
    return { journal: e.journal, begin: e.begin, end: this.ring[e.ringStart]!.begin };
  }

  /**
   * Supplies the re-read envelopes of replayRange() (read uncommitted, in journal order). An
   * iterator that is not a sync one (no Symbol.iterator) is taken as async: step through it with
   * stepAsync().
   */
  startReplay(it: ReplayIterator<M>, async = !isSyncIterator(it)): void {
    if (this.emit === undefined) throw new SequencerError('no committed sequence to replay');
    this.replayIt = it;
    this.replayAsync = async;
  }

  /**
   * Steps to the next committed message (then `dequeued` holds it and true is returned), or
   * finishes the committed sequence (false: queue the next envelope). Synchronous; during a replay
   * from an async iterator use stepAsync().
   */
  step(): boolean {
    if (!this.beginStep()) return false;
    for (;;) {
      const r = this.loopStep();
      if (r !== NEED_REPLAY) return r;
      if (this.replayAsync) throw new SequencerError('a replay from an async iterator is in progress: call stepAsync()');
      this.takeReplay((this.replayIt as Iterator<Envelope<M>>).next());
    }
  }

  /** step() that also reads an async replay iterator. */
  async stepAsync(): Promise<boolean> {
    if (!this.beginStep()) return false;
    for (;;) {
      const r = this.loopStep();
      if (r !== NEED_REPLAY) return r;
      this.takeReplay(await this.replayIt!.next());
    }
  }

  /**
   * True if a sequence was begun or extended since the last checkpoint(): more of it (and its ACK)
   * is probably on its way, which a transaction may wait for.
   */
  hasPending(): boolean {
    return this.pending.size !== 0;
  }

  /**
   * The read-through offsets and producer states to checkpoint. Producers whose largest clock is
   * more than `pruneHorizonNanos` behind the newest acknowledged clock of their journal are
   * forgotten (0: none are). Clears the pending marks (see hasPending).
   */
  checkpoint(pruneHorizonNanos: bigint): { offsets: Map<string, bigint>; states: ProducerState[] } {
    // The largest acknowledged clock per journal, lowered by the horizon. Gazette computes this in
    // uint64, so a horizon larger than the clock wraps around (and prunes all of the journal's
    // producers); done the same way here.
    const prune = new Map<string, Clock>();
    for (const producers of this.partials.values()) {
      for (const p of producers.values()) if (p.minClock > (prune.get(p.journal) ?? 0n)) prune.set(p.journal, p.minClock);
    }
    for (const [j, clock] of prune) {
      prune.set(j, pruneHorizonNanos > 0n ? (clock - ((pruneHorizonNanos / 100n) << 4n)) & MASK64 : 0n);
    }
    const states: ProducerState[] = [];
    for (const producers of this.partials.values()) {
      for (const [id, p] of producers) {
        if (p.maxClock >= (prune.get(p.journal) ?? 0n)) {
          states.push({ journal: p.journal, producer: Uint8Array.from(p.producer), lastAck: p.minClock, begin: p.begin });
        } else {
          producers.delete(id);
        }
      }
    }
    this.pending.clear();
    return { offsets: new Map(this.offsets), states };
  }

  /** The current read-through offsets (a copy). */
  readThrough(): Map<string, bigint> {
    return new Map(this.offsets);
  }

  // Returns false (nothing to dequeue) or true after releasing the last dequeued message.
  private beginStep(): boolean {
    const e = this.emit;
    if (e === undefined) return false;
    if (this.dequeuedRef === NONE && this.replayIt === undefined && e.begin !== this.ring[e.ringStart]!.begin) {
      throw new SequencerError('a replay is required (queue answered ackCommitReplay) and startReplay was not called');
    }
    // The slot released by the previous step is let go of now: a dequeued envelope is never read
    // again (evictAtHead skips slots not held), and keeping up to a ring's worth of consumed
    // envelopes alive made every young-generation collection copy them. (It is cleared one step
    // late, as the end of a sequence still reads the last dequeued envelope's offset.)
    const stale = this.released;
    if (stale >= 0 && !this.held[stale]) this.ring[stale] = undefined;
    this.released = NONE;
    if (this.dequeuedRef !== NONE) {
      // The previous message was processed: tighten the sequence's lower bound past it.
      e.minClock = this.dequeuedClock;
      if (this.dequeuedRef >= 0) {
        this.held[this.dequeuedRef] = false;
        this.released = this.dequeuedRef;
      }
    }
    return true;
  }

  private takeReplay(r: IteratorResult<Envelope<M>>): void {
    const e = this.emit!;
    if (r.done) {
      // Replay finished: continue from the ring.
      this.replayEnv = undefined;
      this.replayIt = undefined;
      this.replayAsync = false;
      return;
    }
    const env = r.value;
    if (env.journal !== e.journal) throw new SequencerError(`replay of wrong journal (${env.journal}; expected ${e.journal})`);
    if (env.begin < e.begin) throw new SequencerError(`replay has wrong begin (${env.begin}; expected >= ${e.begin})`);
    const stop = this.ring[e.ringStart]!.begin;
    if (env.end > stop) throw new SequencerError(`replay has wrong end (${env.end}; expected <= ${stop})`);
    this.replayEnv = env;
    this.replayFresh = true;
  }

  private loopStep(): boolean | typeof NEED_REPLAY {
    const e = this.emit!;
    while (e.ringStart !== -1) {
      let env: Envelope<M>;
      if (this.replayIt === undefined) {
        // From the ring.
        const idx = e.ringStart;
        env = this.ring[idx]!;
        this.dequeuedRef = idx;
        this.dequeuedClock = this.ringClock[idx]!;
        e.ringStart = this.next[idx]!;
      } else {
        if (!this.replayFresh) return NEED_REPLAY;
        this.replayFresh = false;
        env = this.replayEnv!;
        // The replayed range holds other producers' messages too.
        if (!bytesEqual6(env.uuid, e.producer)) continue;
        this.dequeuedRef = REPLAY;
        this.dequeuedClock = getClock(env.uuid);
      }
      if (this.dequeuedClock !== 0n && this.dequeuedClock <= e.minClock) {
        // A duplicate (possible in replays, and across a recovered checkpoint, which keeps only the
        // last ACK). Zero clocks are exempt: their order is synthetic.
        continue;
      } else if (this.dequeuedClock > e.maxClock) {
        continue; // Above the committing ACK's clock: not committed.
      }
      e.begin = env.begin; // A restart resumes from here.
      return true;
    }
    // (A replay never ends here: the committing message is in the ring, so ringStart stays valid
    // until the replay is exhausted.)

    // The whole sequence is dequeued. Only now does the read-through offset move past it (it was
    // left alone when the ACK was queued, so that a restart queues the ACK again).
    this.offsets.set(e.journal, this.resolve(this.dequeuedRef)?.end ?? 0n);
    e.maxClock = e.minClock;
    e.begin = -1n;
    e.ringStart = -1;
    e.ringStop = -1;
    this.pending.delete(e);
    this.dequeuedRef = NONE;
    this.emit = undefined;
    this.dequeuedClock = 0n;
    return false;
  }

  private evictAtHead(): void {
    if (this.ring.length !== this.cap) {
      // Still filling the ring.
      if (this.ring.length < this.head + 1) {
        this.ring.length = this.head + 1;
        this.held.push(false);
        this.next.push(-1);
        this.ringClock.push(0n);
      }
      return;
    }
    if (!this.held[this.head]) return; // Already evicted (or dequeued).
    const env = this.ring[this.head]!;
    const p = this.partials.get(env.journal)?.get(producerNumber(env.uuid, 10));
    // A sequence still pointing at this slot steps past it.
    if (p !== undefined && p.ringStart === this.head) {
      const nx = this.next[p.ringStart]!;
      if (p.ringStart === p.ringStop && nx === -1) {
        p.ringStart = -1;
        p.ringStop = -1;
      } else if (p.ringStart !== p.ringStop && nx !== -1) {
        p.ringStart = nx;
      } else {
        throw new SequencerError('invariant violated: ringStart == ringStop iff next[ringStart] == -1');
      }
    }
    this.ring[this.head] = undefined;
    this.held[this.head] = false;
    this.next[this.head] = -1;
  }

  private addAtHead(env: Envelope<M>, partial: Partial, clock: Clock): void {
    const h = this.head;
    this.ring[h] = env;
    this.ringClock[h] = clock;
    this.held[h] = true;
    this.next[h] = -1;
    if (partial.ringStop === -1) partial.ringStart = h;
    else this.next[partial.ringStop] = h;
    partial.ringStop = h;
    this.head = (h + 1) % this.cap;
  }

  private logError(env: Envelope<M>, partial: Partial, msg: string): void {
    this.log(msg, {
      journal: env.journal,
      begin: env.begin,
      end: env.end,
      uuid: formatUUID(env.uuid),
      minClock: partial.minClock,
      maxClock: partial.maxClock,
      partialBegin: partial.begin,
    });
  }
}

const NEED_REPLAY = Symbol('need-replay');

function zeroEnvelope<M>(): Envelope<M> {
  return { journal: '', begin: 0n, end: 0n, message: undefined as M, uuid: new Uint8Array(16) };
}

function bytesEqual6(uuid: UUID, producer: ProducerID): boolean {
  for (let i = 0; i < 6; i++) if (uuid[10 + i] !== producer[i]) return false;
  return true;
}

function isSyncIterator(it: object): boolean {
  return Symbol.iterator in it;
}
