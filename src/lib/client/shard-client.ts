// ShardClient: a retrying client of the consumer.Shard service. All RPCs are unary and go
// through the shared call path (see call.ts). List/Apply/GetHints/Unassign go to the configured
// address; Stat goes to the shard's primary when the route cache knows it.
import type { LabelSelector } from '../protocol/gen/broker/protocol.js';
import {
  ShardService,
  Status,
  type ApplyRequest_Change,
  type ApplyResponse,
  type GetHintsResponse,
  type ListResponse,
  type StatResponse,
  type UnassignResponse,
} from '../protocol/gen/consumer/protocol.js';
import { decodeShardListResponse, decodeShardSummaries, type ShardSummaryList } from '../protocol/fast-decode.js';
import { applyInBatches, type ApplyOptions, type ApplyResult } from './apply.js';
import { shardPlanSubject } from './plan.js';
import { ConsumerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { claimsFor } from './auth.js';
import { ServiceClient, type CallDefaults } from './call.js';
import type { ConnectionPool, ServiceConfig } from './dial.js';
import { isTransientConsumerStatus } from './retry.js';
import { unaryCall, type CallOptions } from './rpc.js';

export interface ShardClientOptions extends CallDefaults {
  pool?: ConnectionPool;
  /** Overrides the backoff schedule (tests); same as `retry.delay`. */
  delay?: (attempt: number) => number;
}

/** Go's gazctl bounds `shards unassign` by 10 s. */
export const UNASSIGN_TIMEOUT_MS = 10_000;

const NO_EXTENSION = Buffer.alloc(0);

export class ShardClient extends ServiceClient {
  constructor(config: ServiceConfig, opts: ShardClientOptions = {}) {
    const { pool, delay, ...defaults } = opts;
    super(config, 'consumer', pool, delay ? { ...defaults, retry: { delay, ...defaults.retry } } : defaults);
  }

  private call<T>(op: string, opts: CallOptions, fn: (deadline: number | undefined) => Promise<T>, more?: (err: unknown) => boolean): Promise<T> {
    return this.invoke(op, opts, (deadline) => fn(deadline), { more });
  }

  /** Lists shards matching `selector`. */
  async list(selector: LabelSelector, opts: CallOptions = {}): Promise<ListResponse> {
    const res = await this.unary<ListResponse>(
      {
        op: 'listing shards',
        claims: claimsFor.shardList(selector),
        // The response (every listed shard in one message) goes through the hand-written decoder.
        start: (d, md, o, cb) =>
          this.pool
            .shard(d.endpoint)
            .makeUnaryRequest(ShardService.list.path, ShardService.list.requestSerialize, decodeShardListResponse, { selector, extension: NO_EXTENSION }, md, o, (err, res) =>
              cb(err, res as ListResponse),
            ),
        status: (r) => ({ status: r.status, header: r.header }),
        statusError: (st) => new ConsumerStatusError(st, 'listing shards'),
      },
      opts,
    );
    for (const s of res.shards) if (s.spec) this.noteRoute(s.spec.id, s.route);
    return res;
  }

  /**
   * Lists shards matching `selector` as a table shows them: each spec keeps only its ID, disable,
   * hot standbys and (with `labels`) its labels; routes, statuses and revisions are complete. The
   * rest of each spec is not decoded, which makes a listing of many shards much cheaper.
   */
  async listSummaries(selector: LabelSelector, view: { labels: boolean }, opts: CallOptions = {}): Promise<ShardSummaryList> {
    const labels = view.labels;
    const res = await this.unary<ShardSummaryList>(
      {
        op: 'listing shards',
        claims: claimsFor.shardList(selector),
        start: (d, md, o, cb) =>
          this.pool
            .shard(d.endpoint)
            .makeUnaryRequest(ShardService.list.path, ShardService.list.requestSerialize, (b: Buffer) => decodeShardSummaries(b, labels), { selector, extension: NO_EXTENSION }, md, o, (err, res) =>
              cb(err, res as ShardSummaryList),
            ),
        status: (r) => ({ status: r.status, header: r.header }),
        statusError: (st) => new ConsumerStatusError(st, 'listing shards'),
      },
      opts,
    );
    for (const s of res.shards) if (s.spec) this.noteRoute(s.spec.id, s.route);
    return res;
  }

  /**
   * Stats a shard at its primary, optionally waiting until `readThrough` offsets are processed.
   * NO_SHARD_PRIMARY is retried like an unreachable consumer.
   */
  stat(shard: string, opts: CallOptions & { readThrough?: Record<string, bigint> } = {}): Promise<StatResponse> {
    return this.unary<StatResponse>(
      {
        op: `stat of shard ${shard}`,
        claims: claimsFor.shardStat(shard),
        route: { item: shard, primary: true },
        start: (d, md, o, cb) =>
          this.pool.shard(d.endpoint).stat({ header: undefined, shard, read_through: opts.readThrough ?? {}, extension: NO_EXTENSION }, md, o, cb),
        status: (r) => ({ status: r.status, header: r.header }),
        statusError: (st) => new ConsumerStatusError(st, `stat of shard ${shard}`),
        retryStatus: (st) => isTransientConsumerStatus(st),
      },
      opts,
    );
  }

  /**
   * Applies `changes` in batches of `maxTxnSize` (0 or absent: one request), in order, with up
   * to `parallel` (default 1) in flight at once; the first failing batch stops the run with an
   * ApplyError once those in flight have answered. Batches that name the same shard are never in
   * flight together. Returns the highest etcd revision, the number of batches and the last
   * batch's response.
   */
  async apply(changes: ApplyRequest_Change[], opts: CallOptions & ApplyOptions = {}): Promise<ApplyResult<ApplyResponse>> {
    return applyInBatches(
      changes,
      (batch) =>
        this.call('applying shard specs', opts, (deadline) =>
          unaryCall<ApplyResponse>(
            (md, o, cb) => this.pool.shard().apply({ changes: batch, extension: Buffer.alloc(0) }, md, o, cb),
            this.pool.metadata(claimsFor.shardApply()),
            { signal: opts.signal, deadline },
          ),
        ),
      { what: 'applying shard specs', statusError: (status, context) => new ConsumerStatusError(status, context), itemName: shardPlanSubject.changeName },
      opts,
    );
  }

  /**
   * Fetches a shard's recovery hints. `primary_hints.hints` and each `backup_hints[i].hints` are
   * undefined where no hints are stored (absent), which is distinct from stored empty hints.
   */
  getHints(shard: string, opts: CallOptions = {}): Promise<GetHintsResponse> {
    return this.unary<GetHintsResponse>(
      {
        op: `fetching hints of shard ${shard}`,
        claims: claimsFor.shardGetHints(shard),
        start: (d, md, o, cb) => this.pool.shard(d.endpoint).getHints({ shard, extension: NO_EXTENSION }, md, o, cb),
        status: (r) => ({ status: r.status, header: r.header }),
        statusError: (st) => new ConsumerStatusError(st, `fetching hints of shard ${shard}`),
      },
      opts,
    );
  }

  /**
   * Removes failed (and, unless `onlyFailed`, primary) assignments of `shards` in one request
   * (one etcd transaction); with `dryRun` the consumer only works out which shards it would
   * change. Bounded by 10 s unless `timeoutMs` says otherwise. Sent once, never retried: a retry
   * after a lost answer could remove an assignment the allocator made meanwhile.
   */
  unassign(shards: string[], opts: CallOptions & { onlyFailed?: boolean; dryRun?: boolean } = {}): Promise<UnassignResponse> {
    const { onlyFailed, dryRun, ...call } = opts;
    return this.unary<UnassignResponse>(
      {
        op: 'unassigning shards',
        claims: claimsFor.shardUnassign(shards),
        start: (d, md, o, cb) => this.pool.shard(d.endpoint).unassign({ shards, only_failed: onlyFailed ?? false, dry_run: dryRun ?? false }, md, o, cb),
        status: (r) => ({ status: r.status }),
        statusError: (st) => new ConsumerStatusError(st, 'unassigning shards'),
        maxAttempts: 1,
      },
      { ...call, timeoutMs: call.timeoutMs ?? UNASSIGN_TIMEOUT_MS },
    );
  }

  /**
   * Unassigns `shards` in requests of at most `batchSize` (default 100) ids, one after another,
   * all of them within one time bound (`timeoutMs`, default 10 s as Go's gazctl). Returns the ids
   * the consumer reported as changed (or, with `dryRun`, as it would change), in answer order. A
   * failing request stops the run with an UnassignError that says which ids were done before it.
   */
  async unassignInBatches(
    shards: readonly string[],
    opts: CallOptions & { onlyFailed?: boolean; dryRun?: boolean; batchSize?: number; onBatch?: (b: UnassignBatch) => void } = {},
  ): Promise<UnassignResult> {
    const { batchSize = UNASSIGN_BATCH_SIZE, onBatch, ...call } = opts;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, got ${batchSize}`);
    const budget = call.timeoutMs ?? UNASSIGN_TIMEOUT_MS;
    const deadline = budget > 0 ? Date.now() + budget : undefined;
    const batches = Math.ceil(shards.length / batchSize);
    const changed: string[] = [];
    for (let b = 0; b < batches; b++) {
      const ids = shards.slice(b * batchSize, (b + 1) * batchSize);
      try {
        const left = deadline === undefined ? 0 : deadline - Date.now();
        if (deadline !== undefined && left <= 0) throw new GazctlError(`unassigning shards: the ${budget} ms bound ran out before batch ${b + 1} of ${batches}`);
        const res = await this.unassign(ids, { ...call, timeoutMs: deadline === undefined ? 0 : left });
        changed.push(...res.shards);
        onBatch?.({ index: b, batches, requested: ids, changed: res.shards });
      } catch (err) {
        throw new UnassignError(b, batches, ids, changed, err);
      }
    }
    return { changed, batches };
  }
}

/** Shard ids per Unassign request in unassignInBatches, as Go's gazctl sends them. */
export const UNASSIGN_BATCH_SIZE = 100;

/** One answered Unassign request of unassignInBatches. */
export interface UnassignBatch {
  /** 0-based */
  index: number;
  batches: number;
  requested: string[];
  changed: string[];
}

export interface UnassignResult {
  /** Ids the consumer changed (or, in a dry run, would change). */
  changed: string[];
  batches: number;
}

/** A failed Unassign request of unassignInBatches; the earlier requests took effect. */
export class UnassignError extends GazctlError {
  constructor(
    /** 0-based index of the failed request. */
    readonly batchIndex: number,
    readonly batches: number,
    /** The ids of the failed request. */
    readonly requested: readonly string[],
    /** Ids changed by the requests before it. */
    readonly changed: readonly string[],
    cause: unknown,
  ) {
    const why = cause instanceof Error ? cause.message : String(cause);
    const before = batchIndex === 0 ? '' : `; the ${batchIndex} batch${batchIndex === 1 ? '' : 'es'} before it changed ${changed.length} shard${changed.length === 1 ? '' : 's'}`;
    super(`${why} (batch ${batchIndex + 1} of ${batches}, ${requested.length} shard${requested.length === 1 ? '' : 's'}${before})`, { cause });
  }
}
