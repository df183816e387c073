// Unit tests of the round planner (src/core/allocator/plan.ts): the shape of its operations.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  leaseMemberKey,
  planRound,
  solveDesired,
  toKeyspaceTxn,
  type RawKeyValue,
  type Txn,
} from '../../../../src/core/allocator/index.js';
import type { Compare as KsCompare, TxnOp } from '../../../../src/lib/keyspace/client.js';
import type { KeyValue } from '../../../../src/lib/keyspace/kv.js';
import { consistent, FakeEtcd, ROOT } from './sim.js';

const M = (z: string, s: string) => `${ROOT}/members/${z}#${s}`;
const A = (i: string, z: string, s: string, slot: number) => `${ROOT}/assign/${i}#${z}#${s}#${slot}`;

describe('planRound', () => {
  it('creates assignments empty, under the member lease, guarded by the member and leader keys', () => {
    const e = new FakeEtcd();
    e.member('a', 'leader', 2);
    e.member('b', 'other', 2);
    e.item('i', 2);
    const s = e.state();
    const plan = planRound(s, solveDesired(s), consistent);
    assert.equal(plan.txns.length, 1);
    const t = plan.txns[0]!;
    const leader = e.get(M('a', 'leader'))!;
    const other = e.get(M('b', 'other'))!;
    assert.deepEqual(t.compares, [
      { compare: 'mod_revision', key: M('a', 'leader'), equals: leader.modRevision },
      { compare: 'mod_revision', key: M('a', 'leader'), equals: leader.modRevision },
      { compare: 'mod_revision', key: M('b', 'other'), equals: other.modRevision },
    ]);
    assert.deepEqual(t.ops, [
      { type: 'put', key: A('i', 'a', 'leader', 0), value: new Uint8Array(0), lease: 'member:a#leader', leaseId: leader.lease },
      { type: 'put', key: A('i', 'b', 'other', 1), value: new Uint8Array(0), lease: 'member:b#other', leaseId: other.lease },
    ]);
    assert.deepEqual(plan.changes.map((c) => c.kind), ['add', 'add']);
    assert.equal(leaseMemberKey(ROOT, 'member:b#other'), M('b', 'other'));
  });

  it('removes only what leaves enough consistent replicas, guarded by the item and assignment keys', () => {
    const e = new FakeEtcd();
    e.member('a', 'leader', 4);
    e.member('a', 'old', 0);
    e.item('i', 1);
    e.assign('i', 'a', 'old', 0);
    let s = e.state();
    let plan = planRound(s, solveDesired(s), consistent);
    // Round 1: the replacement is added, the old replica stays (the new one is not consistent).
    assert.deepEqual(plan.changes, [{ kind: 'add', itemId: 'i', zone: 'a', suffix: 'leader', slot: 1 }]);
    assert.equal(plan.removalsHeld, 1);
    for (const t of plan.txns) assert.ok(e.txn(t));

    s = e.state();
    plan = planRound(s, solveDesired(s), consistent);
    assert.deepEqual(plan.txns, []); // still not consistent: nothing to do
    assert.equal(plan.removalsHeld, 1);

    e.markAllConsistent();
    s = e.state();
    plan = planRound(s, solveDesired(s), consistent);
    const item = e.get(`${ROOT}/items/i`)!;
    const oldKv = e.get(A('i', 'a', 'old', 0))!;
    const newKv = e.get(A('i', 'a', 'leader', 1))!;
    assert.equal(plan.txns.length, 1);
    // Removal of the primary and promotion of the replacement happen in one transaction.
    assert.deepEqual(plan.txns[0]!.compares.slice(1), [
      { compare: 'mod_revision', key: `${ROOT}/items/i`, equals: item.modRevision },
      { compare: 'mod_revision', key: oldKv.key, equals: oldKv.modRevision },
      { compare: 'mod_revision', key: newKv.key, equals: newKv.modRevision },
    ]);
    assert.deepEqual(plan.txns[0]!.ops, [
      { type: 'delete', key: oldKv.key },
      { type: 'delete', key: newKv.key },
      { type: 'put', key: A('i', 'a', 'leader', 0), value: newKv.value, lease: 'member:a#leader', leaseId: newKv.lease },
    ]);
    assert.deepEqual(plan.changes.map((c) => c.kind), ['remove', 'promote']);
  });

  it('deletes assignments of deleted items only if the item still does not exist', () => {
    const e = new FakeEtcd();
    e.member('a', 'm', 4);
    e.item('b', 1);
    e.assign('b', 'a', 'm', 0);
    e.assign('a-gone', 'a', 'm', 0);
    e.assign('c-gone', 'a', 'm', 0);
    e.assign('c-gone', 'a', 'x', 1);
    const s = e.state();
    const plan = planRound(s, solveDesired(s), consistent);
    assert.equal(plan.txns.length, 1);
    const t = plan.txns[0]!;
    assert.deepEqual(
      t.ops.map((o) => o.key),
      [A('a-gone', 'a', 'm', 0), A('c-gone', 'a', 'm', 0), A('c-gone', 'a', 'x', 1)],
    );
    assert.deepEqual(
      t.compares.filter((c) => c.compare === 'create_revision'),
      [
        { compare: 'create_revision', key: `${ROOT}/items/a-gone`, equals: 0n },
        { compare: 'create_revision', key: `${ROOT}/items/c-gone`, equals: 0n },
      ],
    );
    assert.equal(t.compares.length, 1 + 2 + 3);
  });

  it('packs slots one replica per round once nothing is added or removed', () => {
    const e = new FakeEtcd();
    e.member('a', 'm1', 1);
    e.member('b', 'm2', 1);
    e.member('c', 'm3', 1);
    e.item('i', 3);
    e.assign('i', 'a', 'm1', 4);
    e.assign('i', 'b', 'm2', 0);
    e.assign('i', 'c', 'm3', 7);
    let s = e.state();
    const d = solveDesired(s);
    let plan = planRound(s, d, consistent);
    assert.deepEqual(plan.changes, [{ kind: 'pack', itemId: 'i', zone: 'a', suffix: 'm1', slot: 1, fromSlot: 4 }]);
    for (const t of plan.txns) assert.ok(e.txn(t));
    s = e.state();
    plan = planRound(s, d, consistent);
    assert.deepEqual(plan.changes, [{ kind: 'pack', itemId: 'i', zone: 'c', suffix: 'm3', slot: 2, fromSlot: 7 }]);
    for (const t of plan.txns) assert.ok(e.txn(t));
    s = e.state();
    assert.deepEqual(planRound(s, d, consistent).txns, []);
    assert.deepEqual(e.assignmentKeys(), [A('i', 'a', 'm1', 1), A('i', 'b', 'm2', 0), A('i', 'c', 'm3', 2)]);
  });

  it('splits into transactions of at most 128 compares and 128 operations, never splitting an item', () => {
    const e = new FakeEtcd();
    for (let m = 0; m < 6; m++) e.member(`z${m % 3}`, `m${m}`, 1000);
    for (let i = 0; i < 200; i++) e.item(`item-${String(i).padStart(3, '0')}`, 3);
    const s = e.state();
    const plan = planRound(s, solveDesired(s), consistent);
    assert.ok(plan.txns.length > 1);
    const leader = e.get(s.leaderKey!)!;
    const seen = new Map<string, number>();
    plan.txns.forEach((t: Txn, k) => {
      assert.ok(t.compares.length <= 128 && t.ops.length <= 128, `txn ${k} size`);
      assert.deepEqual(t.compares[0], { compare: 'mod_revision', key: leader.key, equals: leader.modRevision });
      for (const op of t.ops) {
        const id = op.key.split('/assign/')[1]!.split('#')[0]!;
        assert.ok(!seen.has(id) || seen.get(id) === k, `item ${id} split across transactions`);
        seen.set(id, k);
      }
    });
    assert.equal(plan.txns.reduce((n, t) => n + t.ops.length, 0), 600);
    assert.equal(seen.size, 200);

    const small = planRound(s, solveDesired(s), consistent, { maxTxnOps: 10 });
    for (const t of small.txns) assert.ok(t.ops.length <= 10 && t.compares.length <= 10);
    assert.equal(small.txns.length, 67); // 1 leader compare + 3 member compares per item: 3 items per txn
  });

  it('does not add past a member\'s limit counting this round\'s earlier adds', () => {
    const e = new FakeEtcd();
    e.member('a', 'm', 1);
    e.item('i1', 1);
    e.item('i2', 1);
    const s = e.state();
    const d = { byItem: [[0], [0]], total: 2, wanted: 2, pinned: [] }; // an over-full desired state
    const plan = planRound(s, d, consistent);
    assert.deepEqual(plan.changes.map((c) => c.itemId), ['i1']);
    assert.equal(plan.addsHeld, 1);
  });

  it('converts to the keyspace module\'s transaction terms', () => {
    const e = new FakeEtcd();
    e.member('a', 'm', 2);
    e.item('i', 1);
    e.assign('gone', 'a', 'm', 0);
    const s = e.state();
    const [t] = planRound(s, solveDesired(s), consistent).txns;
    const k = toKeyspaceTxn(t!);
    const m = e.get(M('a', 'm'))!;
    const dead = e.get(A('gone', 'a', 'm', 0))!;
    // Compile-time: a keyspace KeyValue is a RawKeyValue, and the converted parts type as its Compare/TxnOp.
    const ksKv: KeyValue = { ...m, value: Buffer.from(m.value), version: 1n };
    const asRaw: RawKeyValue = ksKv;
    const compares: KsCompare[] = k.compares;
    const ops: TxnOp[] = k.ops.map((o) => ('put' in o ? { ...o, value: Buffer.from(o.value) } : o));
    assert.equal(asRaw.key, m.key);
    assert.deepEqual(compares, [
      { key: m.key, target: 'modRevision', result: '=', value: m.modRevision },
      { key: `${ROOT}/items/gone`, target: 'createRevision', result: '=', value: 0n },
      { key: dead.key, target: 'modRevision', result: '=', value: dead.modRevision },
      { key: m.key, target: 'modRevision', result: '=', value: m.modRevision },
    ]);
    assert.deepEqual(ops, [{ delete: dead.key }, { put: A('i', 'a', 'm', 0), value: Buffer.alloc(0), lease: m.lease }]);
  });

  it('refuses a local member key that is not in the state', () => {
    const e = new FakeEtcd();
    e.member('a', 'm', 1);
    const s = e.state();
    assert.throws(() => planRound(s, solveDesired(s), consistent, { localKey: M('a', 'nobody') }), /not in the state/);
  });
});
