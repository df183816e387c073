// One journal as held by this broker (as primary or replica), on the shared fragment layer
// (src/core/fragment): its spool (staged and committed content in an unlinked spool file), its
// fragment index (committed spool content, and what the stores hold, refreshed every
// refresh_interval), and the persisting of the spools it closes.
//
// Every replica persists what it closes; fragment names are content-addressed, so the copies
// of several replicas land on one object, and a persisted fragment replaces the local one in
// the index at once.

import { AppendFlowControl } from './flow-control.js';
import { Status, type Fragment, type JournalSpec } from '../../lib/protocol/gen/broker/protocol.js';
import { durationToNanos } from '../../lib/protocol/duration.js';
import { zeroSum } from '../../lib/protocol/fragment.js';
import type { FragmentStore } from '../../lib/stores/index.js';
import { FragmentIndex, StrayObjects, runIndexRefresh, walkAllStoresTracked } from '../fragment/fragment-index.js';
import type { Persister } from '../fragment/persister.js';
import { nextProposal, Spool, type LocalFragment } from '../fragment/spool.js';
import type { Logger } from '../log.js';
import type { Pipeline } from './pipeline.js';

/**
 * Content bytes an Append or Replicate stream may have queued for spool writes (deferred to the
 * loop's check phase) before it reads no more until they are done.
 */
export const SPOOL_WRITES_BEHIND_BYTES = 4 << 20;

export interface ReplicaDeps {
  /** Opens (and caches) a store by URL. */
  openStore: (url: string) => FragmentStore;
  persister: Persister;
  /** Directory of spool files. */
  spoolDir?: string;
  /** --broker.file-only: every journal's fragments go to the file:// store. */
  fileOnly: boolean;
  log: Logger;
  onPersisted?: (f: Fragment) => void;
}

export class Replica {
  readonly spool: Spool;
  /** Append flow control of the journal, kept across its Append RPCs (credit carries over). */
  readonly flow = new AppendFlowControl();
  readonly index: FragmentIndex;
  spec: JournalSpec;
  /** The replication pipeline, while this broker is the journal's primary. */
  pipeline: Pipeline | undefined;
  /** Closed spools not yet in a store. */
  private unpersisted = 0;
  /** Serialises appends (and pipeline changes) on this journal. */
  private tail: Promise<void> = Promise.resolve();
  private readonly stop = new AbortController();
  private lastRefresh = 0;
  private refreshing: Promise<void> | undefined;
  /** Each closed spool's persisting, settled once it is in a store and in the index (flush waits on it). */
  private readonly persisting = new WeakMap<LocalFragment, Promise<Fragment | undefined>>();
  /** Persisting not settled yet, of every spool this replica closed. */
  private readonly inFlight = new Set<Promise<Fragment | undefined>>();
  /** Objects under the journal's prefix that are not fragments: skipped, each warned about once. */
  private readonly strays: StrayObjects;

  constructor(
    spec: JournalSpec,
    private readonly deps: ReplicaDeps,
  ) {
    this.spec = spec;
    this.index = new FragmentIndex(spec.name, { openStore: deps.openStore });
    this.strays = new StrayObjects((o) =>
      deps.log.warn('skipping an object that is not a fragment', { journal: spec.name, store: o.store, path: o.path, reason: o.reason }),
    );
    this.spool = new Spool(spec.name, {
      ...(deps.spoolDir ? { dir: deps.spoolDir } : {}),
      // Content writes are deferred and batched; Append and Replicate await spool.settled()
      // before they commit.
      asyncWrites: true,
      observer: {
        onCommit: (lf) => this.index.spoolCommit(lf),
        onComplete: (lf) => this.persist(lf),
      },
    });
    void runIndexRefresh(this.index, {
      spec: () => ({ stores: this.stores(), refreshIntervalMs: this.refreshIntervalMs() }),
      open: deps.openStore,
      signal: this.stop.signal,
      strays: this.strays,
      onError: (e) => deps.log.warn('listing fragment stores failed', { journal: spec.name, err: (e as Error).message }),
    });
  }

  get name(): string {
    return this.spec.name;
  }

  /** Resolves after the first store listing (appends and reads wait for it). */
  get loaded(): Promise<void> {
    return this.index.firstRefresh;
  }

  /** The spec as the fragment layer should see it (stores replaced under --broker.file-only). */
  effectiveSpec(): JournalSpec {
    if (!this.deps.fileOnly || !this.spec.fragment) return this.spec;
    return { ...this.spec, fragment: { ...this.spec.fragment, stores: ['file:///'] } };
  }

  private stores(): string[] {
    return this.effectiveSpec().fragment?.stores ?? [];
  }

  private refreshIntervalMs(): number {
    return Number(durationToNanos(this.spec.fragment?.refresh_interval) / 1_000_000n);
  }

  updateSpec(spec: JournalSpec): void {
    this.spec = spec;
  }

  /** Run `fn` with the journal's append lock held. */
  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** End of the index (the stores' fragments and committed spool content) or the spool's. */
  get indexEnd(): bigint {
    const e = this.index.endOffset();
    return e > this.spool.end ? e : this.spool.end;
  }

  get indexBegin(): bigint {
    const s = this.index.summary();
    return s.begin === s.end ? this.spool.begin : s.begin;
  }

  /** Whether the index is "in use": its last fragment is local or was persisted within `windowSec`. */
  indexDirty(windowSec: bigint): boolean {
    const s = this.index.summary();
    const now = BigInt(Math.floor(Date.now() / 1000));
    return s.modTime === 0n || s.modTime > now - windowSec;
  }

  /** Closed spools still waiting for a store. */
  get pendingPersists(): number {
    return this.unpersisted;
  }

  /** The primary's next proposal: the spool as it is, or a roll (length, codec, flush interval, offset). */
  proposal(rollToOffset?: bigint): Fragment {
    const spec = this.spec.fragment;
    if (!spec) return this.spool.fragment;
    return nextProposal(this.spool, spec, rollToOffset !== undefined && rollToOffset !== this.spool.end ? { rollToOffset } : {});
  }

  /**
   * The primary's proposal for an on-demand flush: an empty fragment at the spool's end (with
   * the spec's codec) when the spool holds content, else the spool's own fragment or the roll
   * the spec asks for anyway (a codec change).
   */
  flushProposal(): Fragment {
    const spec = this.spec.fragment;
    if (!spec) {
      const f = this.spool.fragment;
      return f.begin === f.end ? f : { ...f, begin: f.end, sum: zeroSum() };
    }
    return nextProposal(this.spool, spec, { flush: true });
  }

  /**
   * Settles when the closed spool `lf` is in a store and in the index: with the stored fragment,
   * or undefined when the journal has no store (or `lf` was never handed to the persister).
   * Rejects when persisting fails for good (a bad path template, or the journal left).
   */
  persisted(lf: LocalFragment): Promise<Fragment | undefined> {
    return this.persisting.get(lf) ?? Promise.resolve(undefined);
  }

  /**
   * Settles when every spool closed so far is stored (or failed for good: then it rejects with
   * the first failure).
   */
  async allPersisted(): Promise<void> {
    const out = await Promise.allSettled([...this.inFlight]);
    const bad = out.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (bad) throw bad.reason;
  }

  /** The last fragment of the index that is in a store, if any. */
  lastPersisted(): Fragment | undefined {
    const all = this.index.fragments();
    for (let i = all.length - 1; i >= 0; i--) if (all[i]!.backing_store !== '') return all[i];
    return undefined;
  }

  private persist(lf: LocalFragment): void {
    this.unpersisted++;
    const done = this.deps.persister.persist(lf, this.effectiveSpec(), { signal: this.stop.signal }).then((f) => {
      if (f) {
        this.index.addRemote(f);
        this.deps.onPersisted?.(f);
      }
      return f;
    });
    this.persisting.set(lf, done);
    this.inFlight.add(done);
    done
      .catch((e: unknown) => {
        if (!this.stop.signal.aborted) this.deps.log.warn('persisting a fragment failed', { journal: this.name, err: (e as Error).message });
      })
      .finally(() => {
        this.unpersisted--;
        this.inFlight.delete(done);
      });
  }

  /**
   * List the stores into the index now, unless that was done in the last second: for a reader
   * whose offset falls before the spool with nothing indexed there (a replica that joined late
   * has not yet listed what the others persisted).
   */
  refreshSoon(): Promise<void> {
    if (this.refreshing) return this.refreshing;
    if (Date.now() - this.lastRefresh < 1000) return Promise.resolve();
    this.lastRefresh = Date.now();
    this.refreshing = walkAllStoresTracked(this.name, this.stores(), this.deps.openStore, this.strays, this.stop.signal)
      .then((set) => this.index.replaceRemote(set))
      .catch((e: unknown) => this.deps.log.warn('listing fragment stores failed', { journal: this.name, err: (e as Error).message }))
      .finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /**
   * List the stores (at most once a second, as {@link refreshSoon}) until the index covers
   * `offset`, for up to `forMs`. For a primary that rolled forward over content only its replicas
   * had committed (see ensurePipeline): that content is readable here once the spools they
   * persisted are listed, and readers blocked at `offset` should not wait for the journal's
   * refresh interval (30 s in the tests, 5 min by default) to get it.
   */
  async refreshUntilCovered(offset: bigint, forMs = 60_000): Promise<boolean> {
    const deadline = Date.now() + forMs;
    while (!this.stop.signal.aborted && Date.now() < deadline) {
      const q = await this.index.query({ offset, block: false }).catch(() => undefined);
      if (!q) return false;
      if (q.status === Status.OK && q.offset === offset) return true;
      await new Promise((r) => setTimeout(r, 1000).unref());
      await this.refreshSoon();
    }
    return false;
  }

  /** Whether the spool roll of `p` would be accepted by the spool (a status of applyProposal). */
  apply(p: Fragment, registers = this.spool.registers): Status {
    return this.spool.applyProposal(p, registers).status;
  }

  close(): void {
    this.stop.abort();
    this.index.close();
  }
}
