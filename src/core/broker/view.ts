// The broker's view of its etcd keyspace (the shared KeyspaceView), decoded into journals
// (spec + assignments + route) and members.

import { decodeKv, type KeyValue } from '../../lib/keyspace/index.js';
import type { AssignmentKey } from '../../lib/keyspace/keys.js';
import { BrokerSpec, JournalSpec, Route, type ProcessSpec_ID } from '../../lib/protocol/gen/broker/protocol.js';
import { KeyspaceView } from '../keyspace-view.js';

export interface MemberEntry {
  id: ProcessSpec_ID;
  key: string;
  kv: KeyValue;
  spec: BrokerSpec;
}

export interface AssignmentEntry extends AssignmentKey {
  key: string;
  kv: KeyValue;
  /** The route the replica last advertised (an empty value decodes to an empty route). */
  value: Route;
}

export interface JournalEntry {
  name: string;
  kv: KeyValue;
  spec: JournalSpec;
  /** Assignments in key order. */
  assignments: AssignmentEntry[];
  /** The route the assignment keys describe, with member endpoints attached. */
  route: Route;
}

/** An assignment's advertised route; an empty or undecodable value is an empty route. */
function decodeRoute(v: Uint8Array): Route {
  try {
    return Route.decode(v);
  } catch {
    return { members: [], primary: -1, endpoints: [] };
  }
}

export class ClusterView extends KeyspaceView {
  private journalsCache: Map<string, JournalEntry> | undefined;
  private membersCache: Map<string, MemberEntry> | undefined;

  protected override invalidate(): void {
    this.journalsCache = undefined;
    this.membersCache = undefined;
  }

  members(): Map<string, MemberEntry> {
    return (this.membersCache ??= this.decodeMembers((id, kv) => ({ id, key: kv.key, kv, spec: BrokerSpec.decode(kv.value) })));
  }

  journals(): Map<string, JournalEntry> {
    if (this.journalsCache) return this.journalsCache;
    const members = this.members();
    this.journalsCache = this.decodeItems<AssignmentEntry, JournalEntry>(
      (name, kv) => ({ name, kv, spec: JournalSpec.decode(kv.value), assignments: [], route: { members: [], primary: -1, endpoints: [] } }),
      (a, kv) => ({ ...a, key: kv.key, kv, value: decodeRoute(kv.value) }),
      (memberKey) => members.get(memberKey)?.spec.process_spec?.endpoint,
    );
    return this.journalsCache;
  }
}

export { decodeKv };
