// The allocation loop: whenever the view changes and this member is the allocating one (the
// member key with the lowest create revision), run one round of the allocator — solve for the
// desired assignments, plan the safe changes — and execute its transactions through the
// keyspace. A failed compare only means etcd moved on; the next change of the view starts the
// next round.

import type { Keyspace } from '../../lib/keyspace/index.js';
import { BrokerSpec, JournalSpec, Route } from '../../lib/protocol/gen/broker/protocol.js';
import {
  buildState,
  isLeader,
  journalIsConsistent,
  mayExit,
  planRound,
  solveDesired,
  toKeyspaceTxn,
  networkHash,
  type AllocState,
  type DesiredAssignments,
  type RouteLike,
} from '../allocator/index.js';
import type { Logger } from './log.js';
import { desiredReplication } from './resolver.js';
import type { Membership } from './members.js';
import type { ClusterView } from './view.js';

type State = AllocState<{ desiredReplication: number }, { itemLimit: number; exiting: boolean }, RouteLike | undefined>;

export class AllocationLoop {
  private running = false;
  private again = false;
  private stopped = false;
  private desired: { hash: string; desired: DesiredAssignments } | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly view: ClusterView,
    private readonly ks: Keyspace,
    private readonly member: Membership,
    private readonly maxReplication: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.unsubscribe = this.view.onChange(() => this.kick());
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
  }

  state(): State {
    const max = this.maxReplication;
    return buildState(this.view.root, this.view.rawKvs(), {
      item: (_id, kv) => ({ desiredReplication: desiredReplication(JournalSpec.decode(kv.value), max) }),
      member: (_z, _s, kv) => {
        const s = BrokerSpec.decode(kv.value);
        return { itemLimit: s.journal_limit, exiting: s.exiting };
      },
      assignment: (_n, kv) => (kv.value.length === 0 ? undefined : (Route.decode(kv.value) as RouteLike)),
    }) as State;
  }

  /** Whether this member is exiting and holds no assignment of an existing journal. */
  mayExit(): boolean {
    return mayExit(this.state(), this.member.key);
  }

  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.round()
      .catch((e: unknown) => this.log.warn('allocation round failed', { err: (e as Error).message }))
      .finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          setTimeout(() => this.kick(), 10);
        }
      });
  }

  private async round(): Promise<void> {
    if (!this.member.registered || !this.view.get(this.member.key)) return;
    const state = this.state();
    if (!isLeader(state, this.member.key)) return;
    const hash = networkHash(state);
    if (this.desired?.hash !== hash) this.desired = { hash, desired: solveDesired(state) };
    const plan = planRound(state, this.desired.desired, journalIsConsistent as never, { localKey: this.member.key });
    for (const t of plan.txns) {
      const k = toKeyspaceTxn(t);
      const r = await this.ks.txn({
        compare: k.compares.map((c) => ({ key: c.key, target: c.target, result: c.result, value: c.value })),
        success: k.ops.map((o) =>
          'delete' in o ? { delete: o.delete } : { put: o.put, value: Buffer.from(o.value), ...(o.lease !== undefined ? { lease: o.lease } : {}) },
        ),
      });
      if (!r.succeeded) {
        this.log.debug('allocation txn compares failed; waiting for the next change');
        return;
      }
    }
    if (plan.changes.length > 0) {
      this.log.info('allocation round', { changes: plan.changes.length, txns: plan.txns.length });
    }
  }
}
