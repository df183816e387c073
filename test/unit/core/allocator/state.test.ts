// Unit tests of the allocation state (src/core/allocator/state.ts).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { buildState, isLeader, mayExit, type RawKeyValue } from '../../../../src/core/allocator/index.js';
import { decoders, FakeEtcd, ROOT } from './sim.js';

const enc = new TextEncoder();
function kv(key: string, value: string, createRevision: number, lease = 0n): RawKeyValue {
  return { key, value: enc.encode(value), createRevision: BigInt(createRevision), modRevision: BigInt(createRevision + 100), lease };
}

describe('buildState', () => {
  it('picks as leader the member key with the lowest create revision, whatever its order', () => {
    const s = buildState(
      ROOT,
      [
        kv(`${ROOT}/members/a#one`, '{"limit":1}', 9),
        kv(`${ROOT}/members/b#two`, '{"limit":1}', 4),
        kv(`${ROOT}/members/c#three`, '{"limit":1}', 7),
      ],
      decoders,
    );
    assert.equal(s.leaderKey, `${ROOT}/members/b#two`);
    assert.equal(isLeader(s, `${ROOT}/members/b#two`), true);
    assert.equal(isLeader(s, `${ROOT}/members/a#one`), false);
    // Equal revisions (only in hand-made snapshots): the first in key order wins.
    const t = buildState(
      ROOT,
      [kv(`${ROOT}/members/b#x`, '{"limit":1}', 3), kv(`${ROOT}/members/a#x`, '{"limit":1}', 3)],
      decoders,
    );
    assert.equal(t.leaderKey, `${ROOT}/members/a#x`);
    assert.equal(buildState(ROOT, [], decoders).leaderKey, undefined);
  });

  it('collects zones, slots, per-member counts and ordered assignments per item', () => {
    const e = new FakeEtcd();
    e.item('i2', 2);
    e.item('i1', 1);
    e.item('i0', 0);
    e.member('zb', 'm3', 4);
    e.member('za', 'm1', 2);
    e.member('za', 'm2', 3);
    e.member('zc', 'idle', 0);
    e.assign('i2', 'zb', 'm3', 1);
    e.assign('i2', 'za', 'm2', 0);
    e.assign('i1', 'za', 'm1', 0);
    e.assign('gone', 'za', 'm1', 0); // item deleted
    e.assign('i1', 'zz', 'ghost', 1); // member gone
    const s = e.state();

    assert.deepEqual(s.items.map((i) => i.id), ['i0', 'i1', 'i2']);
    assert.deepEqual(s.members.map((m) => `${m.zone}#${m.suffix}`), ['za#m1', 'za#m2', 'zb#m3', 'zc#idle']);
    assert.deepEqual(s.zones, ['za', 'zb']); // zc has no capacity
    assert.deepEqual(s.zoneSlots, [5, 4]);
    assert.equal(s.itemSlots, 3);
    assert.equal(s.memberSlots, 9);
    assert.equal(s.maxReplication, 2);
    assert.deepEqual(s.items[2]!.assignments.map((a) => `${a.zone}#${a.suffix}#${a.slot}`), ['za#m2#0', 'zb#m3#1']);
    assert.deepEqual(s.items[1]!.assignments.map((a) => a.memberIndex), [0, -1]);
    assert.deepEqual(s.members.map((m) => [m.totalCount, m.primaryCount]), [
      [1, 1], // the dead assignment of "gone" is not counted
      [1, 1],
      [1, 0],
      [0, 0],
    ]);
    const dead = s.assignments.filter((a) => a.itemIndex < 0);
    assert.deepEqual(dead.map((a) => a.itemId), ['gone']);
    assert.deepEqual(s.assignments.map((a) => a.kv.key), [...s.assignments.map((a) => a.kv.key)].sort());
    assert.equal(s.members[3]!.exiting, true); // item limit 0
    assert.equal(s.members[0]!.exiting, false);
    assert.equal(s.items[2]!.assignments[0]!.value, 'consistent');
  });

  it('reports and ignores keys that do not parse or decode', () => {
    const s = buildState(
      ROOT,
      [
        kv(`${ROOT}/items/ok`, '{"r":1}', 2),
        kv(`${ROOT}/items/bad`, 'not json', 3),
        kv(`${ROOT}/members/no-suffix`, '{"limit":1}', 4),
        kv(`${ROOT}/assign/i#z#s#first`, '', 5),
        kv(`${ROOT}/other/x`, '', 6),
        kv(`/elsewhere/x`, '', 7),
      ],
      decoders,
    );
    assert.deepEqual(s.items.map((i) => i.id), ['ok']);
    assert.equal(s.members.length, 0);
    assert.equal(s.assignments.length, 0);
    assert.deepEqual(s.problems.map((p) => p.key), [
      `${ROOT}/items/bad`,
      `${ROOT}/members/no-suffix`,
      `${ROOT}/assign/i#z#s#first`,
      `${ROOT}/other/x`,
      `/elsewhere/x`,
    ]);
    assert.match(s.problems[0]!.reason, /cannot decode/);
  });

  it('grants shed capacity to exiting members, oldest first, from spare capacity only', () => {
    const e = new FakeEtcd();
    e.member('za', 'keep', 4);
    for (let i = 0; i < 4; i++) e.item(`i${i}`, 1);
    e.member('za', 'old', 4, true);
    e.member('zb', 'new', 4, true);
    e.member('zb', 'other', 4);
    // 16 slots, 4 wanted: 12 spare. "old" (older) sheds 4, "new" sheds 4.
    let s = e.state();
    const by = (x: typeof s) => new Map(x.members.map((m) => [m.suffix, m]));
    assert.equal(by(s).get('old')!.shedCapacity, 4);
    assert.equal(by(s).get('new')!.shedCapacity, 4);
    assert.equal(by(s).get('old')!.effectiveLimit, 0);
    assert.equal(s.memberSlots, 8);

    // Only 2 spare slots: the older exiting member sheds them, the younger none.
    for (let i = 4; i < 14; i++) e.item(`i${i}`, 1);
    s = e.state();
    assert.equal(by(s).get('old')!.shedCapacity, 2);
    assert.equal(by(s).get('new')!.shedCapacity, 0);
    assert.equal(s.memberSlots, 14);

    // No more than (#members - max replication) members shed.
    const f = new FakeEtcd();
    f.item('x', 3);
    f.member('z', 'a', 5, true);
    f.member('z', 'b', 5, true);
    f.member('z', 'c', 5, true);
    s = f.state();
    assert.deepEqual(s.members.map((m) => m.shedCapacity), [0, 0, 0]);
    f.member('z', 'd', 5);
    s = f.state();
    assert.deepEqual(s.members.map((m) => m.shedCapacity), [5, 0, 0, 0]);
  });

  it('says an exiting member may stop once it holds no assignment', () => {
    const e = new FakeEtcd();
    e.item('i', 1);
    e.member('z', 'a', 0);
    e.member('z', 'b', 1);
    e.assign('i', 'z', 'a', 0);
    assert.equal(mayExit(e.state(), `${ROOT}/members/z#a`), false);
    assert.equal(mayExit(e.state(), `${ROOT}/members/z#b`), false);
    e.delete(`${ROOT}/assign/i#z#a#0`);
    assert.equal(mayExit(e.state(), `${ROOT}/members/z#a`), true);
    assert.equal(mayExit(e.state(), `${ROOT}/members/z#nobody`), false);
  });
});
