// Appends: one client-streaming RPC per append. The first
// message carries the parameters, then content-only messages, then one empty message commits;
// half-closing without it rolls the append back.
import { status as GrpcStatus, type ClientWritableStream, type ServiceError } from '@grpc/grpc-js';
import {
  AppendRequest,
  AppendRequest_Suspend,
  Status,
  type AppendResponse,
  type LabelSelector,
  type LabelSet,
  type Route,
} from '../protocol/gen/broker/protocol.js';
import { BrokerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { abortError, grpcCode, isAbortError, isUnavailable, retry, type RetryOptions } from './retry.js';
import { describeGrpcError, type AppendContent } from './rpc.js';

export interface AppendOptions {
  /** Expected journal write head; 0 (default) lets the broker choose. */
  offset?: bigint;
  suspend?: AppendRequest_Suspend;
  check_registers?: LabelSelector;
  union_registers?: LabelSet;
  subtract_registers?: LabelSet;
  do_not_proxy?: boolean;
  min_etcd_revision?: bigint;
  signal?: AbortSignal;
}

/** What an Appender needs from its client. */
export interface AppendTransport {
  openAppend(
    journal: string,
    cb: (err: ServiceError | null, res?: AppendResponse) => void,
  ): { call: ClientWritableStream<AppendRequest | AppendContent>; direct: boolean };
  noteRoute(journal: string, route: Route | undefined): void;
  forgetRoute(journal: string): void;
}

/** Largest content message sent; bigger writes are split (brokers accept 4 MiB messages; small messages keep what grpc-js queues, up to 16 of them, small). */
export const MAX_APPEND_MESSAGE = 256 * 1024;

/**
 * One append. `write` streams content (waiting when the transport buffer is full), `commit`
 * finishes it atomically, `abort` rolls it back. The RPC starts on the first write or commit.
 */
export class Appender {
  private call: ClientWritableStream<AppendRequest | AppendContent> | undefined;
  private direct = false;
  private response: Promise<AppendResponse> | undefined;
  private failure: unknown;
  /** Rejects the write waiting for 'drain', if any, when the RPC ends early. */
  private waiter: ((err: unknown) => void) | undefined;
  private state: 'idle' | 'open' | 'committing' | 'done' = 'idle';
  /** Bytes written so far. */
  written = 0;
  /** Whether the commit message was handed to the transport (only then can the broker commit). */
  commitSent = false;

  constructor(
    private readonly transport: AppendTransport,
    readonly journal: string,
    private readonly opts: AppendOptions = {},
  ) {}

  private open(): ClientWritableStream<AppendRequest | AppendContent> {
    if (this.call) return this.call;
    if (this.opts.signal?.aborted) throw abortError(this.opts.signal);
    let settle!: { resolve: (r: AppendResponse) => void; reject: (e: unknown) => void };
    this.response = new Promise<AppendResponse>((resolve, reject) => (settle = { resolve, reject }));
    this.response.catch(() => undefined); // observed by commit(); avoid unhandled rejections
    const { call, direct } = this.transport.openAppend(this.journal, (err, res) => {
      if (err || !res) {
        this.failure = err ?? new GazctlError(`appending to ${this.journal}: empty response`);
        if (direct && isUnavailable(err)) this.transport.forgetRoute(this.journal);
        settle.reject(this.failure);
      } else {
        if (res.header?.route) this.transport.noteRoute(this.journal, res.header.route);
        if (this.state === 'open') {
          // The broker answered before the commit: it refused the append.
          this.failure =
            res.status !== Status.OK
              ? new BrokerStatusError(res.status, `appending to ${this.journal}`, res.store_health_error || undefined)
              : new GazctlError(`append to ${this.journal} ended before it was committed`);
        }
        settle.resolve(res);
      }
      this.waiter?.(this.failure);
    });
    this.call = call;
    this.direct = direct;
    this.state = 'open';
    const signal = this.opts.signal;
    if (signal) {
      const onAbort = () => call.cancel();
      signal.addEventListener('abort', onAbort, { once: true });
      void this.response.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => undefined);
    }
    const first: AppendRequest = {
      header: undefined,
      journal: this.journal,
      do_not_proxy: this.opts.do_not_proxy ?? false,
      content: Buffer.alloc(0),
      offset: this.opts.offset ?? 0n,
      check_registers: this.opts.check_registers,
      union_registers: this.opts.union_registers,
      subtract_registers: this.opts.subtract_registers,
      suspend: this.opts.suspend ?? AppendRequest_Suspend.SUSPEND_RESUME,
      min_etcd_revision: this.opts.min_etcd_revision ?? 0n,
    };
    call.write(first);
    return call;
  }

  private send(msg: AppendRequest | AppendContent): Promise<void> {
    const call = this.call!;
    if (call.write(msg)) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onDrain = () => {
        cleanup();
        resolve();
      };
      const onFail = (err: unknown) => {
        cleanup();
        reject(err);
      };
      const cleanup = () => {
        call.off('drain', onDrain);
        this.waiter = undefined;
      };
      call.once('drain', onDrain);
      this.waiter = (err) => onFail(this.wrap(err));
    });
  }

  private wrap(err: unknown): unknown {
    if (this.opts.signal?.aborted) return abortError(this.opts.signal);
    const code = grpcCode(err);
    if (code === undefined || err instanceof TransportError) return err;
    return new TransportError(`appending to ${this.journal}: ${describeGrpcError(err)}`, code, { cause: err });
  }

  /** Streams `chunk`; resolves once the transport accepted it (after draining if it was full). */
  async write(chunk: Uint8Array): Promise<void> {
    if (this.state !== 'idle' && this.state !== 'open') throw new GazctlError(`append to ${this.journal} is already ${this.state === 'done' ? 'finished' : 'committing'}`);
    this.open();
    if (this.failure !== undefined) throw this.wrap(this.failure);
    for (let at = 0; at < chunk.length; at += MAX_APPEND_MESSAGE) {
      const part = at === 0 && chunk.length <= MAX_APPEND_MESSAGE ? chunk : chunk.subarray(at, at + MAX_APPEND_MESSAGE);
      await this.send({ content: part });
      this.written += part.length;
    }
  }

  /**
   * Sends the commit message, half-closes and awaits the broker's answer. A non-OK status
   * throws BrokerStatusError (with store_health_error as detail); transport failures throw
   * TransportError.
   */
  async commit(): Promise<AppendResponse> {
    if (this.state === 'committing' || this.state === 'done') throw new GazctlError(`append to ${this.journal} was already finished`);
    const call = this.open();
    this.state = 'committing';
    let res: AppendResponse;
    try {
      if (this.failure === undefined) {
        call.write(AppendRequest.create());
        this.commitSent = true;
        call.end();
      }
      res = await this.response!;
    } catch (err) {
      throw this.wrap(err);
    } finally {
      this.state = 'done';
    }
    if (res.status !== Status.OK) {
      if (this.direct) this.transport.forgetRoute(this.journal);
      throw new BrokerStatusError(res.status, `appending to ${this.journal}`, res.store_health_error || undefined);
    }
    return res;
  }

  /** Rolls the append back: half-closes without the commit message. */
  abort(): void {
    if (this.state === 'done') return;
    this.state = 'done';
    if (this.call) this.call.end();
  }

  /** Resolves with the broker's answer to an aborted append (usually an error; for tests). */
  settled(): Promise<AppendResponse | unknown> {
    return this.response ? this.response.then((r) => r, (e) => e) : Promise.resolve(undefined);
  }
}

/** Whether a whole buffered append may be retried after `err` (gazctl's simple appender). */
export function isRetryableAppendError(err: unknown): boolean {
  if (err instanceof BrokerStatusError) {
    return (
      err.status === Status.NOT_JOURNAL_PRIMARY_BROKER ||
      err.status === Status.NO_JOURNAL_PRIMARY_BROKER ||
      err.status === Status.INSUFFICIENT_JOURNAL_BROKERS
    );
  }
  return isUnavailable(err);
}

/** Statuses after which the queued (async) appender gives a journal up, as upstream's does. */
const TERMINAL_QUEUED_APPEND_STATUSES = new Set<Status>([
  Status.FRAGMENT_STORE_UNHEALTHY,
  Status.INDEX_HAS_GREATER_OFFSET,
  Status.JOURNAL_NOT_FOUND,
  Status.NOT_ALLOWED,
  Status.REGISTER_MISMATCH,
  Status.WRONG_APPEND_OFFSET,
]);

/**
 * Whether a queued append (the record-at-a-time `journals append` path) may be retried: every
 * failure except the terminal statuses above and cancellation. Retrying is safe because an
 * append that did not commit was rolled back by the broker. This includes a broker aborting a
 * stream that fell under its minimum append rate, which happens when the broker itself stalls.
 */
export function isRetryableQueuedAppendError(err: unknown): boolean {
  if (isAbortError(err)) return false;
  if (err instanceof BrokerStatusError) return !TERMINAL_QUEUED_APPEND_STATUSES.has(err.status);
  const code = grpcCode(err);
  return code !== GrpcStatus.CANCELLED && code !== GrpcStatus.UNAUTHENTICATED && code !== GrpcStatus.PERMISSION_DENIED;
}

/**
 * Details of gRPC failures that prove the append never reached a broker able to commit it: our
 * own connection was never established, or the broker we reached could not open its stream to
 * the journal's primary (a Go broker proxying to a dead primary answers this way). These are the
 * failures of a failover, while the route still names a primary that is gone.
 */
const NEVER_CONNECTED = /No connection established|ECONNREFUSED|connection refused|all SubConns are in TransientFailure|Error while dialing|Failed to connect|no address available/i;

function grpcDetails(err: unknown): string {
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) {
    const d = (e as { details?: unknown }).details;
    if (typeof d === 'string') return d;
  }
  return err instanceof Error ? err.message : String(err);
}

/** True when `err` says the append could not reach a broker able to commit it (see NEVER_CONNECTED). */
export function isUnreachablePrimary(err: unknown): boolean {
  return isUnavailable(err) && NEVER_CONNECTED.test(grpcDetails(err));
}

/**
 * Whether an append that failed with `err` may nonetheless have committed. This is the rule that
 * keeps retries exactly-once:
 *
 * - A broker commits an append only after it received our commit message (an empty content
 *   message). If that message was never handed to the transport (`commitSent` false), nothing can
 *   have committed, whatever the failure.
 * - A non-OK AppendResponse status is the broker's definite answer: it refused and rolled back.
 * - A gRPC UNKNOWN status is a Go broker's append handler failing by itself (e.g. a client stream
 *   under the minimum append rate): it returns errors only for appends it did not commit.
 * - An UNAVAILABLE status whose details show no stream to a committing broker was ever opened
 *   (connection refused, or the proxying broker could not dial the primary) did not commit.
 * - Anything else after the commit message was sent is ambiguous: the broker may have committed
 *   and the answer been lost (the connection dropped, the primary died after replicating, a
 *   deadline fired). Those are never retried.
 */
export function appendMayHaveCommitted(err: unknown, commitSent: boolean): boolean {
  if (!commitSent) return false;
  if (err instanceof BrokerStatusError) return false;
  const code = grpcCode(err);
  if (code === GrpcStatus.UNKNOWN) return false;
  if (isUnreachablePrimary(err)) return false;
  return true;
}

/** What a retried append is waiting for, in words (for a warning). */
export function describeAppendWait(err: unknown): string {
  if (err instanceof BrokerStatusError) {
    switch (err.status) {
      case Status.NO_JOURNAL_PRIMARY_BROKER:
        return 'the journal to be assigned a primary broker';
      case Status.NOT_JOURNAL_PRIMARY_BROKER:
        return 'the journal\'s route to settle on its new primary broker';
      case Status.INSUFFICIENT_JOURNAL_BROKERS:
        return 'enough brokers to replicate the journal';
      case Status.NOT_JOURNAL_BROKER:
        return 'the brokers to agree on the journal\'s route';
      default:
        return `the broker to accept the append (it answered ${Status[err.status] ?? err.status})`;
    }
  }
  if (isUnreachablePrimary(err)) {
    return 'the journal\'s primary broker to become reachable, or to be replaced once its etcd lease expires (failover)';
  }
  return 'the brokers to accept the append';
}

/**
 * Appends `data` (all chunks, atomically) to `journal`, retrying the whole append while
 * `retryable` accepts the failure (default: gRPC UNAVAILABLE, NOT_JOURNAL_PRIMARY_BROKER,
 * NO_JOURNAL_PRIMARY_BROKER and INSUFFICIENT_JOURNAL_BROKERS) and the append cannot have
 * committed ({@link appendMayHaveCommitted}).
 */
export async function appendOnce(
  client: { append(journal: string, opts?: AppendOptions): Appender },
  journal: string,
  data: Uint8Array[],
  opts: AppendOptions & Pick<RetryOptions, 'maxAttempts' | 'onRetry' | 'delay' | 'retryable'> & { timeoutMs?: number } = {},
): Promise<AppendResponse> {
  const { maxAttempts, onRetry, delay, timeoutMs, retryable, ...appendOpts } = opts;
  const accept = retryable ?? isRetryableAppendError;
  const sent = new WeakMap<object, boolean>();
  return retry(
    async () => {
      const a = client.append(journal, appendOpts);
      try {
        for (const d of data) await a.write(d);
        return await a.commit();
      } catch (err) {
        a.abort();
        if (err && typeof err === 'object') sent.set(err, a.commitSent);
        throw err;
      }
    },
    {
      signal: opts.signal,
      retryable: (err, attempt) =>
        accept(err, attempt) && !appendMayHaveCommitted(err, err && typeof err === 'object' ? (sent.get(err) ?? true) : true),
      maxAttempts,
      onRetry,
      delay,
      deadline: timeoutMs !== undefined && timeoutMs > 0 ? Date.now() + timeoutMs : undefined,
    },
  );
}
