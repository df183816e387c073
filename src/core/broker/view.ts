// The broker's view of its etcd keyspace (the shared KeyspaceView), decoded into journals
// (spec + assignments + route) and members.

import { decodeKv, type KeyValue } from '../../lib/keyspace/index.js';
import { parseAssignmentKey, parseItemKey, parseMemberKey, ASSIGNMENTS_PREFIX, ITEMS_PREFIX, MEMBERS_PREFIX, type AssignmentKey } from '../../lib/keyspace/keys.js';
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

export class ClusterView extends KeyspaceView {
  private journalsCache: Map<string, JournalEntry> | undefined;
  private membersCache: Map<string, MemberEntry> | undefined;

  protected override invalidate(): void {
    this.journalsCache = undefined;
    this.membersCache = undefined;
  }

  members(): Map<string, MemberEntry> {
    if (this.membersCache) return this.membersCache;
    const out = new Map<string, MemberEntry>();
    const prefix = this.root + MEMBERS_PREFIX;
    for (const kv of this.sortedUnder(prefix)) {
      try {
        const id = parseMemberKey(this.root, kv.key);
        out.set(kv.key, { id, key: kv.key, kv, spec: BrokerSpec.decode(kv.value) });
      } catch (e) {
        this.log.debug('ignoring member key', { key: kv.key, err: (e as Error).message });
      }
    }
    this.membersCache = out;
    return out;
  }

  journals(): Map<string, JournalEntry> {
    if (this.journalsCache) return this.journalsCache;
    const members = this.members();
    const out = new Map<string, JournalEntry>();
    for (const kv of this.sortedUnder(this.root + ITEMS_PREFIX)) {
      try {
        const name = parseItemKey(this.root, kv.key);
        const spec = JournalSpec.decode(kv.value);
        out.set(name, { name, kv, spec, assignments: [], route: { members: [], primary: -1, endpoints: [] } });
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
      const j = out.get(a.item);
      if (!j) continue;
      let value: Route;
      try {
        value = Route.decode(kv.value);
      } catch {
        value = { members: [], primary: -1, endpoints: [] };
      }
      j.assignments.push({ ...a, key: kv.key, kv, value });
    }
    for (const j of out.values()) {
      const route: Route = { members: [], primary: -1, endpoints: [] };
      for (const a of j.assignments) {
        if (a.slot === 0) route.primary = route.members.length;
        route.members.push({ zone: a.zone, suffix: a.suffix });
        const m = members.get(this.root + MEMBERS_PREFIX + a.zone + '#' + a.suffix);
        route.endpoints.push(m?.spec.process_spec?.endpoint ?? '');
      }
      if (route.endpoints.every((e) => e === '')) route.endpoints = [];
      j.route = route;
    }
    this.journalsCache = out;
    return out;
  }
}

export { decodeKv };
