// Unit tests of the broker and consumer consistency rules (src/core/allocator/consistency.ts),
// and a broker-style run where replicas "catch up" by writing the route their keys describe.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  buildState,
  journalIsConsistent,
  planRound,
  ReplicaCode,
  routeOf,
  routesEquivalent,
  shardIsConsistent,
  solveDesired,
  type Assignment,
  type RawKeyValue,
  type RouteLike,
} from '../../../../src/core/allocator/index.js';
import { decoders, FakeEtcd, ROOT } from './sim.js';

const dec = new TextDecoder();
const routeDecoders = {
  item: decoders.item,
  member: decoders.member,
  // Empty value: an empty route (primary 0, as protobuf decodes it).
  assignment: (_n: unknown, kv: RawKeyValue): RouteLike =>
    kv.value.length === 0 ? { members: [], primary: 0 } : (JSON.parse(dec.decode(kv.value)) as RouteLike),
};

function asn<A>(zone: string, suffix: string, slot: number, value: A): Assignment<A> {
  return { itemId: 'i', zone, suffix, slot, value, kv: {} as RawKeyValue, memberIndex: 0, itemIndex: 0 };
}

describe('consistency rules', () => {
  it('routeOf follows key order and marks the slot-0 member as primary', () => {
    const all = [asn('a', 'x', 2, undefined), asn('b', 'y', 0, undefined), asn('c', 'z', 1, undefined)];
    assert.deepEqual(routeOf(all), {
      members: [{ zone: 'a', suffix: 'x' }, { zone: 'b', suffix: 'y' }, { zone: 'c', suffix: 'z' }],
      primary: 1,
    });
    assert.deepEqual(routeOf([asn('a', 'x', 1, undefined)]).primary, -1);
  });

  it('a journal is consistent only when every replica advertises the route of the keys', () => {
    const route = { members: [{ zone: 'a', suffix: 'x' }, { zone: 'b', suffix: 'y' }], primary: 0 };
    const good = [asn('a', 'x', 0, route), asn('b', 'y', 1, route)];
    assert.equal(journalIsConsistent(null as never, good[0]!, good), true);
    const stale = [asn('a', 'x', 0, route), asn('b', 'y', 1, { ...route, primary: 1 })];
    assert.equal(journalIsConsistent(null as never, stale[0]!, stale), false);
    const fresh = [asn('a', 'x', 0, route), asn('b', 'y', 1, { members: [], primary: 0 })];
    assert.equal(journalIsConsistent(null as never, fresh[0]!, fresh), false);
    assert.equal(routesEquivalent(route, undefined), false);
    assert.equal(routesEquivalent(route, { members: [{ zone: 'b', suffix: 'y' }, { zone: 'a', suffix: 'x' }], primary: 0 }), false);
  });

  it('a shard replica is consistent when STANDBY or PRIMARY, or FAILED with a failed primary', () => {
    const st = (code: number) => ({ code });
    const all = [asn('a', 'x', 0, st(ReplicaCode.PRIMARY)), asn('b', 'y', 1, st(ReplicaCode.BACKFILL))];
    assert.equal(shardIsConsistent(null as never, all[0]!, all), true);
    assert.equal(shardIsConsistent(null as never, all[1]!, all), false);
    assert.equal(shardIsConsistent(null as never, asn('a', 'x', 1, undefined), all), false); // empty = IDLE
    assert.equal(shardIsConsistent(null as never, asn('a', 'x', 1, st(ReplicaCode.STANDBY)), all), true);
    const failed = [asn('a', 'x', 0, st(ReplicaCode.FAILED)), asn('b', 'y', 1, st(ReplicaCode.FAILED))];
    assert.equal(shardIsConsistent(null as never, failed[1]!, failed), true);
    const onlyReplicaFailed = [asn('a', 'x', 0, st(ReplicaCode.PRIMARY)), asn('b', 'y', 1, st(ReplicaCode.FAILED))];
    assert.equal(shardIsConsistent(null as never, onlyReplicaFailed[1]!, onlyReplicaFailed), false);
  });

  it('broker-style drain: replicas write their routes between rounds, and the old member leaves last', () => {
    const e = new FakeEtcd();
    e.item('j', 2);
    e.member('a', 'old', 0);
    e.member('a', 'new', 2);
    e.member('b', 'keep', 2);
    const r0 = { members: [{ zone: 'a', suffix: 'old' }, { zone: 'b', suffix: 'keep' }], primary: 0 };
    e.assign('j', 'a', 'old', 0, JSON.stringify(r0));
    e.assign('j', 'b', 'keep', 1, JSON.stringify(r0));
    const state = () => buildState(ROOT, e.snapshot(), routeDecoders);
    const catchUp = () => {
      const s = state();
      for (const it of s.items) {
        const route = JSON.stringify(routeOf(it.assignments));
        for (const a of it.assignments) if (dec.decode(a.kv.value) !== route) e.put(a.kv.key, route, a.kv.lease);
      }
    };
    const d = solveDesired(state());
    const history: string[][] = [];
    for (let round = 0; round < 20; round++) {
      const plan = planRound(state(), d, journalIsConsistent);
      if (plan.txns.length === 0) {
        const before = e.snapshot().map((kv) => dec.decode(kv.value)).join();
        catchUp();
        if (e.snapshot().map((kv) => dec.decode(kv.value)).join() === before) break;
        continue;
      }
      for (const t of plan.txns) assert.ok(e.txn(t));
      history.push(e.assignmentKeys().map((k) => k.slice(`${ROOT}/assign/j#`.length)));
    }
    assert.deepEqual(history, [
      ['a#new#2', 'a#old#0', 'b#keep#1'], // replacement added; old kept
      ['a#new#2', 'b#keep#0'], // new is in sync: old removed, primary handed to keep
      ['a#new#1', 'b#keep#0'], // slots packed
    ]);
  });
});
