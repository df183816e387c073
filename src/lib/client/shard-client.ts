// ShardClient: a retrying client of the consumer.Shard service. All RPCs are
// unary. List/Apply/GetHints/Unassign go to the configured address; Stat goes to the shard's
// primary when the route cache knows it.
import type { LabelSelector, Route } from '../protocol/gen/broker/protocol.js';
import {
  Status,
  type ApplyRequest_Change,
  type ApplyResponse,
  type GetHintsResponse,
  type ListResponse,
  type StatResponse,
  type UnassignResponse,
} from '../protocol/gen/consumer/protocol.js';
import { applyInBatches, type ApplyOptions, type ApplyResult } from './apply.js';
import { ConsumerStatusError, TransportError } from '../protocol/errors.js';
import { claimsFor } from './auth.js';
import { ConnectionPool, type ServiceConfig } from './dial.js';
import { isTransientConsumerStatus } from './retry.js';
import { pickEndpoint, RouteCache } from './route-cache.js';
import { retryCall, unaryCall, type CallOptions, type RetryHook } from './rpc.js';

export interface ShardClientOptions {
  pool?: ConnectionPool;
  onRetry?: RetryHook;
  /** Overrides the backoff schedule (tests). */
  delay?: (attempt: number) => number;
}

/** Go's gazctl bounds `shards unassign` by 10 s. */
export const UNASSIGN_TIMEOUT_MS = 10_000;

export class ShardClient {
  readonly pool: ConnectionPool;
  readonly routes: RouteCache | undefined;
  private readonly ownsPool: boolean;

  constructor(
    readonly config: ServiceConfig,
    private readonly opts: ShardClientOptions = {},
  ) {
    this.ownsPool = !opts.pool;
    this.pool = opts.pool ?? new ConnectionPool(config);
    this.routes = config.cacheSize && config.cacheSize > 0 ? new RouteCache(config.cacheSize, config.cacheTTLms ?? 60_000) : undefined;
  }

  get address(): string {
    return this.config.address;
  }

  close(): void {
    if (this.ownsPool) this.pool.close();
  }

  private noteRoute(shard: string, route: Route | undefined): void {
    if (this.routes && route && route.members.length > 0) this.routes.set(shard, route);
  }

  private call<T>(op: string, opts: CallOptions, fn: (deadline: number | undefined) => Promise<T>, more?: (err: unknown) => boolean): Promise<T> {
    return retryCall(`consumer ${this.address}`, op, opts, fn, { more, delay: this.opts.delay, onRetry: this.opts.onRetry });
  }

  /** Lists shards matching `selector`. */
  async list(selector: LabelSelector, opts: CallOptions = {}): Promise<ListResponse> {
    const res = await this.call('listing shards', opts, (deadline) =>
      unaryCall<ListResponse>(
        (md, o, cb) => this.pool.shard().list({ selector, extension: Buffer.alloc(0) }, md, o, cb),
        this.pool.metadata(claimsFor.shardList(selector)),
        { signal: opts.signal, deadline },
      ),
    );
    if (res.status !== Status.OK) throw new ConsumerStatusError(res.status, 'listing shards');
    for (const s of res.shards) if (s.spec) this.noteRoute(s.spec.id, s.route);
    return res;
  }

  /**
   * Stats a shard at its primary, optionally waiting until `readThrough` offsets are processed.
   * NO_SHARD_PRIMARY is retried like an unreachable consumer.
   */
  async stat(shard: string, opts: CallOptions & { readThrough?: Record<string, bigint> } = {}): Promise<StatResponse> {
    const res = await this.call(
      `stat of shard ${shard}`,
      opts,
      async (deadline) => {
        const endpoint = this.routes ? pickEndpoint(this.routes.get(shard), { primary: true }) : undefined;
        const r = await unaryCall<StatResponse>(
          (md, o, cb) =>
            this.pool
              .shard(endpoint)
              .stat({ header: undefined, shard, read_through: opts.readThrough ?? {}, extension: Buffer.alloc(0) }, md, o, cb),
          this.pool.metadata(claimsFor.shardStat(shard)),
          { signal: opts.signal, deadline },
        ).catch((err: unknown) => {
          if (endpoint !== undefined) this.routes?.delete(shard);
          throw err;
        });
        if (r.header?.route) this.noteRoute(shard, r.header.route);
        if (r.status !== Status.OK) {
          if (endpoint !== undefined) this.routes?.delete(shard);
          throw new ConsumerStatusError(r.status, `stat of shard ${shard}`);
        }
        return r;
      },
      (err) => err instanceof ConsumerStatusError && isTransientConsumerStatus(err.status),
    );
    return res;
  }

  /**
   * Applies `changes` in batches of `maxTxnSize` (0 or absent: one request), sequentially,
   * stopping at the first failing batch with an ApplyError. Returns the final etcd revision, the
   * number of batches and the last batch's response.
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
      { what: 'applying shard specs', statusError: (status, context) => new ConsumerStatusError(status, context) },
      opts,
    );
  }

  /**
   * Fetches a shard's recovery hints. `primary_hints.hints` and each `backup_hints[i].hints` are
   * undefined where no hints are stored (absent), which is distinct from stored empty hints.
   */
  async getHints(shard: string, opts: CallOptions = {}): Promise<GetHintsResponse> {
    const res = await this.call(`fetching hints of shard ${shard}`, opts, (deadline) =>
      unaryCall<GetHintsResponse>(
        (md, o, cb) => this.pool.shard().getHints({ shard, extension: Buffer.alloc(0) }, md, o, cb),
        this.pool.metadata(claimsFor.shardGetHints(shard)),
        { signal: opts.signal, deadline },
      ),
    );
    if (res.status !== Status.OK) throw new ConsumerStatusError(res.status, `fetching hints of shard ${shard}`);
    return res;
  }

  /**
   * Removes failed (and, unless `onlyFailed`, primary) assignments of `shards`. Bounded by 10 s
   * unless `timeoutMs` says otherwise.
   */
  async unassign(
    shards: string[],
    opts: CallOptions & { onlyFailed?: boolean; dryRun?: boolean } = {},
  ): Promise<UnassignResponse> {
    const res = await this.call('unassigning shards', { signal: opts.signal, timeoutMs: opts.timeoutMs ?? UNASSIGN_TIMEOUT_MS }, (deadline) =>
      unaryCall<UnassignResponse>(
        (md, o, cb) =>
          this.pool.shard().unassign({ shards, only_failed: opts.onlyFailed ?? false, dry_run: opts.dryRun ?? false }, md, o, cb),
        this.pool.metadata(claimsFor.shardUnassign(shards)),
        { signal: opts.signal, deadline },
      ),
    );
    if (res.status !== Status.OK) throw new ConsumerStatusError(res.status, 'unassigning shards');
    return res;
  }
}
