// Resolving a journal for one request: wait until the view is recent enough, find the
// journal's spec and route, and decide whether this broker serves the request, proxies it to
// the broker that does, or answers with a status (route attached, so clients can re-route).

import { JournalSpec_Suspend_Level, Status, type Header, type JournalSpec, type LabelSelector, type ProcessSpec_ID, type Route } from '../../lib/protocol/gen/broker/protocol.js';
import { memberIndex } from '../../lib/protocol/route.js';
import { journalMatchLabels, matchesSelector } from '../../lib/protocol/selector.js';
import type { Membership } from '../membership.js';
import type { ClusterView, JournalEntry } from './view.js';

export interface ResolveOptions {
  /** The journal (a `;suffix` such as `;meta` is ignored). */
  journal: string;
  /** The caller's claims selector (prefix labels rewritten): a journal outside it is not found. */
  claims?: LabelSelector;
  /** The request must be served by the primary (Append). */
  requirePrimary: boolean;
  mayProxy: boolean;
  /** The request's header, when another broker proxied it here. */
  header?: Header;
  minEtcdRevision?: bigint;
  signal?: AbortSignal;
}

export type Resolution =
  | { kind: 'local'; entry: JournalEntry; spec: JournalSpec; header: Header; localIndex: number }
  | {
      kind: 'proxy';
      entry: JournalEntry;
      endpoint: string;
      header: Header;
      /**
       * Other members that may serve the request instead (reads and fragment listings only), in
       * the order to try them when `endpoint` cannot be reached.
       */
      fallbacks?: { endpoint: string; header: Header }[];
    }
  | { kind: 'status'; status: Status; header: Header };

export class ResolveError extends Error {}

/** Replicas a journal wants: one while partially suspended, none while fully, as upstream. */
export function desiredReplication(spec: JournalSpec, max: number): number {
  const level = spec.suspend?.level ?? JournalSpec_Suspend_Level.NONE;
  const r = level === JournalSpec_Suspend_Level.PARTIAL ? 1 : level === JournalSpec_Suspend_Level.FULL ? 0 : spec.replication;
  return Math.min(r, max);
}

export class Resolver {
  constructor(
    private readonly view: ClusterView,
    private readonly member: Membership,
    readonly self: ProcessSpec_ID,
    private readonly random: () => number = Math.random,
  ) {}

  /** A header naming this broker, with `route` and the view's etcd state. */
  header(route?: Route): Header {
    return {
      process_id: { ...this.self },
      route: route ? { members: route.members.map((m) => ({ ...m })), primary: route.primary, endpoints: [...route.endpoints] } : { members: [], primary: -1, endpoints: [] },
      etcd: this.view.etcdHeader(),
    };
  }

  async resolve(o: ResolveOptions): Promise<Resolution> {
    const name = o.journal.split(';')[0]!;
    if (o.header) {
      const h = o.header;
      const ours = this.view.etcdHeader();
      if (h.etcd && h.etcd.cluster_id !== 0n && ours.cluster_id !== 0n && h.etcd.cluster_id !== ours.cluster_id) {
        throw new ResolveError(`proxied request is from etcd cluster ${h.etcd.cluster_id}, this broker is on ${ours.cluster_id}`);
      }
      if (h.process_id && (h.process_id.zone !== '' || h.process_id.suffix !== '') && (h.process_id.zone !== this.self.zone || h.process_id.suffix !== this.self.suffix)) {
        throw new ResolveError(`proxied request is for broker ${h.process_id.zone}#${h.process_id.suffix}, this is ${this.self.zone}#${this.self.suffix}`);
      }
      if (h.etcd) await this.view.waitFor(h.etcd.revision, o.signal);
    }
    if (o.minEtcdRevision && o.minEtcdRevision > 0n) await this.view.waitFor(o.minEtcdRevision, o.signal);

    const found = this.view.journals().get(name);
    // A journal the caller is not authorized to is treated as if it did not exist, as upstream.
    const entry = found && o.claims && !matchesSelector(o.claims, journalMatchLabels(found.spec)) ? undefined : found;
    if (!entry) return { kind: 'status', status: Status.JOURNAL_NOT_FOUND, header: this.header() };
    const route = entry.route;
    const header = this.header(route);
    // A broker without a live lease does not act for its assignments.
    const localIndex = this.member.registered ? memberIndex(route, this.self) : -1;

    if (entry.spec.suspend?.level === JournalSpec_Suspend_Level.FULL) return { kind: 'status', status: Status.SUSPENDED, header };
    if (o.requirePrimary) {
      if (route.primary < 0) return { kind: 'status', status: Status.NO_JOURNAL_PRIMARY_BROKER, header };
      if (route.primary === localIndex) return { kind: 'local', entry, spec: entry.spec, header, localIndex };
      if (!o.mayProxy || o.header) return { kind: 'status', status: Status.NOT_JOURNAL_PRIMARY_BROKER, header };
      const endpoint = route.endpoints[route.primary];
      if (!endpoint) return { kind: 'status', status: Status.NO_JOURNAL_PRIMARY_BROKER, header };
      return { kind: 'proxy', entry, endpoint, header: { ...header, process_id: { ...route.members[route.primary]! } } };
    }
    if (route.members.length === 0) return { kind: 'status', status: Status.INSUFFICIENT_JOURNAL_BROKERS, header };
    if (localIndex >= 0) return { kind: 'local', entry, spec: entry.spec, header, localIndex };
    if (!o.mayProxy || o.header) return { kind: 'status', status: Status.NOT_JOURNAL_BROKER, header };
    // Any member serves a read: start at a random one, as the reference broker does, so reads
    // spread over the route. The others follow as fallbacks: while a killed primary still holds
    // its place in the route (until its lease expires), a read proxied to it is tried on a
    // live replica instead of failing back to the client.
    const n = route.members.length;
    const start = Math.floor(this.random() * n);
    const targets: { endpoint: string; header: Header }[] = [];
    for (let k = 0; k < n; k++) {
      const i = (start + k) % n;
      const endpoint = route.endpoints[i];
      if (endpoint) targets.push({ endpoint, header: { ...header, process_id: { ...route.members[i]! } } });
    }
    const [first, ...fallbacks] = targets;
    if (!first) return { kind: 'status', status: Status.INSUFFICIENT_JOURNAL_BROKERS, header };
    return { kind: 'proxy', entry, endpoint: first.endpoint, header: first.header, fallbacks };
  }
}
