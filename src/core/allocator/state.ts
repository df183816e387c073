// Allocation state: what the allocator sees when it looks at a snapshot of its keyspace.
//
// Pure: it takes the key/values under the root prefix (as read from etcd, any order) and two
// decoder callbacks, and builds the view every later step works from. No etcd I/O happens here.
//
// Facts it encodes (matching the Go allocator, so a TypeScript and a Go member agree):
//  * The allocating member ("leader") is the member whose key has the lowest create revision;
//    equal revisions (not possible in one etcd, but possible in hand-made snapshots) go to the
//    member that sorts first.
//  * Zones are the distinct zones of members having a non-zero item limit, sorted.
//  * Member and primary counts include only assignments of items that exist.
//  * Members flagged as exiting are granted "shed capacity": spare cluster capacity (member
//    slots beyond the summed desired replication) is taken off their limit, oldest member (by
//    create revision) first, so that they drain while the cluster can absorb their load. At most
//    (#members - largest desired replication) members shed, so enough members stay at full
//    capacity to place the most replicated item.

import { assignmentMemberKey, compareStrings, parseKey, type AssignmentName } from './keys.js';

/**
 * One etcd key/value of the snapshot. Revisions and lease ids are int64 in etcd, hence bigint;
 * the keyspace module's KeyValue has this shape (and more), so its ranges can be passed as is.
 */
export interface RawKeyValue {
  key: string;
  value: Uint8Array;
  createRevision: bigint;
  modRevision: bigint;
  /** Lease id; 0n for no lease. */
  lease: bigint;
}

/** What the allocator needs from an item's decoded spec (JournalSpec, ShardSpec). */
export interface ItemValue {
  desiredReplication: number;
}

/** What the allocator needs from a member's decoded spec (BrokerSpec, ConsumerSpec). */
export interface MemberValue {
  /** journal_limit / shard_limit. */
  itemLimit: number;
  /** The spec's `exiting` flag. */
  exiting?: boolean;
}

export interface Decoders<I extends ItemValue = ItemValue, M extends MemberValue = MemberValue, A = unknown> {
  item(id: string, kv: RawKeyValue): I;
  member(zone: string, suffix: string, kv: RawKeyValue): M;
  /** Optional: decodes an assignment's value (a Route, a ReplicaStatus). Default: undefined. */
  assignment?(name: AssignmentName, kv: RawKeyValue): A;
}

export interface Item<I extends ItemValue = ItemValue, A = unknown> {
  id: string;
  kv: RawKeyValue;
  value: I;
  /** Non-negative integer taken from the decoded value. */
  desiredReplication: number;
  /** Current assignments of the item, in key order. */
  assignments: Assignment<A>[];
}

export interface Member<M extends MemberValue = MemberValue> {
  zone: string;
  suffix: string;
  kv: RawKeyValue;
  value: M;
  /** Non-negative integer item limit from the decoded value. */
  itemLimit: number;
  /** The exiting flag is set, or the item limit is zero: the member is to be drained. */
  exiting: boolean;
  /** Slots taken off the limit while exiting (see the file comment). */
  shedCapacity: number;
  /** itemLimit - shedCapacity: what the solver and the planner may fill. */
  effectiveLimit: number;
  /** Current assignments of existing items on this member (all slots). */
  totalCount: number;
  /** Current slot-0 assignments of existing items on this member. */
  primaryCount: number;
}

export interface Assignment<A = unknown> extends AssignmentName {
  kv: RawKeyValue;
  value: A | undefined;
  /** Index into AllocState.members, or -1 when the member key is gone. */
  memberIndex: number;
  /** Index into AllocState.items, or -1 when the item is gone (a "dead" assignment). */
  itemIndex: number;
}

export interface KeyProblem {
  key: string;
  reason: string;
}

export interface AllocState<I extends ItemValue = ItemValue, M extends MemberValue = MemberValue, A = unknown> {
  root: string;
  /** Items in key (id) order. */
  items: Item<I, A>[];
  /** Members in key (zone, suffix) order. */
  members: Member<M>[];
  /** All assignments in key order, including dead ones. */
  assignments: Assignment<A>[];
  /** Member key -> index into members. */
  memberIndex: Map<string, number>;
  /** Sorted zones of members having a non-zero item limit. */
  zones: string[];
  /** Summed item limit of each zone (parallel to zones). */
  zoneSlots: number[];
  /** Summed desired replication of all items. */
  itemSlots: number;
  /** Summed effective limit of all members. */
  memberSlots: number;
  /** Largest desired replication of any item. */
  maxReplication: number;
  /** Key of the allocating member, or undefined when there are no members. */
  leaderKey: string | undefined;
  /** Keys that did not parse or decode; they take no part in allocation. */
  problems: KeyProblem[];
}

function count(n: unknown): number {
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** Builds the allocation state from the key/values found under `root`. */
export function buildState<I extends ItemValue, M extends MemberValue, A = unknown>(
  root: string,
  kvs: Iterable<RawKeyValue>,
  decoders: Decoders<I, M, A>,
): AllocState<I, M, A> {
  const problems: KeyProblem[] = [];
  const items: Item<I, A>[] = [];
  const members: Member<M>[] = [];
  const assignments: Assignment<A>[] = [];

  for (const kv of kvs) {
    const parsed = parseKey(root, kv.key);
    if (typeof parsed === 'string') {
      problems.push({ key: kv.key, reason: parsed });
      continue;
    }
    try {
      if (parsed.kind === 'item') {
        const value = decoders.item(parsed.id, kv);
        items.push({ id: parsed.id, kv, value, desiredReplication: count(value.desiredReplication), assignments: [] });
      } else if (parsed.kind === 'member') {
        const value = decoders.member(parsed.zone, parsed.suffix, kv);
        const itemLimit = count(value.itemLimit);
        members.push({
          zone: parsed.zone,
          suffix: parsed.suffix,
          kv,
          value,
          itemLimit,
          exiting: value.exiting === true || itemLimit === 0,
          shedCapacity: 0,
          effectiveLimit: itemLimit,
          totalCount: 0,
          primaryCount: 0,
        });
      } else {
        const name: AssignmentName = { itemId: parsed.itemId, zone: parsed.zone, suffix: parsed.suffix, slot: parsed.slot };
        const value = decoders.assignment ? decoders.assignment(name, kv) : undefined;
        assignments.push({
          itemId: name.itemId,
          zone: name.zone,
          suffix: name.suffix,
          slot: name.slot,
          kv,
          value,
          memberIndex: -1,
          itemIndex: -1,
        });
      }
    } catch (err) {
      problems.push({ key: kv.key, reason: `cannot decode value: ${err instanceof Error ? err.message : String(err)}` });
    }
  }

  // Plain string order is etcd's byte order unless a key has characters from U+D800 up; only
  // then is the slower byte-order comparison needed.
  const wide = /[\ud800-\uffff]/;
  const slow = items.some((x) => wide.test(x.kv.key)) || members.some((x) => wide.test(x.kv.key)) || assignments.some((x) => wide.test(x.kv.key));
  const byKey = slow
    ? (a: { kv: RawKeyValue }, b: { kv: RawKeyValue }) => compareStrings(a.kv.key, b.kv.key)
    : (a: { kv: RawKeyValue }, b: { kv: RawKeyValue }) => (a.kv.key < b.kv.key ? -1 : a.kv.key > b.kv.key ? 1 : 0);
  items.sort(byKey);
  members.sort(byKey);
  assignments.sort(byKey);

  const memberIndex = new Map<string, number>();
  members.forEach((m, i) => memberIndex.set(m.kv.key, i));

  // Zones and member slots.
  const zones: string[] = [];
  const zoneSlots: number[] = [];
  let memberSlots = 0;
  for (const m of members) {
    if (m.itemLimit > 0) {
      if (zones.length === 0 || zones[zones.length - 1] !== m.zone) {
        zones.push(m.zone);
        zoneSlots.push(0);
      }
      zoneSlots[zoneSlots.length - 1] += m.itemLimit;
    }
    memberSlots += m.itemLimit;
  }

  // Join items with their assignments (both sorted; an item's assignments share the
  // prefix "<id>#", and '#' sorts below every id character, so the orders agree).
  const itemIndex = new Map<string, number>();
  items.forEach((it, i) => itemIndex.set(it.id, i));
  let itemSlots = 0;
  let maxReplication = 0;
  for (const it of items) {
    itemSlots += it.desiredReplication;
    maxReplication = Math.max(maxReplication, it.desiredReplication);
  }
  for (const a of assignments) {
    a.itemIndex = itemIndex.get(a.itemId) ?? -1;
    a.memberIndex = memberIndex.get(assignmentMemberKey(root, a)) ?? -1;
    if (a.itemIndex < 0) continue;
    items[a.itemIndex]!.assignments.push(a);
    if (a.memberIndex >= 0) {
      const m = members[a.memberIndex]!;
      m.totalCount++;
      if (a.slot === 0) m.primaryCount++;
    }
  }

  // Shed capacity of flagged exiting members, oldest first.
  let excess = Math.max(0, memberSlots - itemSlots);
  const maxShedding = Math.max(0, members.length - maxReplication);
  const exiting = members
    .map((m, i) => ({ m, i }))
    .filter(({ m }) => m.value.exiting === true)
    .sort((a, b) => (a.m.kv.createRevision < b.m.kv.createRevision ? -1 : a.m.kv.createRevision > b.m.kv.createRevision ? 1 : a.i - b.i));
  for (let n = 0; n < exiting.length && n < maxShedding && excess > 0; n++) {
    const m = exiting[n]!.m;
    const shed = Math.min(m.itemLimit, excess);
    m.shedCapacity = shed;
    m.effectiveLimit = m.itemLimit - shed;
    memberSlots -= shed;
    excess -= shed;
  }

  return {
    root,
    items,
    members,
    assignments,
    memberIndex,
    zones,
    zoneSlots,
    itemSlots,
    memberSlots,
    maxReplication,
    leaderKey: leaderOf(members),
    problems,
  };
}

function leaderOf(members: Member[]): string | undefined {
  let leader: Member | undefined;
  for (const m of members) {
    if (!leader || m.kv.createRevision < leader.kv.createRevision) leader = m;
  }
  return leader?.kv.key;
}

/** True when `localKey` is the allocating member of this state. */
export function isLeader(state: AllocState<any, any, any>, localKey: string): boolean {
  return state.leaderKey !== undefined && state.leaderKey === localKey;
}

/**
 * True when the member `localKey` is exiting and holds no assignment any more, so that it may stop
 * (upstream's allocator loop returns at that point).
 */
export function mayExit(state: AllocState<any, any, any>, localKey: string): boolean {
  const i = state.memberIndex.get(localKey);
  if (i === undefined) return false;
  const m = state.members[i]!;
  if (!m.exiting) return false;
  return !state.assignments.some((a) => a.memberIndex === i && a.itemIndex >= 0);
}
