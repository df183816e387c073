// Unit tests of the desired-assignment solver (src/core/allocator/solve.ts).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { buildState, networkHash, scaleAndRound, solveDesired } from '../../../../src/core/allocator/index.js';
import { decoders, desiredByItem, FakeEtcd, ROOT } from './sim.js';
import { rng } from './rand.js';

function solve(e: FakeEtcd) {
  const s = e.state();
  const d = solveDesired(s);
  return { s, d, by: desiredByItem(s, d) };
}

describe('solveDesired', () => {
  it('places every replica across zones on an empty cluster', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 2);
    e.member('zone-a', 'member-A2', 2);
    e.member('zone-b', 'member-B', 4);
    const { d, by } = solve(e);
    assert.equal(d.total, 6);
    assert.equal(d.wanted, 6);
    assert.deepEqual(Object.fromEntries(by), {
      'item-1': ['zone-a#member-A1'],
      'item-2': ['zone-a#member-A2', 'zone-b#member-B'],
      'item-3': ['zone-a#member-A1', 'zone-a#member-A2', 'zone-b#member-B'],
    });
  });

  it('serves items in id order when capacity is short', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 1);
    let { d, by } = solve(e);
    assert.equal(d.total, 1);
    assert.deepEqual(Object.fromEntries(by), { 'item-1': ['zone-a#member-A1'], 'item-2': [], 'item-3': [] });

    e.member('zone-a', 'member-A2', 2);
    ({ d, by } = solve(e));
    assert.equal(d.total, 3);
    assert.equal(by.get('item-1')!.length, 1);
    assert.equal(by.get('item-2')!.length, 2);
    assert.deepEqual(by.get('item-3'), []);
  });

  it('keeps one item in one zone only when the other zone cannot take it', () => {
    const e = new FakeEtcd();
    for (const id of ['item-1', 'item-2', 'item-3']) e.item(id, 3);
    e.member('zone-a', 'A1', 100);
    e.member('zone-a', 'A2', 100);
    e.member('zone-a', 'A3', 100);
    e.member('zone-b', 'B', 2);
    const { d, by } = solve(e);
    assert.equal(d.total, 9);
    const single = [...by.values()].filter((ms) => new Set(ms.map((m) => m.split('#')[0])).size === 1);
    assert.equal(single.length, 1); // B holds two items; the third cannot span two zones

    e.member('zone-b', 'B', 3);
    const again = solve(e);
    for (const ms of again.by.values()) assert.equal(new Set(ms.map((m) => m.split('#')[0])).size, 2);
  });

  it('keeps current assignments when they still fit', () => {
    const e = new FakeEtcd();
    e.item('i1', 2);
    e.item('i2', 2);
    e.member('a', 'm1', 2);
    e.member('a', 'm2', 2);
    e.member('b', 'm3', 2);
    e.member('b', 'm4', 2);
    e.assign('i1', 'a', 'm2', 0);
    e.assign('i1', 'b', 'm4', 1);
    e.assign('i2', 'a', 'm1', 1);
    e.assign('i2', 'b', 'm3', 0);
    const { by } = solve(e);
    assert.deepEqual(by.get('i1'), ['a#m2', 'b#m4']);
    assert.deepEqual(by.get('i2'), ['a#m1', 'b#m3']);
    // Over its fair share (1 of 4 wanted over 8 slots, per member of limit 2), m2 gives one up.
    e.delete(`${ROOT}/assign/i2#a#m1#1`);
    e.assign('i2', 'a', 'm2', 1);
    const moved = solve(e).by;
    assert.deepEqual(moved.get('i1'), ['a#m2', 'b#m4']);
    assert.deepEqual(moved.get('i2'), ['a#m1', 'b#m3']);
  });

  it('balances to each member\'s fair share, rounded up', () => {
    assert.equal(scaleAndRound(3, 6, 7), 3);
    assert.equal(scaleAndRound(3, 6, 9), 2);
    assert.equal(scaleAndRound(1, 6, 9), 1);
    assert.equal(scaleAndRound(5, 9, 4), 5);
    const e = new FakeEtcd();
    for (let i = 0; i < 12; i++) e.item(`i${String(i).padStart(2, '0')}`, 1);
    e.member('z', 'big', 100);
    e.member('z', 'small', 2);
    e.member('z', 'mid', 10);
    const { s, d } = solve(e);
    const counts = new Map<string, number>();
    for (const ms of d.byItem) for (const m of ms) counts.set(s.members[m]!.suffix, (counts.get(s.members[m]!.suffix) ?? 0) + 1);
    // 12 wanted over 112 slots: fair shares ceil(100·12/112)=11, ceil(2·12/112)=1, ceil(10·12/112)=2.
    assert.ok(counts.get('big')! <= 11);
    assert.ok((counts.get('small') ?? 0) <= 1);
    assert.ok((counts.get('mid') ?? 0) <= 2);
    assert.equal(d.total, 12);
  });

  it('never uses members without effective capacity', () => {
    const e = new FakeEtcd();
    e.item('i', 2);
    e.member('a', 'zero', 0);
    e.member('a', 'ok', 1);
    e.member('b', 'ok', 1);
    e.assign('i', 'a', 'zero', 0);
    const { by } = solve(e);
    assert.deepEqual(by.get('i'), ['a#ok', 'b#ok']);
  });

  it('is deterministic: same keyspace in any order, same answer; the hash follows items and members only', () => {
    const e = new FakeEtcd();
    const r = rng(3);
    for (let i = 0; i < 40; i++) e.item(`item-${i}`, 1 + Math.floor(r() * 3));
    for (let m = 0; m < 7; m++) e.member(`zone-${m % 3}`, `m${m}`, 5 + Math.floor(r() * 20));
    e.assign('item-3', 'zone-1', 'm1', 0);
    const kvs = e.snapshot();
    const first = solveDesired(buildState(ROOT, kvs, decoders));
    for (let k = 0; k < 5; k++) {
      const shuffled = [...kvs].sort(() => r() - 0.5);
      const s = buildState(ROOT, shuffled, decoders);
      assert.deepEqual(solveDesired(s), first);
      assert.equal(networkHash(s), networkHash(e.state()));
    }
    const before = networkHash(e.state());
    e.assign('item-4', 'zone-1', 'm1', 0);
    assert.equal(networkHash(e.state()), before);
    e.member('zone-0', 'm0', 99);
    assert.notEqual(networkHash(e.state()), before);
  });

  it('gives an item no replicas when its replication is zero', () => {
    const e = new FakeEtcd();
    e.item('i', 0);
    e.member('a', 'm', 3);
    e.assign('i', 'a', 'm', 0);
    assert.deepEqual(solve(e).by.get('i'), []);
  });
});
