// The consumer's view of its etcd keyspace (the shared KeyspaceView) decoded as upstream's
// consumer key space: items are ShardSpecs, members ConsumerSpecs, and an assignment's value is
// its replica's ReplicaStatus (an empty value decodes as IDLE).

import type { KeyValue } from '../../lib/keyspace/index.js';
import type { AssignmentKey } from '../../lib/keyspace/keys.js';
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
    return (this.membersCache ??= this.decodeMembers((id, kv) => ({ id, key: kv.key, kv, spec: ConsumerSpec.decode(kv.value) })));
  }

  shards(): Map<string, ShardEntry> {
    if (this.shardsCache) return this.shardsCache;
    const members = this.members();
    this.shardsCache = this.decodeItems<ShardAssignment, ShardEntry>(
      (id, kv) => ({ id, kv, spec: ShardSpec.decode(kv.value), assignments: [], route: { members: [], primary: -1, endpoints: [] } }),
      (a, kv) => ({ ...a, key: kv.key, kv, status: decodeStatus(kv.value) }),
      (memberKey) => members.get(memberKey)?.spec.process_spec?.endpoint,
    );
    return this.shardsCache;
  }
}
