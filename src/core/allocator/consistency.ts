// The two consistency rules the planner is used with, over already-decoded assignment values
// (decoding the protobuf is the caller's business, through Decoders.assignment).
//
// Brokers: an assignment's value is the Route its replica last advertised. A journal is
// consistent when every one of its assignments carries the route its assignment keys describe
// (members in key order; primary = index of the slot-0 assignment, or -1), and so the replicas
// agree on who serves the journal. A new assignment's value is empty, which decodes as a route
// with no members (and primary 0, the protobuf default): never equal once the journal has a
// replica, so a new replica counts only after it has written its route.
//
// Consumers: an assignment's value is the shard replica's ReplicaStatus. A replica is consistent
// when it is STANDBY or PRIMARY (caught up with the recovery log). A FAILED replica is consistent
// only while the primary has failed too: replacing one failed replica with another does no harm,
// and it lets a failed primary be moved. IDLE and BACKFILL replicas are not consistent.

import type { IsConsistent } from './plan.js';
import type { Assignment } from './state.js';

export interface RouteLike {
  members: { zone: string; suffix: string }[];
  primary: number;
}

/** The route that a journal's assignments (in key order) describe. */
export function routeOf(assignments: readonly Assignment<unknown>[]): RouteLike {
  const route: RouteLike = { members: [], primary: -1 };
  for (const a of assignments) {
    if (a.slot === 0) route.primary = route.members.length;
    route.members.push({ zone: a.zone, suffix: a.suffix });
  }
  return route;
}

/** Same primary, same members in the same order (endpoints do not matter). */
export function routesEquivalent(a: RouteLike, b: RouteLike | undefined): boolean {
  if (!b || a.primary !== b.primary || a.members.length !== b.members.length) return false;
  return a.members.every((m, i) => m.zone === b.members[i]!.zone && m.suffix === b.members[i]!.suffix);
}

/** Broker rule; assignment values are decoded routes (undefined counts as no route). */
export const journalIsConsistent: IsConsistent<RouteLike | undefined> = (_item, _assignment, all) => {
  const route = routeOf(all);
  return all.every((a) => routesEquivalent(route, a.value));
};

/** ReplicaStatus codes, as numbered on the wire. */
export const ReplicaCode = { IDLE: 0, BACKFILL: 100, STANDBY: 200, PRIMARY: 300, FAILED: 400 } as const;

/** Consumer rule; assignment values are decoded ReplicaStatus (undefined counts as IDLE). */
export const shardIsConsistent: IsConsistent<{ code: number } | undefined> = (_item, assignment, all) => {
  const code = assignment.value?.code ?? ReplicaCode.IDLE;
  if (code === ReplicaCode.STANDBY || code === ReplicaCode.PRIMARY) return true;
  if (code === ReplicaCode.FAILED) {
    return all.some((a) => a.slot === 0 && (a.value?.code ?? ReplicaCode.IDLE) === ReplicaCode.FAILED);
  }
  return false;
};
