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
//    zone, so a fully replicated item with r ≥ 2 spans at least two zones. Only an item that still
//    cannot be fully placed after everything else has been tried gets this relaxed to r.
//  * (item, zone) → member: one replica of an item per member.
//  * member → sink: first the member's "fair share", its effective limit scaled by
//    (summed replication / summed limits) and rounded up, so load spreads evenly; then, if items
//    remain short, the full effective limit.
//
// Our solver differs from upstream's in how it gets there (upstream steers a greedy push/relabel
// by the order it presents arcs in; we place flow ourselves and let a Dinic max-flow engine repair
// it), so on ties the chosen members can differ; the constraints and goals are the same:
//  1. current assignments are placed first (primaries before other replicas, items in id order),
//     each as long as it fits the caps above — this is what keeps movement minimal;
//  2. remaining replicas go greedily to the zone holding fewest replicas of the item, then to the
//     member with the lowest load relative to its cap, then to the member that sorts first;
//  3. the max-flow engine augments whatever is still short (which may move replicas placed in 1
//     or 2, but only where that lets more replicas be placed overall);
//  4. steps 2–3 are repeated with members at their full limits, then with the zone cap relaxed
//     for items still short.
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

  // 1. Current assignments: primaries first, then the other replicas. Where an item cannot keep
  // all of its other replicas (a zone or member cap is reached), those on the members least
  // loaded so far are kept, which spreads the replicas that must move across members.
  for (let i = 0; i < I; i++) {
    for (const a of items[i]!.assignments) if (a.slot === 0 && a.memberIndex >= 0) tryPlace(i, a.memberIndex);
  }
  const seededLoad = (m: number) => (sinkEdge[m]! < 0 ? Infinity : g.flow(sinkEdge[m]!) / fair[m]!);
  for (let i = 0; i < I; i++) {
    const others = items[i]!.assignments.filter((a) => a.slot !== 0 && a.memberIndex >= 0).map((a) => a.memberIndex);
    if (others.length > 1) others.sort((x, y) => seededLoad(x) - seededLoad(y) || x - y);
    for (const m of others) tryPlace(i, m);
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

  // 4b. Items still short may put all their replicas in one zone.
  if (Z > 1) {
    let anyShort = false;
    for (let i = 0; i < I; i++) {
      if (g.residual(srcEdge[i]!) <= 0) continue;
      anyShort = true;
      for (let z = 0; z < Z; z++) {
        const ez = zoneEdge[i * Z + z]!;
        g.raise(ez, want[i]! - (g.residual(ez) + g.flow(ez)));
      }
    }
    if (anyShort) {
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
  return { byItem, total, wanted: state.itemSlots };
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
