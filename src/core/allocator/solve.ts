// Desired assignments: which members should hold each item's replicas.
//
// The problem is a flow network, as in the Go allocator:
//
//   source ──r_i──▶ item i ──zone cap──▶ (item i, zone z) ──1──▶ member m of zone z ──limit──▶ sink
//
// A unit of flow through (i, m) is a replica of item i on member m. The capacities encode the
// rules:
//  * source → item: the item's desired replication; when the members' summed (effective) limits
//    fall short of the summed replication, items are served in id order until capacity runs out
//    (later items get fewer replicas or none), as upstream does.
//  * item → (item, zone): at most max(r − 1, 1) replicas in one zone when there is more than one
//    zone, so a fully replicated item with r ≥ 2 spans at least two zones. Only when items still
//    cannot be fully placed after everything else has been tried is this relaxed to r.
//  * (item, zone) → member: one replica of an item per member.
//  * member → sink: first the member's "fair share", its effective limit scaled by
//    (summed replication / summed limits) and rounded up, so load spreads evenly; then, if items
//    remain short, the full effective limit.
//
// Our solver differs from upstream's in how it gets there (upstream steers a greedy push/relabel
// by the order it presents arcs in; we place flow ourselves and let a Dinic max-flow engine repair
// it), so on ties the chosen members can differ; the constraints and goals are the same:
//  1. current assignments are placed first (primaries before other replicas), each as long as it
//     fits the caps above — this is what keeps movement minimal;
//  2. remaining replicas go greedily to the zone holding fewest replicas of the item, then to the
//     member with the lowest load relative to its cap, then to the member that sorts first;
//  3. the max-flow engine augments whatever is still short (which may move replicas placed in 1
//     or 2, but only where that lets more replicas be placed overall);
//  4. steps 2–3 are repeated with members at their full limits, then with the zone cap relaxed
//     for items still short, then (only if some still are) for every item;
//  5. rings of moves that change no member's load are undone (see cancelExchanges).
// The result is a maximum flow of the final network, and is a pure function of the state.

import { FlowGraph } from './maxflow.js';
import type { AllocState } from './state.js';

export interface DesiredAssignments {
  /** For each item (parallel to state.items): member indices, in member key order. */
  byItem: number[][];
  /** Total replicas placed. */
  total: number;
  /** Summed desired replication (state.itemSlots); total < itemSlots means some items are short. */
  wanted: number;
  /**
   * Items (indices) left on their current members against the zone rule, because the move
   * that would spread them is part of a ring between full members that could never be carried
   * out (see cancelExchanges). Usually empty.
   */
  pinned: number[];
}

/** ceil(c · num / denom) when num < denom, else c (upstream's scaling of member capacity). */
export function scaleAndRound(c: number, num: number, denom: number): number {
  if (num >= denom) return c;
  return Math.ceil((c * num) / denom);
}

export function solveDesired(state: AllocState<any, any, any>): DesiredAssignments {
  const items = state.items;
  const members = state.members;
  const I = items.length;
  const Z = state.zones.length;
  const M = members.length;

  // Eligible members per zone (effective limit > 0), in key order.
  const zoneIndex = new Map<string, number>();
  state.zones.forEach((z, i) => zoneIndex.set(z, i));
  const memberZone = new Int32Array(M).fill(-1);
  const posInZone = new Int32Array(M).fill(-1);
  const zoneMembers: number[][] = state.zones.map(() => []);
  for (let m = 0; m < M; m++) {
    const z = zoneIndex.get(members[m]!.zone);
    if (z === undefined || members[m]!.effectiveLimit <= 0) continue;
    memberZone[m] = z;
    posInZone[m] = zoneMembers[z]!.length;
    zoneMembers[z]!.push(m);
  }

  // Source capacities: desired replication, bounded overall by member slots (item order).
  const want = new Int32Array(I);
  let remaining = state.memberSlots;
  for (let i = 0; i < I; i++) {
    const c = Math.min(items[i]!.desiredReplication, Math.max(0, remaining));
    want[i] = c;
    remaining -= c;
  }

  // Build the graph. Node ids: 0 source, 1 sink, then items, zone-items, members.
  const S = 0;
  const T = 1;
  const itemNode = (i: number) => 2 + i;
  const zoneItemNode = (i: number, z: number) => 2 + I + i * Z + z;
  const memberNode = (m: number) => 2 + I + I * Z + m;
  let eligible = 0;
  for (const zm of zoneMembers) eligible += zm.length;
  const g = new FlowGraph(2 + I + I * Z + M, I + I * Z + I * eligible + M);

  const srcEdge = new Int32Array(I);
  const zoneEdge = new Int32Array(I * Z);
  const memberEdgeBase = new Int32Array(I * Z);
  const sinkEdge = new Int32Array(M).fill(-1);
  const fair = new Int32Array(M);
  const full = new Int32Array(M);

  for (let i = 0; i < I; i++) srcEdge[i] = g.addEdge(S, itemNode(i), want[i]!);
  for (let i = 0; i < I; i++) {
    const r = items[i]!.desiredReplication;
    const zcap = Z <= 1 ? want[i]! : Math.min(want[i]!, Math.max(r - 1, 1));
    for (let z = 0; z < Z; z++) zoneEdge[i * Z + z] = g.addEdge(itemNode(i), zoneItemNode(i, z), zcap);
  }
  for (let i = 0; i < I; i++) {
    for (let z = 0; z < Z; z++) {
      const zm = zoneMembers[z]!;
      let first = -1;
      for (let k = 0; k < zm.length; k++) {
        const e = g.addEdge(zoneItemNode(i, z), memberNode(zm[k]!), 1);
        if (k === 0) first = e;
      }
      memberEdgeBase[i * Z + z] = first;
    }
  }
  for (let m = 0; m < M; m++) {
    if (memberZone[m]! < 0) continue;
    full[m] = members[m]!.effectiveLimit;
    fair[m] = scaleAndRound(full[m]!, state.itemSlots, state.memberSlots);
    sinkEdge[m] = g.addEdge(memberNode(m), T, fair[m]!);
  }

  const edgeOf = (i: number, m: number) => memberEdgeBase[i * Z + memberZone[m]!]! + 2 * posInZone[m]!;

  // Places one replica of item i on member m if every cap on the way allows it.
  const tryPlace = (i: number, m: number): boolean => {
    const z = memberZone[m]!;
    if (z < 0) return false;
    const es = srcEdge[i]!;
    const ez = zoneEdge[i * Z + z]!;
    const em = edgeOf(i, m);
    const et = sinkEdge[m]!;
    if (g.residual(es) <= 0 || g.residual(ez) <= 0 || g.residual(em) <= 0 || g.residual(et) <= 0) return false;
    g.push(es, 1);
    g.push(ez, 1);
    g.push(em, 1);
    g.push(et, 1);
    return true;
  };

  // 1. Current assignments: primaries first, then the other replicas.
  for (let i = 0; i < I; i++) {
    for (const a of items[i]!.assignments) if (a.slot === 0 && a.memberIndex >= 0) tryPlace(i, a.memberIndex);
  }
  // Members are walked one after another, each over its own replicas starting at a different
  // point of the item order, so that when several members must give replicas up, they give up
  // those of different items (rather than all dropping the last items, which would then need
  // every replica replaced).
  const othersOf: number[][] = members.map(() => []);
  for (let i = 0; i < I; i++) {
    for (const a of items[i]!.assignments) if (a.slot !== 0 && a.memberIndex >= 0) othersOf[a.memberIndex]!.push(i);
  }
  for (let m = 0; m < M; m++) {
    const list = othersOf[m]!;
    const start = Math.floor((m * list.length) / Math.max(1, M));
    for (let k = 0; k < list.length; k++) tryPlace(list[(start + k) % list.length]!, m);
  }

  // Per-item replica count per zone, needed by the greedy fill; read from the zone edges' flow.
  const greedyFill = (caps: Int32Array) => {
    for (let i = 0; i < I; i++) {
      while (g.residual(srcEdge[i]!) > 0) {
        let best = -1;
        let bestZoneCount = 0;
        let bestLoad = 0;
        for (let z = 0; z < Z; z++) {
          const ez = zoneEdge[i * Z + z]!;
          if (g.residual(ez) <= 0) continue;
          const zc = g.flow(ez);
          if (best >= 0 && zc > bestZoneCount) continue;
          for (const m of zoneMembers[z]!) {
            const et = sinkEdge[m]!;
            if (g.residual(et) <= 0 || g.residual(edgeOf(i, m)) <= 0) continue;
            const load = g.flow(et) / caps[m]!;
            if (best < 0 || zc < bestZoneCount || load < bestLoad) {
              best = m;
              bestZoneCount = zc;
              bestLoad = load;
            }
          }
        }
        if (best < 0 || !tryPlace(i, best)) break;
      }
    }
  };

  // 2–3. Fair-share caps.
  greedyFill(fair);
  g.maxFlow(S, T);

  // 4a. Full limits.
  for (let m = 0; m < M; m++) if (sinkEdge[m]! >= 0) g.raise(sinkEdge[m]!, full[m]! - fair[m]!);
  greedyFill(full);
  g.maxFlow(S, T);

  // 4b. Items still short may put all their replicas in one zone. 4c. If some remain short
  // (making room for them can take another item keeping its replicas in one zone), the zone
  // cap is lifted for every item: like upstream, full replication comes before zone spread.
  if (Z > 1) {
    for (const everyItem of [false, true]) {
      let anyShort = false;
      for (let i = 0; i < I; i++) {
        const short = g.residual(srcEdge[i]!) > 0;
        anyShort ||= short;
        if (!short && !everyItem) continue;
        for (let z = 0; z < Z; z++) {
          const ez = zoneEdge[i * Z + z]!;
          g.raise(ez, want[i]! - (g.residual(ez) + g.flow(ez)));
        }
      }
      if (!anyShort) break;
      greedyFill(full);
      g.maxFlow(S, T);
    }
  }

  // Read the assignments off the flow, in member key order (zones sorted, members sorted in zone).
  const byItem: number[][] = new Array(I);
  let total = 0;
  for (let i = 0; i < I; i++) {
    const out: number[] = [];
    for (let z = 0; z < Z; z++) {
      const zm = zoneMembers[z]!;
      const base = memberEdgeBase[i * Z + z]!;
      for (let k = 0; k < zm.length; k++) {
        if (g.flow(base + 2 * k) > 0) out.push(zm[k]!);
      }
    }
    total += out.length;
    byItem[i] = out;
  }

  const zoneCapOf = (i: number, z: number) => {
    const e = zoneEdge[i * Z + z]!;
    return g.residual(e) + g.flow(e);
  };
  const pinned = cancelExchanges(state, byItem, memberZone, Z, zoneCapOf);
  return { byItem, total, wanted: state.itemSlots, pinned };
}

/**
 * 5. Undo exchanges. The max-flow steps may move replicas in a circle: item A from member X to Y
 * while item B goes from Y to X (or longer rings). Such a ring changes no member's load, yet it
 * costs moves and, worse, can never be carried out when its members are full: each new replica
 * needs a free slot that only the removal of an old one would give, and old replicas go only
 * after new ones are in. So rings of moves are found and reverted, each item keeping the replica
 * it had. A ring is reverted if every item in it appears once and stays within its zone cap; or,
 * breaking a zone cap, if every member of the ring is full now and would be full after the moves
 * too (then the moves cannot start, and keeping the current replicas is the only reachable
 * outcome; those items are returned as "pinned").
 */
function cancelExchanges(
  state: AllocState<any, any, any>,
  byItem: number[][],
  memberZone: Int32Array,
  Z: number,
  zoneCapOf: (i: number, z: number) => number,
): number[] {
  const M = state.members.length;
  const pinned = new Set<number>();
  interface Move {
    item: number;
    from: number;
    to: number;
    used: boolean;
  }
  const out: Move[][] = Array.from({ length: M }, () => []);
  let moves = 0;
  state.items.forEach((it, i) => {
    const des = byItem[i]!;
    if (des.length === 0 || it.assignments.length === 0) return;
    const desSet = new Set(des);
    const curSet = new Set<number>();
    for (const a of it.assignments) if (a.memberIndex >= 0 && memberZone[a.memberIndex]! >= 0) curSet.add(a.memberIndex);
    const gone = [...curSet].filter((m) => !desSet.has(m));
    const come = des.filter((m) => !curSet.has(m));
    if (gone.length === 0 || come.length === 0) return;
    // Pair each lost replica with a new one, same zone first.
    const taken = new Set<number>();
    for (const sameZone of [true, false]) {
      for (const f of gone) {
        if (taken.has(-1 - f)) continue;
        const t = come.find((c) => !taken.has(c) && (memberZone[c] === memberZone[f]) === sameZone);
        if (t === undefined) continue;
        taken.add(t);
        taken.add(-1 - f);
        out[f]!.push({ item: i, from: f, to: t, used: false });
        moves++;
      }
    }
  });
  if (moves < 2) return [];
  const desiredLoad = new Int32Array(M);
  for (const des of byItem) for (const m of des) desiredLoad[m]++;
  const stuck = (m: number) =>
    state.members[m]!.totalCount >= state.members[m]!.effectiveLimit && desiredLoad[m]! >= state.members[m]!.effectiveLimit;

  const ptr = new Int32Array(M);
  const dead = new Uint8Array(M);
  const pos = new Int32Array(M).fill(-1);
  const counts = new Int32Array(Z);

  // 0: keep the ring; 1: revert it; 2: revert it, pinning items against the zone rule.
  const revertable = (ring: Move[]): 0 | 1 | 2 => {
    const seen = new Set<number>();
    let spreadOk = true;
    for (const mv of ring) {
      if (seen.has(mv.item)) return 0;
      seen.add(mv.item);
      const zf = memberZone[mv.from]!;
      const zt = memberZone[mv.to]!;
      if (zf === zt) continue;
      counts.fill(0);
      for (const m of byItem[mv.item]!) counts[memberZone[m]!]++;
      if (counts[zf]! + 1 > zoneCapOf(mv.item, zf)) spreadOk = false;
    }
    if (spreadOk) return 1;
    return ring.every((mv) => stuck(mv.from)) ? 2 : 0;
  };

  for (let s = 0; s < M; s++) {
    if (dead[s]) continue;
    const stack: number[] = [s];
    const via: Move[] = [];
    pos[s] = 0;
    while (stack.length > 0) {
      const v = stack[stack.length - 1]!;
      const list = out[v]!;
      while (ptr[v]! < list.length && (list[ptr[v]!]!.used || dead[list[ptr[v]!]!.to])) ptr[v]++;
      if (ptr[v]! >= list.length) {
        dead[v] = 1;
        pos[v] = -1;
        stack.pop();
        via.pop();
        continue;
      }
      const mv = list[ptr[v]!]!;
      const w = mv.to;
      if (pos[w]! >= 0) {
        const ring = [...via.slice(pos[w]!), mv];
        const verdict = revertable(ring);
        if (verdict !== 0) {
          for (const r of ring) {
            r.used = true;
            if (verdict === 2) pinned.add(r.item);
            const des = byItem[r.item]!;
            des[des.indexOf(r.to)] = r.from;
            des.sort((a, b) => a - b);
          }
          // Unwind to w, which may have further rings.
          while (stack.length > pos[w]! + 1) pos[stack.pop()!] = -1;
          via.length = pos[w]!;
        } else {
          ptr[v]++;
        }
        continue;
      }
      pos[w] = stack.length;
      stack.push(w);
      via.push(mv);
    }
  }
  return [...pinned].sort((a, b) => a - b);
}

/**
 * A fingerprint of what the solution depends on besides current assignments: item keys and
 * desired replication, member keys and effective limits. Like upstream, the allocating member
 * re-solves only when it changes and otherwise keeps converging on its last solution (whose member
 * indices stay valid, since the items and members are the same); re-solving every round would let
 * small differences between rounds add replicas that a later round takes away again.
 */
export function networkHash(state: AllocState<any, any, any>): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  const fold = (s: string) => {
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
      h2 = Math.imul(h2 + c, 0x5bd1e995) >>> 0;
      h2 ^= h2 >>> 15;
    }
  };
  for (const it of state.items) fold(`${it.kv.key}\u0000${it.desiredReplication}\u0000`);
  fold('\u0001');
  for (const m of state.members) fold(`${m.kv.key}\u0000${m.effectiveLimit}\u0000${m.itemLimit}\u0000`);
  return h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0');
}
