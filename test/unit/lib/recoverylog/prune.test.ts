import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Fragment } from '../../../../src/lib/protocol/gen/broker/protocol.js';
import type { FSMHints, Segment } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import { collectLiveSegments, overlaps, planLogFragments } from '../../../../src/lib/recoverylog/prune.js';

const OWN = 'recovery/logs/shard-a';
const PARENT = 'recovery/logs/parent';

function seg(first: number, last: number, fo: number, lo: number, log = '', author = 1): Segment {
  return { author, first_seq_no: BigInt(first), last_seq_no: BigInt(last), first_offset: BigInt(fo), last_offset: BigInt(lo), first_checksum: first, log };
}

function hints(log: string, ...segs: Segment[][]): FSMHints {
  return { log, live_nodes: segs.map((s) => ({ fnode: s[0]!.first_seq_no, segments: s })), properties: [] };
}

function frag(begin: number, end: number, mod = 1n): Fragment {
  return Fragment.fromPartial({ journal: OWN, begin: BigInt(begin), end: BigInt(end), mod_time: mod, backing_store: 'file:///s/' });
}

describe('collectLiveSegments', () => {
  it('folds each hint set, opens its last segment, and keys segments by log', () => {
    const primary = hints(OWN, [seg(1, 3, 0, 300, PARENT, 1), seg(10, 12, 1000, 1200, '', 2)], [seg(11, 11, 1100, 1150, '', 2)]);
    const backup = hints(OWN, [seg(1, 3, 0, 300, PARENT, 1), seg(5, 6, 500, 600, '', 2)]);
    const { segmentsByLog, skipped } = collectLiveSegments([{ id: 'a', log: OWN, primary, backups: [backup] }]);
    assert.equal(skipped.size, 0);
    assert.deepEqual(segmentsByLog.get(PARENT), [seg(1, 3, 0, 300, PARENT, 1), seg(1, 3, 0, 300, PARENT, 1)]);
    // backup first (its last segment open), then the primary (its last segment open)
    assert.deepEqual(segmentsByLog.get(OWN), [seg(5, 6, 500, 0, OWN, 2), seg(10, 12, 1000, 0, OWN, 2)]);
  });

  it('skips the own log and every log the present hints name when a hint set is missing or empty', () => {
    const primary = hints(OWN, [seg(1, 3, 0, 300, PARENT), seg(10, 12, 1000, 1200)]);
    const other = { id: 'b', log: 'recovery/logs/shard-b', primary: hints('recovery/logs/shard-b', [seg(1, 2, 0, 50)]), backups: [] };
    for (const [backups, why] of [
      [[undefined], /has not written its backup.0 hints/],
      [[hints(OWN)], /its backup.0 hints have no live files/],
    ] as const) {
      const { segmentsByLog, skipped } = collectLiveSegments([{ id: 'a', log: OWN, primary, backups: [...backups] }, other]);
      assert.deepEqual([...skipped.keys()].sort(), [PARENT, OWN]);
      assert.match(skipped.get(PARENT)![0]!, why);
      assert.equal(segmentsByLog.has(OWN), false);
      assert.equal(segmentsByLog.has(PARENT), false);
      assert.ok(segmentsByLog.has('recovery/logs/shard-b'), 'other shards are still planned');
    }
    const { skipped } = collectLiveSegments([{ id: 'a', log: OWN, primary: undefined, backups: [] }]);
    assert.match(skipped.get(OWN)![0]!, /has not written its primary hints/);
  });

  it('refuses hints that do not fold or name another log', () => {
    assert.throws(() => collectLiveSegments([{ id: 'a', log: OWN, primary: hints(PARENT, [seg(1, 2, 0, 10)]), backups: [] }]), ValidationError);
    const broken = hints(OWN, [seg(1, 5, 100, 200)], [seg(3, 8, 50, 300)]);
    assert.throws(() => collectLiveSegments([{ id: 'a', log: OWN, primary: broken, backups: [] }]), /shard a: primary hints: .*first_offset decreases/);
  });
});

describe('planLogFragments', () => {
  const segs = [seg(10, 12, 1000, 1200, OWN), seg(20, 30, 3000, 0, OWN)];

  it('keeps fragments overlapping a segment, deletes the others, never deletes unpersisted ones', () => {
    const plan = planLogFragments(OWN, segs, [frag(0, 1000), frag(900, 1001), frag(1199, 1300), frag(1200, 3000), frag(1300, 2000, 0n), frag(3000, 9000), frag(9000, 0, 0n)]);
    assert.deepEqual(plan.map((d) => d.decision), ['delete', 'keep', 'keep', 'delete', 'keep-unpersisted', 'keep', 'keep']);
    assert.match(plan[1]!.reason, /overlaps hinted segment \[1000, 1200\)/);
    assert.match(plan[5]!.reason, /\[3000, head\)/);
    assert.match(plan[4]!.reason, /missing from the selection/);
    assert.match(plan[0]!.reason, /needed by none of the 2 hinted segments/);
  });

  it('keeps everything of a log without segments, and refuses segments of another log', () => {
    assert.deepEqual(planLogFragments(OWN, [], [frag(0, 10), frag(10, 20)]).map((d) => d.decision), ['keep', 'keep']);
    assert.throws(() => planLogFragments(OWN, [seg(1, 2, 0, 10, PARENT)], [frag(0, 10)]), ValidationError);
  });

  it('overlap is half-open on both ends, with 0 as an open end', () => {
    assert.equal(overlaps(seg(1, 1, 100, 200), frag(200, 300)), false);
    assert.equal(overlaps(seg(1, 1, 100, 200), frag(0, 100)), false);
    assert.equal(overlaps(seg(1, 1, 100, 200), frag(199, 300)), true);
    assert.equal(overlaps(seg(1, 1, 100, 0), frag(5000, 6000)), true);
    assert.equal(overlaps(seg(1, 1, 100, 200), frag(150, 0)), true);
  });
});
