// Micro-benchmark of the allocator's solver and planner: 10,000 items × 50 members over three
// zones, replication 3, about 20% spare capacity. Prints timings only (no assertions).
//
//   npm run build --silent && node dist/bench/allocator.js
//
// Environment: ALLOC_ITEMS (default 10000), ALLOC_MEMBERS (default 50), ALLOC_RUNS (default 5).
//
// Cases, each timed as the median of ALLOC_RUNS runs:
//   initial    solve with no assignments at all (every replica placed fresh)
//   steady     solve when the keyspace already holds the solution (nothing to move)
//   join       solve after one more member joins (load moves to it)
//   leave      solve after a member's keys vanish (its replicas are replaced)
//   state      build the allocation state from the raw key/values (steady keyspace)
//   plan       plan the round for "join" from its solution

import { performance } from 'node:perf_hooks';

import {
  assignmentKey,
  buildState,
  itemKey,
  memberKey,
  planRound,
  solveDesired,
  type AllocState,
  type DesiredAssignments,
  type RawKeyValue,
} from '../src/core/allocator/index.js';

const ITEMS = Number(process.env.ALLOC_ITEMS ?? 10000);
const MEMBERS = Number(process.env.ALLOC_MEMBERS ?? 50);
const RUNS = Number(process.env.ALLOC_RUNS ?? 5);
const R = 3;
const ROOT = '/gazette/cluster';
const enc = new TextEncoder();

let rev = 1n;
function kv(key: string, value: string, lease = 0n): RawKeyValue {
  rev++;
  return { key, value: enc.encode(value), createRevision: rev, modRevision: rev, lease };
}

const limit = Math.ceil((ITEMS * R * 1.2) / MEMBERS);
const text = new TextDecoder();
const decoders = {
  item: (_: string, raw: RawKeyValue) => ({ desiredReplication: Number(text.decode(raw.value)) }),
  member: (_z: string, _s: string, raw: RawKeyValue) => ({ itemLimit: Number(text.decode(raw.value)) }),
};

function baseKvs(members = MEMBERS): RawKeyValue[] {
  const out: RawKeyValue[] = [];
  for (let m = 0; m < members; m++) {
    out.push(kv(memberKey(ROOT, `zone-${m % 3}`, `broker-${String(m).padStart(3, '0')}`), String(limit), BigInt(7000 + m)));
  }
  for (let i = 0; i < ITEMS; i++) out.push(kv(itemKey(ROOT, `journal/part-${String(i).padStart(5, '0')}`), String(R)));
  return out;
}

function withAssignments(kvs: RawKeyValue[], state: AllocState, d: DesiredAssignments): RawKeyValue[] {
  const out = [...kvs];
  state.items.forEach((it, i) => {
    d.byItem[i]!.forEach((m, slot) => {
      const mem = state.members[m]!;
      out.push(kv(assignmentKey(ROOT, { itemId: it.id, zone: mem.zone, suffix: mem.suffix, slot }), 'ok', mem.kv.lease));
    });
  });
  return out;
}

function time<T>(fn: () => T): { ms: number; value: T } {
  const samples: number[] = [];
  let value!: T;
  for (let k = 0; k < RUNS; k++) {
    const t0 = performance.now();
    value = fn();
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  return { ms: samples[Math.floor(samples.length / 2)]!, value };
}

function report(name: string, ms: number, d?: DesiredAssignments, extra = '') {
  const placed = d ? `  placed ${d.total}/${d.wanted}` : '';
  console.log(`${name.padEnd(8)} ${ms.toFixed(1).padStart(8)} ms${placed}${extra}`);
}

console.log(`allocator: ${ITEMS} items × ${MEMBERS} members, 3 zones, replication ${R}, member limit ${limit}, median of ${RUNS}`);

const empty = buildState(ROOT, baseKvs(), decoders);
const initial = time(() => solveDesired(empty));
report('initial', initial.ms, initial.value);

const steadyKvs = withAssignments(baseKvs(), empty, initial.value);
const st = time(() => buildState(ROOT, steadyKvs, decoders));
const steadyState = st.value;
const steady = time(() => solveDesired(steadyState));
report('steady', steady.ms, steady.value, `  moved ${moved(steadyState, steady.value)}`);

const joinKvs = [...steadyKvs, kv(memberKey(ROOT, 'zone-0', 'broker-new'), String(limit), 9999n)];
const joinState = buildState(ROOT, joinKvs, decoders);
const join = time(() => solveDesired(joinState));
report('join', join.ms, join.value, `  moved ${moved(joinState, join.value)}`);

const gone = memberKey(ROOT, 'zone-1', 'broker-001');
const leaveKvs = steadyKvs.filter((x) => x.key !== gone && x.lease !== 7001n);
const leaveState = buildState(ROOT, leaveKvs, decoders);
const leave = time(() => solveDesired(leaveState));
report('leave', leave.ms, leave.value, `  moved ${moved(leaveState, leave.value)}`);

report('state', st.ms);
const plan = time(() => planRound(joinState, join.value, () => true));
report('plan', plan.ms, undefined, `  ${plan.value.txns.length} txns, ${plan.value.changes.length} changes`);

/** Replicas added relative to the current assignments. */
function moved(state: AllocState, d: DesiredAssignments): number {
  let n = 0;
  state.items.forEach((it, i) => {
    const cur = new Set(it.assignments.map((a) => a.memberIndex));
    for (const m of d.byItem[i]!) if (!cur.has(m)) n++;
  });
  return n;
}
