// A daemon's view of its etcd keyspace, shared by brokers and consumers: every key under the
// root, kept current by a prefix watch that never gives up, at one revision. Everything else in
// a daemon reads etcd state from here (or from a subclass that decodes items and members: the
// broker's ClusterView, the consumer's ShardView), never from etcd directly, so all of it agrees
// on one revision.

import type { Keyspace, KeyValue } from '../lib/keyspace/index.js';
import { parseAssignmentKey, parseItemKey, parseMemberKey, ASSIGNMENTS_PREFIX, ITEMS_PREFIX, MEMBERS_PREFIX, type AssignmentKey } from '../lib/keyspace/keys.js';
import type { Header_Etcd, ProcessSpec_ID, Route } from '../lib/protocol/gen/broker/protocol.js';
import { compareStrings } from '../lib/protocol/labels.js';
import type { Logger } from './log.js';

export class KeyspaceView {
  private readonly kvs = new Map<string, KeyValue>();
  private rev = 0n;
  private waiters: { rev: bigint; resolve: () => void }[] = [];
  private listeners = new Set<() => void>();
  /** cluster_id, member_id and raft_term of the etcd we talk to (revision filled per use). */
  private etcdIds: Omit<Header_Etcd, 'revision'> = { cluster_id: 0n, member_id: 0n, raft_term: 0n };
  private stopWatch: (() => Promise<void>) | undefined;

  constructor(
    private readonly ks: Keyspace,
    readonly root: string,
    protected readonly log: Logger,
    private readonly watchDelayMs = 0,
  ) {}

  get revision(): bigint {
    return this.rev;
  }

  /** Load the keyspace and follow it. Resolves once the first snapshot is in. */
  async start(): Promise<void> {
    await this.refreshEtcdIds();
    const snap = await this.ks.range(this.root + '/');
    this.replaceAll(snap.kvs, snap.revision);
    const w = this.ks.watchPrefix(this.root + '/', {
      afterRevision: snap.revision,
      onChanges: async (c) => {
        for (const e of c.events) {
          if (e.type === 'put') this.kvs.set(e.kv.key, e.kv);
          else this.kvs.delete(e.kv.key);
        }
        this.advance(c.revision);
      },
      onResync: (r) => {
        this.log.warn('etcd history was compacted under the watch; reloaded the keyspace', { revision: r.revision });
        this.replaceAll(r.kvs, r.revision);
      },
      onRetry: (err, attempt) => {
        if (attempt === 1 || attempt % 10 === 0) this.log.warn('etcd watch interrupted; retrying', { err: err.message, attempt });
        void this.refreshEtcdIds().catch(() => undefined);
      },
    });
    this.stopWatch = () => w.close();
    void w.done.catch((e: unknown) => this.log.error('etcd watch stopped', { err: (e as Error).message }));
  }

  async stop(): Promise<void> {
    await this.stopWatch?.();
  }

  /** Re-read etcd's ids (a raw range answers with the response header). */
  async refreshEtcdIds(): Promise<void> {
    const h = await this.ks.header(this.root + '/');
    this.etcdIds = { cluster_id: BigInt(h.cluster_id), member_id: BigInt(h.member_id), raft_term: BigInt(h.raft_term) };
  }

  /** The etcd part of response headers, at the view's revision (or `rev`). */
  etcdHeader(rev?: bigint): Header_Etcd {
    return { ...this.etcdIds, revision: rev ?? this.rev };
  }

  private replaceAll(kvs: KeyValue[], rev: bigint): void {
    this.kvs.clear();
    for (const kv of kvs) this.kvs.set(kv.key, kv);
    this.advance(rev);
  }

  private advance(rev: bigint): void {
    this.invalidate();
    if (rev > this.rev) this.rev = rev;
    const ready = this.waiters.filter((w) => w.rev <= this.rev);
    this.waiters = this.waiters.filter((w) => w.rev > this.rev);
    for (const w of ready) w.resolve();
    this.scheduleNotify();
  }

  private notifyTimer: NodeJS.Timeout | undefined;

  /**
   * Listeners hear of changes at most once per watch delay (--broker.watch-delay, and the
   * consumer's equivalent): a burst of
   * revisions (an allocation round over many journals) is handled once, not once per revision.
   * Waiters for a revision are resolved at once.
   */
  private scheduleNotify(): void {
    if (this.notifyTimer) return;
    this.notifyTimer = setTimeout(() => {
      this.notifyTimer = undefined;
      for (const l of this.listeners) {
        try {
          l();
        } catch (e) {
          this.log.error('view listener failed', { err: (e as Error).message });
        }
      }
    }, this.watchDelayMs);
  }

  /** Call `fn` after every change of the view. Returns an unsubscribe function. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Resolve once the view has reached `rev` (or `signal` aborts: rejects). */
  waitFor(rev: bigint, signal?: AbortSignal): Promise<void> {
    if (rev <= this.rev) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { rev, resolve: () => resolve() };
      this.waiters.push(w);
      signal?.addEventListener(
        'abort',
        () => {
          this.waiters = this.waiters.filter((x) => x !== w);
          reject(signal.reason ?? new Error('aborted'));
        },
        { once: true },
      );
    });
  }

  /** Drops what a subclass derived from the key/values: they changed. */
  protected invalidate(): void {}

  /** Raw key/values under the root, for the allocator. */
  rawKvs(): KeyValue[] {
    return [...this.kvs.values()];
  }

  get(key: string): KeyValue | undefined {
    return this.kvs.get(key);
  }

  /**
   * Every member key under the root, made into an entry by `make` (which decodes the spec), by
   * member key; a key that does not parse or a value that does not decode is skipped.
   */
  protected decodeMembers<M>(make: (id: ProcessSpec_ID, kv: KeyValue) => M): Map<string, M> {
    const out = new Map<string, M>();
    for (const kv of this.sortedUnder(this.root + MEMBERS_PREFIX)) {
      try {
        out.set(kv.key, make(parseMemberKey(this.root, kv.key), kv));
      } catch (e) {
        this.log.debug('ignoring member key', { key: kv.key, err: (e as Error).message });
      }
    }
    return out;
  }

  /**
   * Every item under the root, made into an entry by `item` (which decodes the spec), by id, with
   * its assignments in key order (made by `assignment`) and the route they describe: members in
   * assignment order, the slot-0 member as primary, and each member's endpoint from `endpointOf`
   * (a member key), the endpoints left out when none is known. Keys that do not parse, items
   * that do not decode and assignments of unknown items are skipped.
   */
  protected decodeItems<A extends AssignmentKey, E extends { assignments: A[]; route: Route }>(
    item: (id: string, kv: KeyValue) => E,
    assignment: (key: AssignmentKey, kv: KeyValue) => A,
    endpointOf: (memberKey: string) => string | undefined,
  ): Map<string, E> {
    const out = new Map<string, E>();
    for (const kv of this.sortedUnder(this.root + ITEMS_PREFIX)) {
      try {
        const id = parseItemKey(this.root, kv.key);
        out.set(id, item(id, kv));
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
      out.get(a.item)?.assignments.push(assignment(a, kv));
    }
    for (const e of out.values()) {
      const route: Route = { members: [], primary: -1, endpoints: [] };
      for (const a of e.assignments) {
        if (a.slot === 0) route.primary = route.members.length;
        route.members.push({ zone: a.zone, suffix: a.suffix });
        route.endpoints.push(endpointOf(this.root + MEMBERS_PREFIX + a.zone + '#' + a.suffix) ?? '');
      }
      if (route.endpoints.every((x) => x === '')) route.endpoints = [];
      e.route = route;
    }
    return out;
  }

  protected sortedUnder(prefix: string): KeyValue[] {
    const out: KeyValue[] = [];
    for (const [k, kv] of this.kvs) if (k.startsWith(prefix)) out.push(kv);
    return out.sort((a, b) => compareStrings(a.key, b.key));
  }
}
