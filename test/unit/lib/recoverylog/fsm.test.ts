import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RecordedOp } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { FSM } from '../../../../src/lib/recoverylog/fsm.js';
import { encodeOpFrame } from '../../../../src/lib/recoverylog/framing.js';
import { crc32c } from '../../../../src/lib/recoverylog/crc32c.js';
import { emptyHints } from '../../../../src/lib/recoverylog/hints.js';

const LOG = 'recovery/logs/a';

/** An op as a reader hands it over (meta-fields set) and its payload. */
function mk(p: Partial<RecordedOp>, at: bigint): { op: RecordedOp; payload: Uint8Array } {
  const op = { ...RecordedOp.fromPartial({}), ...p };
  const frame = encodeOpFrame(op, op.write ? new Uint8Array(Number(op.write.length)) : undefined);
  const payload = frame.subarray(8, frame.length - Number(op.write?.length ?? 0n));
  return { op: { ...op, first_offset: at, last_offset: at + BigInt(frame.length), log: LOG }, payload };
}

/** Builds ops one after the other for `fsm`'s current state; returns them with their offsets. */
function chain(fsm: FSM, author: number, bodies: Partial<RecordedOp>[], start = 0n) {
  const out: { op: RecordedOp; payload: Uint8Array }[] = [];
  let at = start;
  for (const b of bodies) {
    const x = mk({ ...b, seq_no: fsm.nextSeqNo, checksum: fsm.nextChecksum, author }, at);
    assert.equal(fsm.apply(x.op, x.payload), 'applied');
    out.push(x);
    at = x.op.last_offset;
  }
  return out;
}

describe('FSM', () => {
  it('sequences ops and continues the CRC-32C over their payloads', () => {
    const fsm = new FSM(emptyHints(LOG));
    assert.equal(fsm.nextSeqNo, 1n);
    assert.equal(fsm.nextChecksum, 0);
    const ops = chain(fsm, 9, [{ create: { path: '/a' } }, { write: { fnode: 1n, offset: 0n, length: 4n } }, {}]);
    assert.equal(fsm.nextSeqNo, 4n);
    assert.equal(fsm.nextChecksum, crc32c(Buffer.concat(ops.map((o) => o.payload))));
    // Wrong seq, wrong checksum: no transition.
    const dup = ops[2]!;
    assert.equal(fsm.apply(dup.op, dup.payload), 'wrong-seq-no');
    const off = mk({ seq_no: 4n, checksum: 1, author: 9 }, 0n);
    assert.equal(fsm.apply(off.op, off.payload), 'checksum-mismatch');
    assert.equal(fsm.nextSeqNo, 4n);
  });

  it('tracks links, unlinks and properties, with their conflicts', () => {
    const fsm = new FSM(emptyHints(LOG));
    chain(fsm, 9, [{ create: { path: '/a' } }, { link: { fnode: 1n, path: '/b' } }, { property: { path: '/IDENTITY', content: 'x' } }]);
    const next = (b: Partial<RecordedOp>) => mk({ ...b, seq_no: fsm.nextSeqNo, checksum: fsm.nextChecksum, author: 9 }, 0n);
    const tryOp = (b: Partial<RecordedOp>) => {
      const x = next(b);
      return fsm.apply(x.op, x.payload);
    };
    assert.equal(tryOp({ create: { path: '/b' } }), 'link-exists');
    assert.equal(tryOp({ create: { path: '/IDENTITY' } }), 'property-exists');
    assert.equal(tryOp({ link: { fnode: 1n, path: '/IDENTITY' } }), 'property-exists');
    assert.equal(tryOp({ unlink: { fnode: 1n, path: '/nope' } }), 'no-such-link');
    assert.equal(tryOp({ property: { path: '/a', content: '' } }), 'link-exists');
    assert.equal(tryOp({ write: { fnode: 77n, offset: 0n, length: 1n } }), 'untracked');
    assert.equal(tryOp({ unlink: { fnode: 1n, path: '/a' } }), 'applied');
    assert.deepEqual([...fsm.liveNodes.get(1n)!.links], ['/b']);
    assert.equal(tryOp({ unlink: { fnode: 1n, path: '/b' } }), 'applied');
    assert.equal(fsm.liveNodes.size, 0);
    assert.deepEqual([...fsm.properties], [['/IDENTITY', 'x']]);
  });

  it('builds hints at any point that replay to the same state', () => {
    const w = new FSM(emptyHints(LOG));
    const all = [
      ...chain(w, 1, [{ create: { path: '/a' } }, { write: { fnode: 1n, offset: 0n, length: 3n } }, { create: { path: '/tmp' } }]),
    ];
    const at = all[all.length - 1]!.op.last_offset;
    all.push(...chain(w, 2, [{}, { unlink: { fnode: 3n, path: '/tmp' } }, { create: { path: '/c' } }, { write: { fnode: 1n, offset: 3n, length: 2n } }], at));
    const hints = w.buildHints(LOG);
    assert.deepEqual(hints.live_nodes.map((n) => [n.fnode, n.segments.map((s) => [s.author, s.first_seq_no, s.last_seq_no, s.log])]), [
      [1n, [[1, 1n, 2n, ''], [2, 7n, 7n, '']]],
      [6n, [[2, 6n, 6n, '']]],
    ]);
    // Replaying the whole history from those hints: after seq 2 the state jumps to the next hinted
    // segment (seq 6, author 2), so the dead /tmp's create, the no-op and the unlink are left out.
    const r = new FSM(hints);
    const outcomes = all.map((x) => r.apply(x.op, x.payload));
    assert.deepEqual(outcomes, ['applied', 'applied', 'not-hinted-author', 'wrong-seq-no', 'wrong-seq-no', 'applied', 'applied']);
    assert.equal(r.hasRemainingHints(), false);
    assert.equal(r.nextSeqNo, w.nextSeqNo);
    assert.equal(r.nextChecksum, w.nextChecksum);
    assert.deepEqual([...r.links].sort(), [...w.links].sort());
    assert.deepEqual(r.buildHints(LOG), hints);
  });

  it('fences authors while hinted segments remain, and jumps between segments', () => {
    const w = new FSM(emptyHints(LOG));
    const a = chain(w, 1, [{ create: { path: '/a' } }]);
    const stale = w.clone();
    const b = chain(w, 2, [{}, { write: { fnode: 1n, offset: 0n, length: 1n } }], a[0]!.op.last_offset);
    // The stale writer continues its own history: same seq and checksum as b's no-op.
    const s = chain(stale, 1, [{ write: { fnode: 1n, offset: 0n, length: 1n } }], 500n);
    const hints = w.buildHints(LOG);
    const r = new FSM(hints);
    assert.equal(r.apply(a[0]!.op, a[0]!.payload), 'applied');
    // Next hinted segment is seq 3 by author 2: b's no-op (seq 2) is outside any segment.
    assert.equal(r.nextSeqNo, 3n);
    assert.equal(r.apply(s[0]!.op, s[0]!.payload), 'not-hinted-author');
    assert.equal(r.apply(b[1]!.op, b[1]!.payload), 'applied');
    assert.equal(r.hasRemainingHints(), false);
  });

  it('rejects a non-create op at the seq of the next hinted fnode', () => {
    const w = new FSM(emptyHints(LOG));
    chain(w, 1, [{ create: { path: '/a' } }]);
    const hints = w.buildHints(LOG);
    const r = new FSM(hints);
    const x = mk({ seq_no: 1n, checksum: 0, author: 1, link: { fnode: 1n, path: '/z' } }, 0n);
    assert.equal(r.apply(x.op, x.payload), 'expected-hinted-fnode');
  });

  it('keeps hinted properties over older property ops inside hinted segments', () => {
    const w = new FSM(emptyHints(LOG));
    const ops = chain(w, 1, [{ create: { path: '/a' } }, { property: { path: '/P', content: 'old' } }, { write: { fnode: 1n, offset: 0n, length: 1n } }]);
    const hints = w.buildHints(LOG);
    hints.properties = [{ path: '/P', content: 'new' }]; // as if a later update lay outside the segments
    const r = new FSM(hints);
    assert.deepEqual(ops.map((x) => r.apply(x.op, x.payload)), ['applied', 'untracked', 'applied']);
    assert.equal(r.properties.get('/P'), 'new');
  });
  it('leaves untracked a file created inside a hinted segment but not hinted (its unlink may be jumped over)', () => {
    const w = new FSM(emptyHints(LOG));
    const a = chain(w, 1, [{ create: { path: '/a' } }, { create: { path: '/tmp' } }, { write: { fnode: 1n, offset: 0n, length: 1n } }]);
    const b = chain(w, 2, [{}, { unlink: { fnode: 2n, path: '/tmp' } }, { write: { fnode: 1n, offset: 0n, length: 1n } }], a[2]!.op.last_offset);
    const hints = w.buildHints(LOG);
    assert.deepEqual(hints.live_nodes[0]!.segments.map((x) => [x.first_seq_no, x.last_seq_no]), [[1n, 3n], [6n, 6n]]);
    const r = new FSM(hints);
    assert.deepEqual([...a, ...b].map((x) => r.apply(x.op, x.payload)), ['applied', 'untracked', 'applied', 'wrong-seq-no', 'wrong-seq-no', 'applied']);
    assert.deepEqual([...r.links.keys()], ['/a']);
  });
});
