// The consumer's view of its etcd keyspace (the shared KeyspaceView) decoded as upstream's
// consumer key space: items are ShardSpecs, members ConsumerSpecs, and an assignment's value is
// its replica's ReplicaStatus (an empty value decodes as IDLE).

import type { KeyValue } from '../../lib/keyspace/index.js';
import { parseAssignmentKey, parseItemKey, parseMemberKey, ASSIGNMENTS_PREFIX, ITEMS_PREFIX, MEMBERS_PREFIX, type AssignmentKey } from '../../lib/keyspace/keys.js';
import type { ProcessSpec_ID, Route } from '../../lib/protocol/gen/broker/protocol.js';
import { ConsumerSpec, ReplicaStatus, ReplicaStatus_Code, ShardSpec } from '../../lib/protocol/gen/consumer/protocol.js';
import { KeyspaceView } from '../keyspace-view.js';

export interface ConsumerEntry {
  id: ProcessSpec_ID;
  key: string;
  kv: KeyValue;
  spec: ConsumerSpec;
}

export interface ShardAssignment extends AssignmentKey {
  key: string;
  kv: KeyValue;
  status: ReplicaStatus;
}

export interface ShardEntry {
  id: string;
  kv: KeyValue;
  spec: ShardSpec;
  /** Assignments in key order. */
  assignments: ShardAssignment[];
  /** The route the assignment keys describe, with member endpoints attached. */
  route: Route;
}

function decodeStatus(v: Uint8Array): ReplicaStatus {
  if (v.length === 0) return { code: ReplicaStatus_Code.IDLE, errors: [] };
  try {
    return ReplicaStatus.decode(v);
  } catch {
    return { code: ReplicaStatus_Code.IDLE, errors: [] };
  }
}

export class ShardView extends KeyspaceView {
  private shardsCache: Map<string, ShardEntry> | undefined;
  private membersCache: Map<string, ConsumerEntry> | undefined;

  protected override invalidate(): void {
    this.shardsCache = undefined;
    this.membersCache = undefined;
  }

  members(): Map<string, ConsumerEntry> {
    if (this.membersCache) return this.membersCache;
    const out = new Map<string, ConsumerEntry>();
    for (const kv of this.sortedUnder(this.root + MEMBERS_PREFIX)) {
      try {
        const id = parseMemberKey(this.root, kv.key);
        out.set(kv.key, { id, key: kv.key, kv, spec: ConsumerSpec.decode(kv.value) });
      } catch (e) {
        this.log.debug('ignoring member key', { key: kv.key, err: (e as Error).message });
      }
    }
    this.membersCache = out;
    return out;
  }

  shards(): Map<string, ShardEntry> {
    if (this.shardsCache) return this.shardsCache;
    const members = this.members();
    const out = new Map<string, ShardEntry>();
    for (const kv of this.sortedUnder(this.root + ITEMS_PREFIX)) {
      try {
        const id = parseItemKey(this.root, kv.key);
        out.set(id, { id, kv, spec: ShardSpec.decode(kv.value), assignments: [], route: { members: [], primary: -1, endpoints: [] } });
      } catch (e) {
        this.log.debug('ignoring item key', { key: kv.key, err: (e as Error).message });
      }
    }
    for (const kv of this.sortedUnder(this.root + ASSIGNMENTS_PREFIX)) {
      let a: AssignmentKey;
      try {
        a = parseAssignmentKey(this.root, kv.key);
      } catch {
        continue;
      }
      out.get(a.item)?.assignments.push({ ...a, key: kv.key, kv, status: decodeStatus(kv.value) });
    }
    for (const s of out.values()) {
      const route: Route = { members: [], primary: -1, endpoints: [] };
      for (const a of s.assignments) {
        if (a.slot === 0) route.primary = route.members.length;
        route.members.push({ zone: a.zone, suffix: a.suffix });
        const m = members.get(this.root + MEMBERS_PREFIX + a.zone + '#' + a.suffix);
        route.endpoints.push(m?.spec.process_spec?.endpoint ?? '');
      }
      if (route.endpoints.every((e) => e === '')) route.endpoints = [];
      s.route = route;
    }
    this.shardsCache = out;
    return out;
  }
}
