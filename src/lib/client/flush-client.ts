// FlushClient: the client of our on-demand flush service (gazctl.flush.Flush), which has a
// journal's primary close its spool now and answers once the closed fragment is stored. The
// service is an addition of our brokers; upstream brokers do not have it and answer gRPC
// UNIMPLEMENTED, which becomes a FlushUnsupportedError. Calls go through the shared call path
// (call.ts): route cache, retries of UNAVAILABLE and of routing statuses.
import { credentials, status as GrpcStatus, type Channel } from '@grpc/grpc-js';
import { Status, type Fragment } from '../protocol/gen/broker/protocol.js';
import { FlushClient as GenFlushClient, type FlushResponse } from '../protocol/gen/gazctl/flush.js';
import { BrokerStatusError, GazctlError } from '../protocol/errors.js';
import { claimsFor } from './auth.js';
import { ServiceClient, type CallDefaults } from './call.js';
import type { ConnectionPool, ServiceConfig } from './dial.js';
import { grpcCode, isTransientBrokerStatus } from './retry.js';
import type { CallOptions } from './rpc.js';

export interface FlushClientOptions extends CallDefaults {
  /** Share connections with other clients (e.g. a JournalClient's `pool`). */
  pool?: ConnectionPool;
  /** Overrides the backoff schedule (tests); same as `retry.delay`. */
  delay?: (attempt: number) => number;
}

/** The broker does not serve the flush service (an upstream broker, or one of ours predating it). */
export class FlushUnsupportedError extends GazctlError {
  constructor(
    readonly journal: string,
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`flushing ${journal}: the broker lacks on-demand flush (${detail}); set the journals' fragment.flush_interval to have spools persisted on a schedule instead`, options);
  }
}

/** What a flush did. */
export interface FlushResult {
  journal: string;
  /** Whether the flush closed a spool with content (false: the spool was empty). */
  rolled: boolean;
  /**
   * With `rolled`, the fragment closed and stored (backing_store and mod_time set; backing_store
   * empty when the journal has no store). Otherwise the last fragment the primary knows to be
   * stored, if any.
   */
  fragment: Fragment | undefined;
  /** The write head when the spool was closed: every byte before it is in the store. */
  writeHead: bigint;
}

/** Statuses of a refused flush worth retrying: routing churn. */
function retryable(st: Status): boolean {
  return isTransientBrokerStatus(st);
}

export class FlushClient extends ServiceClient {
  private readonly stubs = new WeakMap<Channel, GenFlushClient>();

  constructor(config: ServiceConfig, opts: FlushClientOptions = {}) {
    const { pool, delay, ...defaults } = opts;
    super(config, 'broker', pool, delay ? { ...defaults, retry: { delay, ...defaults.retry } } : defaults);
  }

  /** The generated stub for `endpoint`, on the pool's channel to it. */
  private stub(endpoint: string | undefined): GenFlushClient {
    const channel = this.pool.journal(endpoint).getChannel() as Channel;
    let s = this.stubs.get(channel);
    if (!s) {
      s = new GenFlushClient('unused', credentials.createInsecure(), { channelOverride: channel });
      this.stubs.set(channel, s);
    }
    return s;
  }

  /**
   * Has the primary of `journal` close its spool and store it; resolves once the fragment is in
   * the journal's store. Throws FlushUnsupportedError when the broker has no flush service,
   * BrokerStatusError for a refusing status (after retrying routing statuses), and the call
   * path's TransportError otherwise.
   */
  async flush(journal: string, opts: CallOptions = {}): Promise<FlushResult> {
    let res: FlushResponse;
    try {
      res = await this.unary<FlushResponse>(
        {
          op: `flushing ${journal}`,
          // Closing a spool changes what the journal's fragments are: an append-level right.
          claims: claimsFor.journalAppend(journal),
          route: { item: journal, primary: true },
          start: (d, md, o, cb) => this.stub(d.endpoint).flush({ header: undefined, journal, do_not_proxy: d.direct, min_etcd_revision: 0n }, md, o, cb),
          status: (r) => ({ status: r.status, header: r.header }),
          statusError: (st) => new BrokerStatusError(st, `flushing ${journal}`),
          retryStatus: retryable,
        },
        opts,
      );
    } catch (e) {
      if (grpcCode(e) === GrpcStatus.UNIMPLEMENTED) {
        throw new FlushUnsupportedError(journal, 'gRPC UNIMPLEMENTED for gazctl.flush.Flush', { cause: e });
      }
      throw e;
    }
    return { journal, rolled: res.rolled, fragment: res.fragment, writeHead: res.write_head };
  }
}
