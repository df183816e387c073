import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Segment } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import { SegmentSet, liveSegments } from '../../../../src/lib/recoverylog/segments.js';

const L = 'logs/one';
const M = 'logs/two';

function seg(author: number, first: number, last: number, fo: number, lo: number, log = L, checksum = first * 10): Segment {
  return { author, first_seq_no: BigInt(first), last_seq_no: BigInt(last), first_offset: BigInt(fo), last_offset: BigInt(lo), log, first_checksum: checksum };
}

function fold(...segs: Segment[]): Segment[] {
  const s = new SegmentSet();
  for (const x of segs) s.add(x);
  return s.segments;
}

const bad = (re: RegExp) => (e: Error) => e instanceof ValidationError && re.test(e.message);

describe('SegmentSet', () => {
  it('1: rejects a later segment of the same log at a lower first offset', () => {
    assert.throws(() => fold(seg(1, 1, 5, 100, 200), seg(1, 3, 8, 50, 300)), bad(/first_offset decreases/));
  });
  it('2: rejects an open-ended segment before a closed one', () => {
    assert.throws(() => fold(seg(1, 1, 5, 100, 0), seg(1, 3, 8, 150, 300)), bad(/open-ended segment precedes a closed one/));
  });
  it('3: rejects an open-ended segment followed in another log', () => {
    assert.throws(() => fold(seg(1, 1, 5, 100, 0), seg(1, 6, 8, 0, 0, M)), bad(/open-ended segment precedes one of another log/));
  });
  it('4-5: rejects last offsets that decrease as last seq numbers grow', () => {
    assert.throws(() => fold(seg(1, 1, 5, 100, 400), seg(1, 2, 8, 150, 300)), bad(/last_offset decreases/));
    assert.throws(() => fold(seg(1, 1, 8, 100, 300), seg(1, 2, 5, 150, 400)), bad(/last_offset decreases/));
  });
  it('6: rejects two first checksums for one first op', () => {
    assert.throws(() => fold(seg(1, 3, 5, 100, 200, L, 7), seg(1, 3, 4, 100, 150, L, 8)), bad(/first_checksum differs/));
  });
  it('7-9: keeps apart a gap, and adjacent segments of other authors or logs', () => {
    assert.equal(fold(seg(1, 1, 5, 100, 200), seg(1, 7, 8, 250, 300)).length, 2);
    assert.equal(fold(seg(1, 1, 5, 100, 200), seg(2, 6, 8, 200, 300)).length, 2);
    assert.equal(fold(seg(1, 1, 5, 100, 200, M), seg(1, 6, 8, 200, 300, L)).length, 2);
  });
  it('10-11: rejects overlapping segments of other authors or logs', () => {
    assert.throws(() => fold(seg(1, 1, 5, 100, 200), seg(2, 4, 8, 150, 300)), bad(/different authors/));
    assert.throws(() => fold(seg(1, 1, 5, 100, 200, M), seg(1, 4, 8, 150, 300, L)), bad(/different logs/));
  });
  it('12: merges overlapping, adjacent, covered and identical segments', () => {
    // overlap: extended, the first checksum of the earlier kept
    assert.deepEqual(fold(seg(1, 1, 5, 100, 200), seg(1, 4, 8, 150, 300)), [{ ...seg(1, 1, 8, 100, 300) }]);
    // adjacent of one author and log
    assert.deepEqual(fold(seg(1, 6, 8, 200, 300), seg(1, 1, 5, 100, 200)), [seg(1, 1, 8, 100, 300)]);
    // covered
    assert.deepEqual(fold(seg(1, 1, 8, 100, 300), seg(1, 3, 4, 120, 150)), [seg(1, 1, 8, 100, 300)]);
    // same first: the tighter (larger) lower bound of the first offset
    assert.deepEqual(fold(seg(1, 3, 8, 100, 300), seg(1, 3, 5, 120, 200)), [seg(1, 3, 8, 120, 300)]);
    // same last: a known last offset replaces an open one
    assert.deepEqual(fold(seg(1, 1, 8, 100, 0), seg(1, 1, 8, 100, 300)), [seg(1, 1, 8, 100, 300)]);
    // open-ended segments merge open-ended
    assert.deepEqual(fold(seg(1, 1, 5, 100, 0), seg(1, 4, 9, 120, 0)), [seg(1, 1, 9, 100, 0)]);
  });
  it('bridges several entries and stays ordered', () => {
    const out = fold(seg(1, 10, 12, 1000, 1200), seg(1, 1, 2, 10, 20), seg(2, 5, 6, 50, 60), seg(1, 3, 4, 20, 40), seg(1, 13, 20, 1200, 0));
    assert.deepEqual(out, [seg(1, 1, 4, 10, 40, L, 10), seg(2, 5, 6, 50, 60), seg(1, 10, 20, 1000, 0)]);
  });
  it('validates every segment added', () => {
    assert.throws(() => fold(seg(0, 1, 2, 0, 10)), bad(/author is zero/));
    assert.throws(() => fold(seg(1, 0, 2, 0, 10)), bad(/first_seq_no <= 0/));
    assert.throws(() => fold(seg(1, 1, 2, -1, 10)), bad(/first_offset < 0/));
    assert.throws(() => fold(seg(1, 1, 2, 0, 10, '')), bad(/segment log/));
  });
});

describe('liveSegments', () => {
  it('folds every live node, an empty log meaning the hints log', () => {
    const segs = liveSegments({
      log: L,
      live_nodes: [
        { fnode: 1n, segments: [{ ...seg(1, 1, 3, 0, 90, M) }, { ...seg(2, 8, 9, 400, 0, '') }] },
        { fnode: 4n, segments: [{ ...seg(1, 4, 6, 90, 200, M) }, { ...seg(2, 10, 12, 450, 0, '') }] },
      ],
      properties: [],
    });
    assert.deepEqual(segs, [seg(1, 1, 6, 0, 200, M, 10), seg(2, 8, 12, 400, 0, L)]);
    assert.deepEqual(liveSegments({ log: L, live_nodes: [], properties: [] }), []);
  });
  it('requires the last segment in the hints log', () => {
    assert.throws(
      () => liveSegments({ log: L, live_nodes: [{ fnode: 1n, segments: [seg(1, 1, 3, 0, 90, M)] }], properties: [] }),
      bad(/not in the hints' log/),
    );
  });
});
