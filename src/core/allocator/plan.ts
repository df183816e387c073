// From current to desired: the etcd operations of one allocation round, as plain data.
//
// The allocating member runs rounds: it computes desired assignments, then applies every change
// that is safe right now, waits for etcd to move, and repeats. A change is safe when it cannot
// leave an item with fewer consistent replicas than it wants, nor a member over its limit. So, as
// in the Go allocator, replicas are added before old ones go: a round adds the new replicas, and
// an old replica is only removed in a round where the item's *current* consistent replicas,
// minus the removals, still number at least its desired replication. New replicas are created
// with an empty value, which no consistency rule accepts, so they count only once the replica
// has written its status and a later round sees it.
//
// Per item (items in id order), a round:
//  1. splits current vs desired into adds (new slots numbered after the highest current slot),
//     removals and keeps;
//  2. keeps back removals that would break the rule above (removals are tried from the most
//     loaded member down; a replica whose member key is gone counts as infinitely loaded);
//  3. picks a primary if the kept replicas have none: a consistent one first, then the one whose
//     member carries the fewest primaries for its limit, then the lowest slot;
//  4. drops adds whose member is already full (counts are updated as the round goes);
//  5. emits: adds (put, empty value, under the member's lease, guarded by the member key's mod
//     revision, as its limit may have changed), removals (delete, guarded by the item key's mod
//     revision, as its replication may have changed, and by the assignment's own), the promotion
//     (the kept replica's key is moved to slot 0 — delete + put of the same value under the
//     same lease, guarded by its mod revision) and, only when nothing was added or removed, the
//     packing of one kept replica to the lowest free slot, so slots become 0..n−1 over rounds.
// Assignments of items that no longer exist are deleted, guarded by the item key not existing.
// Every transaction is also guarded by the leader's own member key (if it changed, this member
// may no longer be the leader, or be exiting).
//
// The operations of one item always travel in one transaction; transactions are cut so that
// neither their compares nor their operations pass etcd's default limit of 128. (An item whose own
// operations exceed the limit — some 60 replicas changing at once — still gets one transaction,
// which etcd would refuse; upstream has the same limit.)

import { assignmentKey, compareStrings, itemKey, memberKey } from './keys.js';
import type { DesiredAssignments } from './solve.js';
import type { AllocState, Assignment, Item } from './state.js';

export interface Compare {
  compare: 'mod_revision' | 'create_revision';
  key: string;
  /** The revision the key must have; 0n means "does not exist". */
  equals: bigint;
}

export interface PutOp {
  type: 'put';
  key: string;
  value: Uint8Array;
  /** The member whose lease the key goes under: 'member:<zone>#<suffix>'. */
  lease: string;
  /**
   * That lease's id as read from the snapshot, so the caller needs no lookup: the member key's
   * lease for a new assignment, the old key's own lease for a moved one (as upstream).
   */
  leaseId: bigint;
}

export interface DeleteOp {
  type: 'delete';
  key: string;
}

export type Op = PutOp | DeleteOp;

export interface Txn {
  compares: Compare[];
  ops: Op[];
}

export type ChangeKind = 'add' | 'remove' | 'promote' | 'pack' | 'remove-dead';

export interface Change {
  kind: ChangeKind;
  itemId: string;
  zone: string;
  suffix: string;
  /** Slot after the change (add, promote, pack) or before it (remove). */
  slot: number;
  /** For promote and pack: the slot the replica had. */
  fromSlot?: number;
}

export interface Plan {
  txns: Txn[];
  changes: Change[];
  /** Current replicas the desired state drops but which must stay for now (consistency). */
  removalsHeld: number;
  /** Desired replicas not added this round because their member is full. */
  addsHeld: number;
}

/**
 * Decides whether an assignment counts as an in-sync replica of its item. For brokers, a journal
 * is consistent when every assignment's value is the route its keys describe; for consumers, a
 * shard replica is consistent when it is STANDBY or PRIMARY (or FAILED while the primary failed).
 */
export type IsConsistent<A = unknown> = (item: Item<any, A>, assignment: Assignment<A>, all: Assignment<A>[]) => boolean;

export interface PlanOptions {
  /** Key of the member running the round (its mod revision guards every txn); default the leader. */
  localKey?: string;
  /** Per-transaction limit on compares and on operations; default 128. */
  maxTxnOps?: number;
}

export const DEFAULT_MAX_TXN_OPS = 128;

const EMPTY = new Uint8Array(0);

export function planRound<A>(
  state: AllocState<any, any, A>,
  desired: DesiredAssignments,
  isConsistent: IsConsistent<A>,
  opts: PlanOptions = {},
): Plan {
  const root = state.root;
  const members = state.members;
  const maxOps = opts.maxTxnOps ?? DEFAULT_MAX_TXN_OPS;
  const localKey = opts.localKey ?? state.leaderKey;
  const fixed: Compare[] = [];
  if (localKey !== undefined) {
    const i = state.memberIndex.get(localKey);
    if (i === undefined) throw new Error(`member ${localKey} is not in the state`);
    fixed.push({ compare: 'mod_revision', key: localKey, equals: members[i]!.kv.modRevision });
  }

  const total = members.map((m) => m.totalCount);
  const primary = members.map((m) => m.primaryCount);
  const limit = members.map((m) => m.effectiveLimit);
  const ratio = (counts: number[], a: Assignment<A>) =>
    a.memberIndex < 0 ? Infinity : counts[a.memberIndex]! / limit[a.memberIndex]!;

  const txns: Txn[] = [];
  const changes: Change[] = [];
  let removalsHeld = 0;
  let addsHeld = 0;
  let cur: Txn = { compares: [], ops: [] };

  const checkpoint = (compares: Compare[], ops: Op[]) => {
    if (ops.length === 0) return;
    if (
      cur.ops.length > 0 &&
      (cur.compares.length + compares.length > maxOps || cur.ops.length + ops.length > maxOps)
    ) {
      txns.push(cur);
      cur = { compares: [], ops: [] };
    }
    if (cur.ops.length === 0) cur.compares.push(...fixed);
    cur.compares.push(...compares);
    cur.ops.push(...ops);
  };

  const move = (a: Assignment<A>, slot: number, compares: Compare[], ops: Op[]) => {
    compares.push({ compare: 'mod_revision', key: a.kv.key, equals: a.kv.modRevision });
    ops.push({ type: 'delete', key: a.kv.key });
    ops.push({
      type: 'put',
      key: assignmentKey(root, { itemId: a.itemId, zone: a.zone, suffix: a.suffix, slot }),
      value: a.kv.value,
      lease: `member:${a.zone}#${a.suffix}`,
      leaseId: a.kv.lease,
    });
  };

  // Dead assignments (their item is gone), grouped by item id, in key order.
  const dead = new Map<string, Assignment<A>[]>();
  for (const a of state.assignments) {
    if (a.itemIndex >= 0) continue;
    const list = dead.get(a.itemId);
    if (list) list.push(a);
    else dead.set(a.itemId, [a]);
  }
  const deadIds = [...dead.keys()];
  let nextDead = 0;
  const flushDeadBefore = (id: string | undefined) => {
    while (nextDead < deadIds.length && (id === undefined || compareStrings(deadIds[nextDead]!, id) < 0)) {
      const itemId = deadIds[nextDead++]!;
      const compares: Compare[] = [{ compare: 'create_revision', key: itemKey(root, itemId), equals: 0n }];
      const ops: Op[] = [];
      for (const a of dead.get(itemId)!) {
        compares.push({ compare: 'mod_revision', key: a.kv.key, equals: a.kv.modRevision });
        ops.push({ type: 'delete', key: a.kv.key });
        changes.push({ kind: 'remove-dead', itemId, zone: a.zone, suffix: a.suffix, slot: a.slot });
      }
      checkpoint(compares, ops);
    }
  };

  for (let i = 0; i < state.items.length; i++) {
    const item = state.items[i]!;
    flushDeadBefore(item.id);
    const current = item.assignments;
    const want = desired.byItem[i] ?? [];
    const r = item.desiredReplication;

    // 1. Adds, removals and keeps, walking both sides in member key order. A member may appear
    // twice in `current` (two slots, which the data model forbids): the second one is removed.
    let nextSlot = 0;
    for (const a of current) nextSlot = Math.max(nextSlot, a.slot + 1);
    const add: { member: number; slot: number }[] = [];
    let remove: Assignment<A>[] = [];
    let keep: Assignment<A>[] = [];
    const wanted = new Set(want);
    const seen = new Set<number>();
    for (const a of current) {
      if (a.memberIndex >= 0 && wanted.has(a.memberIndex) && !seen.has(a.memberIndex)) {
        keep.push(a);
        seen.add(a.memberIndex);
      } else {
        remove.push(a);
      }
    }
    for (const m of want) if (!seen.has(m)) add.push({ member: m, slot: nextSlot++ });

    // 2. Hold back removals that would leave too few consistent replicas.
    if (remove.length > 0) {
      remove = remove
        .map((a, k) => ({ a, k, load: ratio(total, a) }))
        .sort((x, y) => (y.load === x.load ? x.k - y.k : y.load > x.load ? 1 : -1))
        .map((x) => x.a);
      let n = 0;
      for (const a of current) if (isConsistent(item, a, current)) n++;
      let allowed = 0;
      while (n >= r && allowed < remove.length) {
        const c = isConsistent(item, remove[allowed]!, current);
        if (c && n === r) break;
        if (c) n--;
        allowed++;
      }
      removalsHeld += remove.length - allowed;
      keep = keep.concat(remove.slice(allowed));
      remove = remove.slice(0, allowed);
    }

    // 3. Primary: keep the current one, else promote the best kept replica.
    keep.sort((x, y) => x.slot - y.slot);
    let promote: Assignment<A> | undefined;
    if (keep.length > 0 && keep[0]!.slot !== 0) {
      let best = -1;
      let bestC = false;
      let bestR = 0;
      for (let k = 0; k < keep.length; k++) {
        const c = isConsistent(item, keep[k]!, current);
        const pr = ratio(primary, keep[k]!);
        if (best < 0 || (c && !bestC) || (c === bestC && pr < bestR)) {
          best = k;
          bestC = c;
          bestR = pr;
        }
      }
      promote = keep[best]!;
      keep.splice(best, 1);
      keep.unshift(promote);
    }

    // 4. Adds must fit their member's limit.
    const adds = add.filter(({ member }) => {
      if (limit[member]! <= total[member]!) {
        addsHeld++;
        return false;
      }
      // Count now, so later adds of this round see it.
      total[member]!++;
      return true;
    });

    // 5. Operations.
    const compares: Compare[] = [];
    const ops: Op[] = [];
    for (const { member, slot } of adds) {
      const m = members[member]!;
      compares.push({ compare: 'mod_revision', key: m.kv.key, equals: m.kv.modRevision });
      ops.push({
        type: 'put',
        key: assignmentKey(root, { itemId: item.id, zone: m.zone, suffix: m.suffix, slot }),
        value: EMPTY,
        lease: `member:${m.zone}#${m.suffix}`,
        leaseId: m.kv.lease,
      });
      if (slot === 0) primary[member]!++;
      changes.push({ kind: 'add', itemId: item.id, zone: m.zone, suffix: m.suffix, slot });
    }
    remove.forEach((a, k) => {
      if (k === 0) compares.push({ compare: 'mod_revision', key: itemKey(root, item.id), equals: item.kv.modRevision });
      compares.push({ compare: 'mod_revision', key: a.kv.key, equals: a.kv.modRevision });
      ops.push({ type: 'delete', key: a.kv.key });
      if (a.memberIndex >= 0) {
        total[a.memberIndex]!--;
        if (a.slot === 0) primary[a.memberIndex]!--;
      }
      changes.push({ kind: 'remove', itemId: item.id, zone: a.zone, suffix: a.suffix, slot: a.slot });
    });
    if (promote) {
      move(promote, 0, compares, ops);
      if (promote.memberIndex >= 0) primary[promote.memberIndex]!++;
      changes.push({ kind: 'promote', itemId: item.id, zone: promote.zone, suffix: promote.suffix, slot: 0, fromSlot: promote.slot });
    }
    if (adds.length === 0 && remove.length === 0) {
      for (let k = 1; k < keep.length; k++) {
        const a = keep[k]!;
        if (a.slot === k) continue;
        move(a, k, compares, ops);
        changes.push({ kind: 'pack', itemId: item.id, zone: a.zone, suffix: a.suffix, slot: k, fromSlot: a.slot });
        break;
      }
    }
    checkpoint(compares, ops);
  }
  flushDeadBefore(undefined);
  if (cur.ops.length > 0) txns.push(cur);

  return { txns, changes, removalsHeld, addsHeld };
}

/** The member key a lease tag of a put refers to ('member:<zone>#<suffix>' under root). */
export function leaseMemberKey(root: string, lease: string): string {
  const tag = lease.startsWith('member:') ? lease.slice('member:'.length) : lease;
  const sep = tag.indexOf('#');
  return memberKey(root, tag.slice(0, sep), tag.slice(sep + 1));
}

/**
 * The same transaction in the keyspace module's terms (src/lib/keyspace: Keyspace.txn compares
 * and ops), built structurally so this module stays free of etcd client code.
 */
export function toKeyspaceTxn(t: Txn): {
  compares: { key: string; target: 'modRevision' | 'createRevision'; result: '='; value: bigint }[];
  ops: ({ put: string; value: Uint8Array; lease?: bigint } | { delete: string })[];
} {
  return {
    compares: t.compares.map((c) => ({
      key: c.key,
      target: c.compare === 'mod_revision' ? ('modRevision' as const) : ('createRevision' as const),
      result: '=' as const,
      value: c.equals,
    })),
    ops: t.ops.map((o) =>
      o.type === 'delete' ? { delete: o.key } : o.leaseId !== 0n ? { put: o.key, value: o.value, lease: o.leaseId } : { put: o.key, value: o.value },
    ),
  };
}
