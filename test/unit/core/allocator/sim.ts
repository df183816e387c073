// Test support for the allocator: an in-memory stand-in for etcd that applies the planner's
// transactions exactly as etcd would (all compares hold, or nothing happens), plus a driver that
// runs allocation rounds the way the core's leader loop will.
//
// Values in these tests are JSON: items {"r": N}, members {"limit": N, "exiting"?: true}, and an
// assignment is "consistent" when its value is the text `consistent` (a freshly created one is
// empty, hence not).

import assert from 'node:assert/strict';

import {
  buildState,
  networkHash,
  planRound,
  solveDesired,
  type AllocState,
  type DesiredAssignments,
  type IsConsistent,
  type Plan,
  type RawKeyValue,
  type Txn,
} from '../../../../src/core/allocator/index.js';

export const ROOT = '/root';
const enc = new TextEncoder();
const dec = new TextDecoder();

export const decoders = {
  item: (_id: string, kv: RawKeyValue) => {
    const v = JSON.parse(dec.decode(kv.value)) as { r: number };
    return { desiredReplication: v.r };
  },
  member: (_z: string, _s: string, kv: RawKeyValue) => {
    const v = JSON.parse(dec.decode(kv.value)) as { limit: number; exiting?: boolean };
    return { itemLimit: v.limit, exiting: v.exiting === true };
  },
  assignment: (_n: unknown, kv: RawKeyValue) => dec.decode(kv.value),
};

export const consistent: IsConsistent<string> = (_item, a) => a.value === 'consistent';

export type State = AllocState<{ desiredReplication: number }, { itemLimit: number; exiting: boolean }, string>;

export class FakeEtcd {
  revision = 1n;
  private kvs = new Map<string, RawKeyValue>();
  private nextLease = 1000n;
  /** Lease id of each member key put through member(). */
  readonly leases = new Map<string, bigint>();

  put(key: string, value: string | Uint8Array, lease = 0n): void {
    this.revision++;
    this.putAt(key, typeof value === 'string' ? enc.encode(value) : value, lease);
  }

  private putAt(key: string, value: Uint8Array, lease: bigint): void {
    const prev = this.kvs.get(key);
    this.kvs.set(key, {
      key,
      value,
      createRevision: prev ? prev.createRevision : this.revision,
      modRevision: this.revision,
      lease,
    });
  }

  delete(key: string): void {
    this.revision++;
    this.kvs.delete(key);
  }

  get(key: string): RawKeyValue | undefined {
    return this.kvs.get(key);
  }

  item(id: string, r: number): void {
    this.put(`${ROOT}/items/${id}`, JSON.stringify({ r }));
  }

  member(zone: string, suffix: string, limit: number, exiting = false): void {
    const key = `${ROOT}/members/${zone}#${suffix}`;
    let lease = this.leases.get(key);
    if (!lease) {
      lease = this.nextLease++;
      this.leases.set(key, lease);
    }
    this.put(key, JSON.stringify(exiting ? { limit, exiting } : { limit }), lease);
  }

  /** Drops a member key and every key under its lease, as a lease expiry does. */
  expireMember(zone: string, suffix: string): void {
    const key = `${ROOT}/members/${zone}#${suffix}`;
    const lease = this.leases.get(key);
    assert.ok(lease, `no lease for ${key}`);
    this.revision++;
    for (const [k, kv] of [...this.kvs]) if (kv.lease === lease) this.kvs.delete(k);
    this.leases.delete(key);
  }

  assign(itemId: string, zone: string, suffix: string, slot: number, value = 'consistent'): void {
    const lease = this.leases.get(`${ROOT}/members/${zone}#${suffix}`) ?? 0n;
    this.put(`${ROOT}/assign/${itemId}#${zone}#${suffix}#${slot}`, value, lease);
  }

  keys(prefix = ''): string[] {
    return [...this.kvs.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  assignmentKeys(): string[] {
    return this.keys(`${ROOT}/assign/`);
  }

  snapshot(): RawKeyValue[] {
    return [...this.kvs.values()];
  }

  state(): State {
    return buildState(ROOT, this.snapshot(), decoders) as State;
  }

  /** Applies a transaction; returns whether its compares held. */
  txn(t: Txn): boolean {
    for (const c of t.compares) {
      const kv = this.kvs.get(c.key);
      const actual = kv ? (c.compare === 'mod_revision' ? kv.modRevision : kv.createRevision) : 0n;
      if (actual !== c.equals) return false;
    }
    this.revision++;
    const movedLeases = new Set<bigint>();
    for (const op of t.ops) {
      if (op.type === 'delete') {
        const kv = this.kvs.get(op.key);
        if (kv) movedLeases.add(kv.lease);
        this.kvs.delete(op.key);
      } else {
        // A new key goes under its member's live lease (named by tag and by id); a moved key
        // keeps the lease of the key it replaces.
        assert.equal(op.lease.startsWith('member:'), true, op.lease);
        const live = this.leases.get(`${ROOT}/members/${op.lease.slice('member:'.length)}`);
        assert.ok(live === op.leaseId || movedLeases.has(op.leaseId), `lease of ${op.key}`);
        this.putAt(op.key, op.value, op.leaseId);
      }
    }
    return true;
  }

  /** Sets every assignment value to `consistent`; returns how many changed. */
  markAllConsistent(): number {
    let n = 0;
    for (const k of this.assignmentKeys()) {
      const kv = this.kvs.get(k)!;
      if (dec.decode(kv.value) !== 'consistent') {
        this.put(k, 'consistent', kv.lease);
        n++;
      }
    }
    return n;
  }
}

export interface RoundLog {
  plans: Plan[];
  /** Rounds that applied at least one transaction. */
  rounds: number;
  desired: DesiredAssignments;
  state: State;
}

/**
 * Runs rounds until the planner has nothing to do. Between idle rounds, when `settle` is set,
 * every replica becomes consistent (as replicas do once they catch up) and rounds continue.
 * Desired assignments are re-solved only when the network hash changes, as the leader loop does.
 * Every transaction must apply (nothing else writes meanwhile).
 */
export function runRounds(etcd: FakeEtcd, opts: { settle?: boolean; maxRounds?: number; maxTxnOps?: number } = {}): RoundLog {
  const plans: Plan[] = [];
  let rounds = 0;
  let hash = '';
  let desired: DesiredAssignments | undefined;
  for (let guard = 0; ; guard++) {
    assert.ok(guard < (opts.maxRounds ?? 60), 'allocation did not settle');
    const state = etcd.state();
    const h = networkHash(state);
    if (h !== hash || !desired) {
      desired = solveDesired(state);
      hash = h;
    }
    const plan = planRound(state, desired, consistent, { maxTxnOps: opts.maxTxnOps });
    if (plan.txns.length === 0) {
      if (opts.settle !== false && etcd.markAllConsistent() > 0) continue;
      return { plans, rounds, desired, state };
    }
    plans.push(plan);
    rounds++;
    for (const t of plan.txns) assert.equal(etcd.txn(t), true, 'transaction compares failed');
  }
}

/** Assignment keys of one item. */
export function itemAssignments(etcd: FakeEtcd, id: string): string[] {
  return etcd.keys(`${ROOT}/assign/${id}#`);
}

/** Desired member keys ("zone#suffix") per item id. */
export function desiredByItem(state: State, desired: DesiredAssignments): Map<string, string[]> {
  const out = new Map<string, string[]>();
  state.items.forEach((it, i) => {
    out.set(
      it.id,
      desired.byItem[i]!.map((m) => `${state.members[m]!.zone}#${state.members[m]!.suffix}`),
    );
  });
  return out;
}

/** Current member keys ("zone#suffix") per item id, from the assignments. */
export function currentByItem(state: State): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const it of state.items) out.set(it.id, it.assignments.map((a) => `${a.zone}#${a.suffix}`));
  return out;
}
