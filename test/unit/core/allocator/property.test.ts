// Property test over random clusters: the solver's answer respects every constraint and is as
// large as an independent max-flow says it can be, and running rounds from any starting keyspace
// reaches exactly that answer without ever passing a limit or losing consistent replicas.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { buildState, networkHash, planRound, solveDesired } from '../../../../src/core/allocator/index.js';
import { consistent, currentByItem, decoders, desiredByItem, FakeEtcd, ROOT, type State } from './sim.js';
import { int, referenceMaxFlow, rng } from './rand.js';

/** Max flow of the allocation network built independently, with or without the zone rule. */
function bound(s: State, spread: boolean): number {
  const I = s.items.length;
  const Z = s.zones.length;
  const M = s.members.length;
  const item = (i: number) => 2 + i;
  const zi = (i: number, z: number) => 2 + I + i * Z + z;
  const mem = (m: number) => 2 + I + I * Z + m;
  const edges: [number, number, number][] = [];
  let left = s.memberSlots;
  s.items.forEach((it, i) => {
    const want = Math.min(it.desiredReplication, left);
    left -= want;
    edges.push([0, item(i), want]);
    const zcap = spread && Z > 1 ? Math.min(want, Math.max(it.desiredReplication - 1, 1)) : want;
    for (let z = 0; z < Z; z++) edges.push([item(i), zi(i, z), zcap]);
    s.members.forEach((m, k) => {
      const z = s.zones.indexOf(m.zone);
      if (z >= 0) edges.push([zi(i, z), mem(k), 1]);
    });
  });
  s.members.forEach((m, k) => edges.push([mem(k), 1, m.effectiveLimit]));
  return referenceMaxFlow(2 + I + I * Z + M, edges, 0, 1);
}

function randomCluster(seed: number): FakeEtcd {
  const r = rng(seed);
  const e = new FakeEtcd();
  const zones = int(r, 1, 3);
  const nMembers = int(r, 1, 9);
  const nItems = int(r, 1, 25);
  for (let m = 0; m < nMembers; m++) {
    e.member(`zone-${int(r, 0, zones - 1)}`, `m${m}`, r() < 0.1 ? 0 : int(r, 1, 10), r() < 0.1);
  }
  for (let i = 0; i < nItems; i++) e.item(`item-${String(i).padStart(2, '0')}`, int(r, 0, 4));
  // A random current allocation (possibly invalid: over limits, dead items, gone members).
  const s = e.state();
  for (const it of s.items) {
    const n = int(r, 0, 3);
    const used = new Set<number>();
    for (let k = 0; k < n; k++) {
      const m = int(r, 0, s.members.length - 1);
      if (used.has(m)) continue;
      used.add(m);
      const mm = s.members[m]!;
      e.assign(it.id, mm.zone, mm.suffix, k === 0 && r() < 0.8 ? 0 : int(r, 1, 5), r() < 0.7 ? 'consistent' : '');
    }
  }
  if (r() < 0.3) e.assign('zz-dead', s.members[0]!.zone, s.members[0]!.suffix, 0);
  if (r() < 0.3) e.assign(s.items[0]!.id, 'zone-x', 'ghost', 3);
  return e;
}

describe('allocator properties over random clusters', () => {
  it('solutions keep limits, one replica per member, the zone rule, and reach the max-flow bound', () => {
    let pinnedSeen = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const e = randomCluster(seed);
      const s = e.state();
      const d = solveDesired(s);
      pinnedSeen += d.pinned.length;
      const load = new Array<number>(s.members.length).fill(0);
      let total = 0;
      d.byItem.forEach((ms, i) => {
        assert.equal(new Set(ms).size, ms.length, `seed ${seed}: duplicate member`);
        assert.ok(ms.length <= s.items[i]!.desiredReplication, `seed ${seed}: over-replicated`);
        for (const m of ms) load[m]!++;
        total += ms.length;
      });
      assert.equal(total, d.total);
      s.members.forEach((m, k) => assert.ok(load[k]! <= m.effectiveLimit, `seed ${seed}: ${m.suffix} over limit`));

      const strict = bound(s, true);
      const relaxed = bound(s, false);
      assert.ok(total >= strict, `seed ${seed}: ${total} < strict bound ${strict}`);
      assert.ok(total <= relaxed, `seed ${seed}: ${total} > relaxed bound ${relaxed}`);
      if (relaxed === d.wanted) assert.equal(total, d.wanted, `seed ${seed}: replication not met though capacity allows`);
      if (strict === d.wanted && s.zones.length > 1) {
        d.byItem.forEach((ms, i) => {
          if (ms.length < 2 || d.pinned.includes(i)) return;
          const zones = new Set(ms.map((m) => s.members[m]!.zone));
          assert.ok(zones.size >= 2, `seed ${seed}: ${s.items[i]!.id} in one zone`);
        });
      }

      // Determinism, whatever the order keys arrive in.
      const r = rng(seed * 31);
      const shuffled = [...e.snapshot()].sort(() => r() - 0.5);
      assert.deepEqual(solveDesired(buildState(ROOT, shuffled, decoders)), d, `seed ${seed}: not deterministic`);
    }
    assert.ok(pinnedSeen <= 3, `${pinnedSeen} items pinned against the zone rule`);
  });

  it('rounds from any keyspace settle without passing limits or losing consistent replicas', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const e = randomCluster(seed);
      const { state, plan, d } = converge(e, seed);
      // What is left undone is only what the consistency or limit rules hold back.
      const same = JSON.stringify([...currentByItem(state)]) === JSON.stringify([...desiredByItem(state, d)]);
      assert.equal(same, plan.removalsHeld + plan.addsHeld === 0, `seed ${seed}: unexplained difference from desired`);
      assert.equal(state.assignments.filter((a) => a.itemIndex < 0).length, 0, `seed ${seed}: dead assignments left`);
    }
  });

  it('rounds reach the desired state exactly: from scratch, and after members and items change', () => {
    let reached = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const e = randomCluster(seed);
      for (const k of e.assignmentKeys()) e.delete(k);
      let { state, d } = converge(e, seed);
      assert.deepEqual(currentByItem(state), desiredByItem(state, d), `seed ${seed}: from scratch`);

      // Change the cluster: a limit moves, a member joins, one replication changes.
      const r = rng(seed * 7);
      const m = state.members[int(r, 0, state.members.length - 1)]!;
      e.member(m.zone, m.suffix, int(r, 0, 10));
      e.member(`zone-${int(r, 0, 2)}`, 'joined', int(r, 1, 10));
      const it = state.items[int(r, 0, state.items.length - 1)]!;
      e.item(it.id, int(r, 0, 4));
      ({ state, d } = converge(e, seed));
      // Upstream's rule holds an old replica while its item has fewer consistent replicas than
      // it wants, so the desired state is reached exactly when it gives every item its full
      // replication (otherwise an item short of members keeps its old replicas).
      if (d.total === d.wanted) {
        assert.deepEqual(currentByItem(state), desiredByItem(state, d), `seed ${seed}: after change`);
        reached++;
      }
    }
    assert.ok(reached > 50, `only ${reached} clusters could be fully replicated`);
  });
});

/** Runs rounds (replicas catch up between idle rounds), checking per-round invariants. */
function converge(e: FakeEtcd, seed: number) {
  const first = e.state();
  const d = solveDesired(first);
  const hash = networkHash(first);
  for (let round = 0; round < 60; round++) {
    const s = e.state();
    assert.equal(networkHash(s), hash);
    const plan = planRound(s, d, consistent);
    if (plan.txns.length === 0) {
      if (e.markAllConsistent() > 0) continue;
      for (const it of s.items) {
        const slots = it.assignments.map((a) => a.slot).sort((x, y) => x - y);
        if (plan.removalsHeld === 0) assert.deepEqual(slots, slots.map((_, k) => k), `seed ${seed}: ${it.id} slots not packed`);
      }
      return { state: s, plan, d };
    }
    for (const t of plan.txns) {
      assert.ok(t.compares.length <= 128 && t.ops.length <= 128);
      assert.equal(e.txn(t), true, `seed ${seed}: txn failed`);
    }
    const after = e.state();
    after.members.forEach((m, k) => {
      assert.ok(
        m.totalCount <= Math.max(m.effectiveLimit, s.members[k]!.totalCount),
        `seed ${seed}: ${m.suffix} grew past its limit`,
      );
    });
    after.items.forEach((it, i) => {
      const was = s.items[i]!.assignments.filter((a) => a.value === 'consistent').length;
      const now = it.assignments.filter((a) => a.value === 'consistent').length;
      assert.ok(now >= Math.min(was, it.desiredReplication), `seed ${seed}: ${it.id} lost consistent replicas`);
      assert.ok(it.assignments.filter((a) => a.slot === 0).length <= 1, `seed ${seed}: two primaries`);
    });
  }
  assert.fail(`seed ${seed}: did not settle`);
}
