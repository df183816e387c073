// Unit tests of src/lib/message/sequencer.ts and checkpoint.ts over hand-built histories: what is
// dequeued (and in which order), what is held back, rolled back or dropped, read-through offsets,
// replays out of the ring, restarts from a checkpoint, producer pruning, and the Checkpoint
// conversions. The differential test (sequencer-oracle) compares against Go's own code.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { Sequencer, QueueOutcome, isCommitOutcome, type Envelope, type ProducerState } from '../../../../src/lib/message/sequencer.js';
import { buildCheckpoint, flattenAckIntents, flattenProducerStates, flattenReadThrough } from '../../../../src/lib/message/checkpoint.js';
import { MessageFlags, buildUUID } from '../../../../src/lib/message/uuid.js';
import { Checkpoint } from '../../../../src/lib/protocol/gen/consumer/protocol.js';

const P1 = Uint8Array.from([1, 0, 0, 0, 0, 1]);
const P2 = Uint8Array.from([1, 0, 0, 0, 0, 2]);
const { OUTSIDE_TXN: OUT, CONTINUE_TXN: CONT, ACK_TXN: ACK } = MessageFlags;

/** A journal whose messages are 10 bytes each; `at(i)` is the i-th message's begin. */
class J {
  readonly all: Envelope<string>[] = [];
  constructor(readonly name: string) {}
  add(producer: Uint8Array | null, clock: bigint, flags: number, tag: string): Envelope<string> {
    const begin = BigInt(this.all.length * 10);
    const uuid = producer === null ? new Uint8Array(16) : buildUUID(producer, clock, flags);
    const env = { journal: this.name, begin, end: begin + 10n, message: tag, uuid };
    this.all.push(env);
    return env;
  }
  range(begin: bigint, end: bigint): Envelope<string>[] {
    return this.all.filter((e) => e.begin >= begin && e.end <= end);
  }
}

/** Queues `env`; if it commits, dequeues the whole committed sequence (replaying from `j` if needed). */
function feed(seq: Sequencer<string>, env: Envelope<string>, j?: J): { outcome: QueueOutcome; out: string[] } {
  const outcome = seq.queue(env);
  if (outcome === QueueOutcome.ACK_COMMIT_REPLAY) {
    const r = seq.replayRange();
    assert.ok(j, 'a replay was needed');
    seq.startReplay(j.range(r.begin, r.end)[Symbol.iterator]());
  }
  const out: string[] = [];
  if (isCommitOutcome(outcome)) {
    while (seq.step()) out.push(seq.dequeued!.message);
  }
  return { outcome, out };
}

describe('Sequencer', () => {
  it('commits OUTSIDE_TXN messages at once and ignores their duplicates', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    assert.deepEqual(feed(seq, j.add(P1, 100n, OUT, 'x')), { outcome: 'outsideCommit', out: ['x'] });
    assert.deepEqual(feed(seq, j.add(P1, 200n, OUT, 'y')), { outcome: 'outsideCommit', out: ['y'] });
    // A re-send of an older message.
    assert.deepEqual(feed(seq, j.add(P1, 200n, OUT, 'y again')), { outcome: 'outsideAlreadyAcked', out: [] });
    assert.deepEqual(feed(seq, j.add(P1, 150n, OUT, 'older')), { outcome: 'outsideAlreadyAcked', out: [] });
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 40n]]));
  });

  it('commits messages without a UUID at once, every time', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 4);
    for (const t of ['a', 'b', 'c', 'd', 'e', 'f']) assert.deepEqual(feed(seq, j.add(null, 0n, OUT, t)), { outcome: 'outsideCommit', out: [t] });
    const { offsets, states } = seq.checkpoint(0n);
    assert.deepEqual(offsets, new Map([['a/j', 60n]]));
    assert.deepEqual(states, [], 'zero UUIDs index no producer');
  });

  it('holds CONTINUE_TXN messages until their ACK, which commits them and itself', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    assert.equal(feed(seq, j.add(P1, 100n, CONT, 'm1')).outcome, 'continueBeginSpan');
    assert.equal(seq.hasPending(), true);
    assert.equal(feed(seq, j.add(P1, 110n, CONT, 'm2')).outcome, 'continueExtendSpan');
    assert.equal(feed(seq, j.add(P1, 110n, CONT, 'm2 re-sent')).outcome, 'continueRingClockLarger');
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 30n]]));
    // The ACK: read-through stays before the sequence until all of it is dequeued.
    assert.equal(seq.queue(j.add(P1, 120n, ACK, 'ack')), 'ackCommitRing');
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 30n]]));
    assert.equal(seq.step(), true);
    assert.equal(seq.dequeued!.message, 'm1');
    assert.equal(seq.step(), true);
    assert.equal(seq.dequeued!.message, 'm2');
    assert.equal(seq.step(), true);
    assert.equal(seq.dequeued!.message, 'ack');
    assert.equal(seq.step(), false);
    assert.equal(seq.dequeued, undefined);
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 40n]]));
    // Later re-sends of the committed messages are ignored.
    assert.equal(feed(seq, j.add(P1, 110n, CONT, 'late')).outcome, 'continueAlreadyAcked');
    const { states } = seq.checkpoint(0n);
    assert.deepEqual(states, [{ journal: 'a/j', producer: P1, lastAck: 120n, begin: -1n }]);
    assert.equal(seq.hasPending(), false);
  });

  it('commits only messages up to the ACK clock', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    feed(seq, j.add(P1, 100n, CONT, 'm1'));
    feed(seq, j.add(P1, 110n, CONT, 'm2'));
    feed(seq, j.add(P1, 120n, CONT, 'm3 (not committed)'));
    assert.deepEqual(feed(seq, j.add(P1, 115n, ACK, 'ack')), { outcome: 'ackCommitRing', out: ['m1', 'm2', 'ack'] });
  });

  it('rolls back a pending sequence on an ACK of the last acknowledged clock', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    assert.deepEqual(feed(seq, j.add(P1, 100n, ACK, 'ack0')).out, ['ack0']);
    feed(seq, j.add(P1, 110n, CONT, 'rolled back 1'));
    feed(seq, j.add(P1, 120n, CONT, 'rolled back 2'));
    assert.deepEqual(feed(seq, j.add(P1, 100n, ACK, 'rollback')), { outcome: 'ackRollback', out: [] });
    assert.equal(seq.hasPending(), false);
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 40n]]));
    // The producer carries on with new clocks.
    feed(seq, j.add(P1, 130n, CONT, 'm'));
    assert.deepEqual(feed(seq, j.add(P1, 140n, ACK, 'ack1')).out, ['m', 'ack1']);
  });

  it('takes an ACK below the last one as a rollback too (an upstream recovered an older checkpoint)', () => {
    const j = new J('a/j');
    const logged: string[] = [];
    const seq = new Sequencer<string>(undefined, [], 16, (msg) => logged.push(msg));
    feed(seq, j.add(P1, 100n, CONT, 'm'));
    feed(seq, j.add(P1, 200n, ACK, 'ack'));
    assert.equal(feed(seq, j.add(P1, 150n, ACK, 'older ack')).outcome, 'ackRollback');
    assert.match(logged.join(), /less than lastACK/);
    // Clocks above 150 are taken again (at-least-once for the interval).
    feed(seq, j.add(P1, 160n, CONT, 'again'));
    assert.deepEqual(feed(seq, j.add(P1, 170n, ACK, 'ack2')).out, ['again', 'ack2']);
  });

  it('does not block one producer on another pending one', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    feed(seq, j.add(P1, 100n, CONT, 'p1 m1'));
    feed(seq, j.add(P2, 500n, CONT, 'p2 m1'));
    feed(seq, j.add(P1, 110n, CONT, 'p1 m2'));
    assert.deepEqual(feed(seq, j.add(P2, 510n, ACK, 'p2 ack')).out, ['p2 m1', 'p2 ack']);
    // Read-through moves to the end of P2's ACK although P1's sequence is still pending before it:
    // a restart re-reads P1's sequence from its producer state's begin instead.
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 40n]]));
    const { states } = seq.checkpoint(0n);
    const byId = new Map(states.map((s) => [s.producer[5], s]));
    assert.equal(byId.get(1)!.begin, 0n);
    assert.equal(byId.get(2)!.begin, -1n);
    assert.deepEqual(feed(seq, j.add(P1, 120n, ACK, 'p1 ack'), j).out, ['p1 m1', 'p1 m2', 'p1 ack']);
  });

  it('replays a sequence that fell out of the ring', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 3);
    const want: string[] = [];
    for (let i = 0; i < 6; i++) {
      feed(seq, j.add(P1, 100n + BigInt(i), CONT, `m${i}`));
      want.push(`m${i}`);
      feed(seq, j.add(P2, 900n + BigInt(i), CONT, 'other')); // interleaved, never committed
    }
    const outcome = seq.queue(j.add(P1, 200n, ACK, 'ack'));
    assert.equal(outcome, 'ackCommitReplay');
    assert.throws(() => seq.step(), /startReplay/);
    const r = seq.replayRange();
    // The ring (3) holds m5, P2's last message and the ACK: replay from m0 up to m5.
    assert.deepEqual(r, { journal: 'a/j', begin: 0n, end: 100n });
    seq.startReplay(j.range(r.begin, r.end)[Symbol.iterator]());
    const out: string[] = [];
    while (seq.step()) out.push(seq.dequeued!.message);
    assert.deepEqual(out, [...want, 'ack']);
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 130n]]));
  });

  it('replays from an async iterator with stepAsync', async () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 1);
    feed(seq, j.add(P1, 100n, CONT, 'm0'));
    feed(seq, j.add(P1, 101n, CONT, 'm1'));
    assert.equal(seq.queue(j.add(P1, 102n, ACK, 'ack')), 'ackCommitReplay');
    const r = seq.replayRange();
    const items = j.range(r.begin, r.end);
    seq.startReplay((async function* () {
      yield* items;
    })());
    assert.throws(() => seq.step(), /stepAsync/);
    const out: string[] = [];
    while (await seq.stepAsync()) out.push(seq.dequeued!.message);
    assert.deepEqual(out, ['m0', 'm1', 'ack']);
  });

  it('takes a bare { next } object as an async replay iterator', async () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 1);
    feed(seq, j.add(P1, 100n, CONT, 'm0'));
    feed(seq, j.add(P1, 101n, CONT, 'm1'));
    assert.equal(seq.queue(j.add(P1, 102n, ACK, 'ack')), 'ackCommitReplay');
    const r = seq.replayRange();
    const items = j.range(r.begin, r.end);
    seq.startReplay({ next: async () => (items.length ? { done: false, value: items.shift()! } : { done: true, value: undefined }) });
    assert.equal(seq.replaying, true);
    assert.throws(() => seq.step(), /stepAsync/);
    const out: string[] = [];
    while (await seq.stepAsync()) out.push(seq.dequeued!.message);
    assert.deepEqual(out, ['m0', 'm1', 'ack']);
  });

  it('resumes a pending sequence after a restart from its checkpoint, exactly once', async () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    feed(seq, j.add(P1, 100n, CONT, 'm1'));
    feed(seq, j.add(null, 0n, OUT, 'plain'));
    feed(seq, j.add(P1, 110n, CONT, 'm2'));
    const cp = buildCheckpoint({ ...asArgs(seq.checkpoint(0n)) });
    // Through the wire format and back, as a store keeps it.
    const restored = Checkpoint.decode(Checkpoint.encode(cp).finish());
    const seq2 = new Sequencer<string>(flattenReadThrough(restored), flattenProducerStates(restored), 16);
    // The reader resumes at the read-through offset (30): only the ACK is new.
    const { outcome, out } = feed(seq2, j.add(P1, 120n, ACK, 'ack'), j);
    assert.equal(outcome, 'ackCommitReplay');
    assert.deepEqual(out, ['m1', 'm2', 'ack']);
  });

  it('re-emits only the rest of a sequence checkpointed while being dequeued', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    feed(seq, j.add(P1, 100n, CONT, 'm1'));
    feed(seq, j.add(P1, 110n, CONT, 'm2'));
    feed(seq, j.add(P1, 120n, CONT, 'm3'));
    seq.queue(j.add(P1, 130n, ACK, 'ack'));
    assert.equal(seq.step(), true); // m1, applied
    assert.equal(seq.step(), true); // m2, not yet applied when the transaction commits
    const args = asArgs(seq.checkpoint(0n));
    // Read through the last CONTINUE_TXN (the ACK is not counted until its sequence is done);
    // the producer's sequence now begins at m2, above m1's clock.
    assert.deepEqual(args.readThrough, new Map([['a/j', 30n]]));
    assert.deepEqual(args.producerStates, [{ journal: 'a/j', producer: P1, lastAck: 100n, begin: 10n }]);
    // Restart: the reader resumes at 30 and meets the ACK again, which replays from m2.
    const seq2 = new Sequencer<string>(args.readThrough, args.producerStates, 16);
    assert.deepEqual(feed(seq2, j.all[3]!, j), { outcome: 'ackCommitReplay', out: ['m2', 'm3', 'ack'] });
  });

  it('prunes producers whose clocks fall behind the horizon', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    const ms = 1_000_000n; // ns
    const c = (msAt: bigint) => (1_000_000_000_000n + (msAt * ms) / 100n) << 4n;
    feed(seq, j.add(P1, c(0n), OUT, 'old'));
    feed(seq, j.add(P2, c(5000n), OUT, 'new'));
    assert.equal(seq.checkpoint(10_000n * ms).states.length, 2);
    assert.equal(seq.checkpoint(0n).states.length, 2);
    const { states } = seq.checkpoint(1000n * ms);
    assert.deepEqual(states.map((s) => s.producer), [P2]);
    // Pruned for good.
    assert.equal(seq.checkpoint(0n).states.length, 1);
  });

  it('refuses to queue while a committed sequence remains to dequeue', () => {
    const j = new J('a/j');
    const seq = new Sequencer<string>(undefined, [], 16);
    seq.queue(j.add(P1, 100n, OUT, 'x'));
    assert.throws(() => seq.queue(j.add(P1, 200n, OUT, 'y')), /remain to dequeue/);
  });
});

describe('Sequencer memory', () => {
  it('lets go of dequeued envelopes (the ring does not keep a ring-full of consumed messages alive)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const refs: WeakRef<object>[] = [];
    const seq = new Sequencer<object>(undefined, [], 64);
    // Filled in a function of its own, so that no local of this one holds an envelope.
    const fill = () => {
      for (let i = 0; i < 200; i++) {
        const message = { i };
        refs.push(new WeakRef(message));
        // Half without a UUID, half OUTSIDE_TXN of one producer: both commit at once.
        const uuid = i % 2 === 0 ? new Uint8Array(16) : buildUUID(P1, BigInt(100 + i), OUT);
        const outcome = seq.queue({ journal: 'a/j', begin: BigInt(i * 10), end: BigInt(i * 10 + 10), message, uuid });
        assert.ok(isCommitOutcome(outcome), `message ${i}: ${outcome}`);
        while (seq.step()) assert.equal(seq.dequeued!.message, message);
      }
    };
    fill();
    // A WeakRef's target stays alive until the job that made it ends.
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    const alive = refs.map((r, i) => (r.deref() ? i : -1)).filter((i) => i >= 0);
    // The last one or two (released one step late) may remain; the ring holds 64.
    assert.ok(alive.length <= 2, `still alive: ${alive.join(', ')}`);
    assert.deepEqual(seq.readThrough(), new Map([['a/j', 2000n]]));
  });
});

describe('Checkpoint conversions', () => {
  it('build and flatten round-trip, with ACK intents', () => {
    const states: ProducerState[] = [
      { journal: 'a/j', producer: P1, lastAck: 123n, begin: -1n },
      { journal: 'a/j', producer: P2, lastAck: 456n, begin: 40n },
      { journal: 'b/j', producer: P1, lastAck: 789n, begin: 0n },
    ];
    const cp = buildCheckpoint({
      readThrough: new Map([['a/j', 100n], ['c/j', 7n]]),
      producerStates: states,
      ackIntents: [{ journal: 'out/j', intent: Buffer.from('{"UUID":"x"}\n') }],
    });
    assert.deepEqual(Object.keys(cp.sources).sort(), ['a/j', 'b/j', 'c/j']);
    assert.equal(cp.sources['b/j']!.read_through, 0n, 'a producer of an unread journal makes a source at 0');
    const back = Checkpoint.decode(Checkpoint.encode(cp).finish());
    assert.deepEqual(flattenReadThrough(back), new Map([['a/j', 100n], ['b/j', 0n], ['c/j', 7n]]));
    const sortKey = (s: ProducerState) => s.journal + Buffer.from(s.producer).toString('hex');
    assert.deepEqual(flattenProducerStates(back).sort((x, y) => sortKey(x).localeCompare(sortKey(y))), states);
    assert.deepEqual(flattenAckIntents(back), [{ journal: 'out/j', intent: Buffer.from('{"UUID":"x"}\n') }]);
  });
});

function asArgs(c: { offsets: Map<string, bigint>; states: ProducerState[] }) {
  return { readThrough: c.offsets, producerStates: c.states };
}
