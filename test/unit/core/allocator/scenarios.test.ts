// Allocation scenarios over several rounds, modelled on upstream's allocator scenarios: an
// in-memory etcd applies each round's transactions; between idle rounds replicas "catch up"
// (their assignment values become consistent), as real replicas do.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { planRound, solveDesired } from '../../../../src/core/allocator/index.js';
import { consistent, currentByItem, desiredByItem, FakeEtcd, ROOT, runRounds } from './sim.js';

const A = (i: string, z: string, s: string, slot: number) => `${ROOT}/assign/${i}#${z}#${s}#${slot}`;

/** Checks the settled keyspace: desired reached, slots 0..n-1, limits kept. */
function settled(e: FakeEtcd) {
  const log = runRounds(e);
  const s = e.state();
  assert.deepEqual(currentByItem(s), desiredByItem(s, log.desired), 'current equals desired once settled');
  for (const it of s.items) {
    assert.deepEqual(
      it.assignments.map((a) => a.slot).sort((x, y) => x - y),
      it.assignments.map((_, k) => k),
      `slots of ${it.id} are packed`,
    );
  }
  for (const m of s.members) assert.ok(m.totalCount <= m.itemLimit, `${m.suffix} within its limit`);
  return log;
}

/** Every round must keep, for every item, at least min(r, consistent replicas it had) consistent replicas. */
function neverUnderReplicated(e: FakeEtcd, rounds = 40) {
  for (let k = 0; k < rounds; k++) {
    const s = e.state();
    const d = solveDesired(s);
    const plan = planRound(s, d, consistent);
    if (plan.txns.length === 0) {
      if (e.markAllConsistent() === 0) return;
      continue;
    }
    const before = new Map(s.items.map((it) => [it.id, it.assignments.filter((a) => a.value === 'consistent').length]));
    for (const t of plan.txns) assert.ok(e.txn(t));
    const after = e.state();
    for (const it of after.items) {
      const n = it.assignments.filter((a) => a.value === 'consistent').length;
      assert.ok(n >= Math.min(it.desiredReplication, before.get(it.id)!), `${it.id} lost consistent replicas`);
    }
  }
  assert.fail('did not settle');
}

describe('allocation scenarios', () => {
  it('initial allocation spans both zones without passing any limit', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 2);
    e.member('zone-a', 'member-A2', 2);
    e.member('zone-b', 'member-B', 4);
    const log = settled(e);
    assert.equal(log.rounds, 1);
    assert.deepEqual(e.assignmentKeys(), [
      A('item-1', 'zone-a', 'member-A1', 0),
      A('item-2', 'zone-a', 'member-A2', 0),
      A('item-2', 'zone-b', 'member-B', 1),
      A('item-3', 'zone-a', 'member-A1', 0),
      A('item-3', 'zone-a', 'member-A2', 1),
      A('item-3', 'zone-b', 'member-B', 2),
    ]);
  });

  it('a stable allocation stays as it is', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 4);
    e.member('zone-a', 'member-A2', 2);
    e.member('zone-a', 'member-A3', 1);
    e.member('zone-b', 'member-B1', 4);
    e.assign('item-1', 'zone-a', 'member-A1', 0);
    e.assign('item-2', 'zone-a', 'member-A2', 1);
    e.assign('item-2', 'zone-b', 'member-B1', 0);
    e.assign('item-3', 'zone-a', 'member-A1', 2);
    e.assign('item-3', 'zone-a', 'member-A3', 0);
    e.assign('item-3', 'zone-b', 'member-B1', 1);
    const keys = e.assignmentKeys();
    assert.equal(settled(e).rounds, 0);
    assert.deepEqual(e.assignmentKeys(), keys);
  });

  it('a new member takes load once its share says so, without dropping replicas', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 3);
    e.member('zone-a', 'member-A2', 2);
    e.member('zone-a', 'member-A3', 1);
    settled(e);
    const before = e.assignmentKeys();

    // Limit 1: every current member is still within its (rounded up) fair share.
    e.member('zone-a', 'member-A4', 1);
    assert.equal(settled(e).rounds, 0);
    assert.deepEqual(e.assignmentKeys(), before);

    // Limit 3: A1 (3 items, fair share 2) hands one over to A4.
    e.member('zone-a', 'member-A4', 3);
    neverUnderReplicated(e);
    const s = e.state();
    const counts = Object.fromEntries(s.members.map((m) => [m.suffix, m.totalCount]));
    assert.deepEqual(counts, { 'member-A1': 2, 'member-A2': 2, 'member-A3': 1, 'member-A4': 1 });
    assert.equal(settled(e).rounds, 0);
  });

  it('a member whose keys are gone (lease expired, zone lost) is replaced', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 4);
    e.member('zone-a', 'member-A2', 2);
    e.member('zone-a', 'member-A3', 1);
    e.member('zone-b', 'member-B1', 4);
    e.assign('item-1', 'zone-a', 'member-A1', 0);
    e.assign('item-2', 'zone-a', 'member-A2', 1);
    e.assign('item-2', 'zone-b', 'member-B1', 0);
    e.assign('item-3', 'zone-a', 'member-A1', 2);
    e.assign('item-3', 'zone-a', 'member-A3', 0);
    e.assign('item-3', 'zone-b', 'member-B1', 1);
    assert.equal(settled(e).rounds, 0);

    e.expireMember('zone-b', 'member-B1');
    settled(e);
    assert.deepEqual(e.assignmentKeys(), [
      A('item-1', 'zone-a', 'member-A1', 0),
      A('item-2', 'zone-a', 'member-A1', 1),
      A('item-2', 'zone-a', 'member-A2', 0),
      A('item-3', 'zone-a', 'member-A1', 1),
      A('item-3', 'zone-a', 'member-A2', 2),
      A('item-3', 'zone-a', 'member-A3', 0),
    ]);
  });

  it('an exiting member (item limit 0) is drained only once its replacements are consistent', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A', 2);
    e.member('zone-b', 'member-B', 4);
    e.member('zone-a', 'member-old', 0);
    e.member('zone-a', 'member-new', 3);
    e.assign('item-1', 'zone-a', 'member-A', 0);
    e.assign('item-2', 'zone-a', 'member-old', 0);
    e.assign('item-2', 'zone-b', 'member-B', 1);
    e.assign('item-3', 'zone-a', 'member-old', 0);
    e.assign('item-3', 'zone-a', 'member-A', 1);
    e.assign('item-3', 'zone-b', 'member-B', 2);

    // Replacements are added; member-old keeps its replicas while they are not consistent.
    const s = e.state();
    const d = solveDesired(s);
    let plan = planRound(s, d, consistent);
    for (const t of plan.txns) assert.ok(e.txn(t));
    assert.deepEqual(e.assignmentKeys(), [
      A('item-1', 'zone-a', 'member-A', 0),
      A('item-2', 'zone-a', 'member-new', 2),
      A('item-2', 'zone-a', 'member-old', 0),
      A('item-2', 'zone-b', 'member-B', 1),
      A('item-3', 'zone-a', 'member-A', 1),
      A('item-3', 'zone-a', 'member-new', 3),
      A('item-3', 'zone-a', 'member-old', 0),
      A('item-3', 'zone-b', 'member-B', 2),
    ]);
    plan = planRound(e.state(), d, consistent);
    assert.deepEqual(plan.txns, []);

    // Once they are, member-old goes and primaries are handed over.
    settled(e);
    assert.deepEqual(e.assignmentKeys().filter((k) => k.includes('member-old')), []);
    const after = e.state();
    for (const it of after.items) assert.equal(it.assignments.filter((a) => a.slot === 0).length, 1);
    assert.deepEqual(Object.fromEntries(currentByItem(after)), {
      'item-1': ['zone-a#member-A'],
      'item-2': ['zone-a#member-new', 'zone-b#member-B'],
      'item-3': ['zone-a#member-A', 'zone-a#member-new', 'zone-b#member-B'],
    });
  });

  it('when nothing becomes consistent, replicas are added but none is ever removed', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.member('zone-a', 'member-old', 0);
    e.member('zone-a', 'member-new', 3);
    e.member('zone-b', 'member-B', 3);
    e.assign('item-1', 'zone-a', 'member-old', 0, '');
    e.assign('item-2', 'zone-a', 'member-old', 0, '');
    e.assign('item-2', 'zone-b', 'member-B', 1, '');
    const log = runRounds(e, { settle: false });
    assert.equal(log.rounds, 1);
    assert.equal(e.assignmentKeys().filter((k) => k.includes('member-old')).length, 2);
    assert.equal(e.assignmentKeys().length, 5);
  });

  it('exiting members (flag set) shed capacity and drain to the others', () => {
    const e = new FakeEtcd();
    e.member('zone-a', 'member-A2', 4);
    for (let i = 1; i <= 4; i++) e.item(`item-${i}`, 1);
    e.member('zone-a', 'member-A1', 4);
    e.member('zone-b', 'member-B1', 4);
    e.member('zone-b', 'member-B2', 4);
    settled(e);
    e.member('zone-a', 'member-A1', 4, true);
    e.member('zone-b', 'member-B1', 4, true);
    settled(e);
    const keys = e.assignmentKeys();
    assert.equal(keys.length, 4);
    for (const k of keys) assert.ok(!k.includes('member-A1') && !k.includes('member-B1'), k);
  });

  it('capacity shortfall: earlier items first; later capacity completes the rest', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 1);
    settled(e);
    assert.deepEqual(e.assignmentKeys(), [A('item-1', 'zone-a', 'member-A1', 0)]);
    e.member('zone-a', 'member-A2', 2);
    settled(e);
    const s = e.state();
    assert.deepEqual(s.items.map((it) => it.assignments.length), [1, 2, 0]);
    e.member('zone-a', 'member-A3', 3);
    settled(e);
    assert.deepEqual(e.state().items.map((it) => it.assignments.length), [1, 2, 3]);
  });

  it('capacity shortfall with consistent replicas: nothing is removed to make room', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.item('item-3', 3);
    e.member('zone-a', 'member-A1', 1);
    e.member('zone-a', 'member-A2', 2);
    e.member('zone-a', 'member-A3', 3);
    e.assign('item-1', 'zone-a', 'member-A3', 0);
    e.assign('item-2', 'zone-a', 'member-A2', 0);
    e.assign('item-2', 'zone-a', 'member-A3', 1);
    e.assign('item-3', 'zone-a', 'member-A1', 1);
    e.assign('item-3', 'zone-a', 'member-A2', 2);
    e.assign('item-3', 'zone-a', 'member-A3', 0);
    assert.equal(settled(e).rounds, 0);
    const keys = e.assignmentKeys();
    e.member('zone-a', 'member-A3', 2);
    // Item 3 is now short by desire, but removing any replica would drop an item below its
    // desired consistent replicas: the keyspace stays as it is.
    runRounds(e);
    assert.deepEqual(e.assignmentKeys(), keys);
  });

  it('replication change up and down', () => {
    const e = new FakeEtcd();
    e.item('item-1', 1);
    e.item('item-2', 2);
    e.member('zone-a', 'A1', 5);
    e.member('zone-a', 'A2', 5);
    e.member('zone-b', 'B1', 5);
    settled(e);
    e.item('item-1', 3);
    e.item('item-2', 1);
    settled(e);
    const s = e.state();
    const zones = (id: string) => new Set(s.items.find((i) => i.id === id)!.assignments.map((a) => a.zone));
    assert.equal(s.items[0]!.assignments.length, 3);
    assert.equal(zones('item-1').size, 2);
    assert.equal(s.items[1]!.assignments.length, 1);
    e.item('item-1', 0);
    settled(e);
    assert.equal(e.state().items[0]!.assignments.length, 0);
  });

  it('primary hand-off: a primary leaving is replaced by a consistent replica on the least primary-loaded member', () => {
    const e = new FakeEtcd();
    e.item('item-1', 2);
    e.item('item-2', 2);
    e.member('zone-a', 'A1', 2);
    e.member('zone-b', 'B1', 2);
    e.member('zone-b', 'B2', 2);
    e.assign('item-1', 'zone-a', 'A1', 1);
    e.assign('item-1', 'zone-b', 'B1', 0);
    e.assign('item-2', 'zone-a', 'A1', 1);
    e.assign('item-2', 'zone-b', 'B1', 0);
    e.member('zone-b', 'B1', 0); // B1 drains
    neverUnderReplicated(e);
    const s = e.state();
    for (const it of s.items) {
      assert.equal(it.assignments.length, 2);
      assert.equal(it.assignments.filter((a) => a.slot === 0).length, 1);
      assert.ok(!it.assignments.some((a) => a.suffix === 'B1'));
    }
    // Both new primaries were consistent when promoted; item-1's went to A1 (lowest slot among
    // members with no primary), item-2's to B2, which then carried fewer primaries than A1.
    assert.deepEqual(
      s.items.map((it) => it.assignments.find((a) => a.slot === 0)!.suffix),
      ['A1', 'B2'],
    );
  });

  it('same keyspace, same plan (determinism)', () => {
    const build = () => {
      const e = new FakeEtcd();
      for (let i = 0; i < 30; i++) e.item(`i${i}`, 1 + (i % 3));
      for (let m = 0; m < 5; m++) e.member(`z${m % 2}`, `m${m}`, 8);
      e.assign('i1', 'z0', 'm0', 0);
      e.assign('i2', 'z1', 'm1', 3);
      return e;
    };
    const a = build();
    const b = build();
    const pa = planRound(a.state(), solveDesired(a.state()), consistent);
    const pb = planRound(b.state(), solveDesired(b.state()), consistent);
    assert.deepEqual(pa, pb);
  });
});
