// The one allocation loop of the core, shared by brokers and consumers (as upstream, whose
// brokers and consumers run the same allocator over the same keyspace layout). Whenever the view
// changes and this member is the allocating one (the member key with the lowest create
// revision), run one round — solve for the desired assignments, plan the safe changes — and
// execute its transactions through the keyspace. A failed compare only means etcd moved on; the
// next change of the view starts the next round.
//
// What differs between a broker and a consumer is only how keys are decoded (JournalSpec or
// ShardSpec items, BrokerSpec or ConsumerSpec members, Route or ReplicaStatus assignment values)
// and the consistency rule (journalIsConsistent, shardIsConsistent): both are parameters.

import type { Keyspace } from '../../lib/keyspace/index.js';
import type { KeyspaceView } from '../keyspace-view.js';
import type { Logger } from '../log.js';
import type { Membership } from '../membership.js';
import { planRound, toKeyspaceTxn, type IsConsistent } from './plan.js';
import { networkHash, solveDesired, type DesiredAssignments } from './solve.js';
import { buildState, isLeader, mayExit, type AllocState, type Decoders, type ItemValue, type MemberValue } from './state.js';

/** What makes the loop a broker's or a consumer's. */
export interface AllocationRules<I extends ItemValue, M extends MemberValue, A> {
  decoders: Decoders<I, M, A>;
  isConsistent: IsConsistent<A>;
}

export class AllocationLoop<I extends ItemValue = ItemValue, M extends MemberValue = MemberValue, A = unknown> {
  private running = false;
  private again = false;
  private stopped = false;
  private desired: { hash: string; desired: DesiredAssignments } | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly view: KeyspaceView,
    private readonly ks: Keyspace,
    private readonly member: Membership,
    private readonly rules: AllocationRules<I, M, A>,
    private readonly log: Logger,
    /** Called after each round this member ran as leader (metrics). */
    private readonly onRound: (changes: number) => void = () => undefined,
  ) {}

  start(): void {
    this.unsubscribe = this.view.onChange(() => this.kick());
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
  }

  state(): AllocState<I, M, A> {
    return buildState(this.view.root, this.view.rawKvs(), this.rules.decoders);
  }

  /** Whether this member is exiting and holds no assignment of an existing item. */
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
    const plan = planRound(state, this.desired.desired, this.rules.isConsistent, { localKey: this.member.key });
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
    this.onRound(plan.changes.length);
    if (plan.changes.length > 0) {
      this.log.info('allocation round', { changes: plan.changes.length, txns: plan.txns.length });
    }
  }
}
