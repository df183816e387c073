// The one call path every client RPC goes through: call options merged over the client's
// defaults, authorization claims, dispatch (route cache and do_not_proxy), the retry loop, and
// the check of the response status (learning or forgetting routes on the way).
import type { CallOptions as GrpcCallOptions, ClientUnaryCall, Metadata, ServiceError } from '@grpc/grpc-js';
import type { Header, Route } from '../protocol/gen/broker/protocol.js';
import type { Claims } from './auth.js';
import { ConnectionPool, type ServiceConfig } from './dial.js';
import { pickEndpoint, RouteCache } from './route-cache.js';
import { retryCall, unaryCall, type CallOptions } from './rpc.js';

/** Options a client applies to every call unless the call says otherwise. */
export type CallDefaults = CallOptions;

/** Per-call options over the client's defaults: the call's values win; either signal aborts. */
export function mergeCallOptions(defaults: CallDefaults, call: CallOptions = {}): CallOptions {
  const signals = [defaults.signal, call.signal].filter((s): s is AbortSignal => s !== undefined);
  const timeoutMs = call.timeoutMs !== undefined ? call.timeoutMs : defaults.timeoutMs;
  return {
    signal: signals.length > 1 ? AbortSignal.any(signals) : signals[0],
    // 0 means no time limit, as for the CLI's --timeout.
    timeoutMs: timeoutMs !== undefined && timeoutMs > 0 ? timeoutMs : undefined,
    retry: { ...defaults.retry, ...call.retry },
    onRetry: call.onRetry ?? defaults.onRetry,
  };
}

/** Where an RPC goes: a route member (`direct`, so the broker must not proxy) or the service address. */
export interface Dispatch {
  endpoint: string | undefined;
  direct: boolean;
}

/** One unary RPC for {@link ServiceClient.unary}. */
export interface UnarySpec<Res> {
  op: string;
  claims: Claims;
  /** The routed item (journal or shard) and whether the RPC needs its primary. */
  route?: { item: string; primary: boolean };
  start(d: Dispatch, md: Metadata, opts: Partial<GrpcCallOptions>, cb: (err: ServiceError | null, res: Res) => void): ClientUnaryCall;
  /** Status and header of a response; absent for RPCs without a status field. */
  status?(res: Res): { status: number; header?: Header };
  /** Statuses resolved with the response (default: only 0, OK). */
  accept?(status: number): boolean;
  /** The error a refused status becomes. */
  statusError?(status: number, res: Res): Error;
  /** Refused statuses worth retrying (routing churn). */
  retryStatus?(status: number): boolean;
  /** Give up after this many attempts (the fail-fast RPCs). */
  maxAttempts?: number;
}

class StatusRefusal extends Error {
  constructor(readonly error: Error, readonly retryable: boolean) {
    super(error.message);
  }
}

/** Shared machinery of JournalClient and ShardClient. */
export abstract class ServiceClient {
  readonly pool: ConnectionPool;
  readonly routes: RouteCache | undefined;
  private readonly ownsPool: boolean;

  constructor(
    readonly config: ServiceConfig,
    /** Who the service is in messages: `broker` or `consumer`. */
    private readonly kind: string,
    pool: ConnectionPool | undefined,
    readonly defaults: CallDefaults,
  ) {
    this.ownsPool = !pool;
    this.pool = pool ?? new ConnectionPool(config);
    this.routes = config.cacheSize && config.cacheSize > 0 ? new RouteCache(config.cacheSize, config.cacheTTLms ?? 60_000) : undefined;
  }

  /** The configured service address. */
  get address(): string {
    return this.config.address;
  }

  /** Closes the connections (when this client created its pool). */
  close(): void {
    if (this.ownsPool) this.pool.close();
  }

  /** The options of one call: `opts` over the client's defaults. */
  callOptions(opts?: CallOptions): CallOptions {
    return mergeCallOptions(this.defaults, opts);
  }

  /** @internal Endpoint for an RPC about `item`, or undefined for the service address. */
  endpointFor(item: string, primary: boolean): string | undefined {
    if (!this.routes) return undefined;
    return pickEndpoint(this.routes.get(item), { primary, zone: this.config.zone, state: (ep) => this.pool.state(ep) });
  }

  /** @internal Where an RPC about `item` goes. */
  dispatch(item: string | undefined, primary: boolean): Dispatch {
    const endpoint = item !== undefined ? this.endpointFor(item, primary) : undefined;
    return { endpoint, direct: endpoint !== undefined };
  }

  /** @internal */
  noteRoute(item: string, route: Route | undefined): void {
    if (this.routes && route && route.members.length > 0) this.routes.set(item, route);
  }

  /** @internal */
  forgetRoute(item: string): void {
    this.routes?.delete(item);
  }

  /**
   * Runs `attempt` under the retry policy: gRPC UNAVAILABLE (and what `more` accepts) is retried
   * on the backoff schedule until the call's time budget or attempts run out or it is aborted.
   */
  protected invoke<T>(
    op: string,
    opts: CallOptions | undefined,
    attempt: (deadline: number | undefined, signal: AbortSignal | undefined) => Promise<T>,
    extra: { more?: (err: unknown) => boolean; maxAttempts?: number } = {},
  ): Promise<T> {
    const o = this.callOptions(opts);
    return retryCall(`${this.kind} ${this.address}`, op, o, (deadline) => attempt(deadline, o.signal), {
      more: extra.more,
      maxAttempts: o.retry?.maxAttempts ?? extra.maxAttempts,
      delay: o.retry?.delay,
      onRetry: o.onRetry,
    });
  }

  /** A unary RPC through the call path. */
  protected async unary<Res>(spec: UnarySpec<Res>, opts?: CallOptions): Promise<Res> {
    const accept = spec.accept ?? ((s: number) => s === 0);
    try {
      return await this.invoke(
        spec.op,
        opts,
        async (deadline, signal) => {
          const d = this.dispatch(spec.route?.item, spec.route?.primary ?? false);
          const res = await unaryCall<Res>((md, o, cb) => spec.start(d, md, o, cb), this.pool.metadata(spec.claims), { signal, deadline }).catch(
            (err: unknown) => {
              if (d.direct && spec.route) this.forgetRoute(spec.route.item);
              throw err;
            },
          );
          const st = spec.status?.(res);
          if (st && spec.route && st.header?.route?.members.length) this.noteRoute(spec.route.item, st.header.route);
          if (st && !accept(st.status)) {
            if (spec.route && !st.header?.route?.members.length) this.forgetRoute(spec.route.item);
            const error = spec.statusError ? spec.statusError(st.status, res) : new Error(`${spec.op}: status ${st.status}`);
            throw new StatusRefusal(error, spec.retryStatus?.(st.status) ?? false);
          }
          return res;
        },
        { more: (e) => e instanceof StatusRefusal && e.retryable, maxAttempts: spec.maxAttempts },
      );
    } catch (err) {
      if (err instanceof StatusRefusal) throw err.error;
      throw err;
    }
  }
}
