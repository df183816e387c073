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

/** Largest content message sent; bigger writes are split (brokers accept 4 MiB messages). */
export const MAX_APPEND_MESSAGE = 1024 * 1024;

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
 * Appends `data` (all chunks, atomically) to `journal`, retrying the whole append on gRPC
 * UNAVAILABLE, NOT_JOURNAL_PRIMARY_BROKER, NO_JOURNAL_PRIMARY_BROKER and
 * INSUFFICIENT_JOURNAL_BROKERS.
 */
export async function appendOnce(
  client: { append(journal: string, opts?: AppendOptions): Appender },
  journal: string,
  data: Uint8Array[],
  opts: AppendOptions & Pick<RetryOptions, 'maxAttempts' | 'onRetry' | 'delay' | 'retryable'> & { timeoutMs?: number } = {},
): Promise<AppendResponse> {
  const { maxAttempts, onRetry, delay, timeoutMs, retryable, ...appendOpts } = opts;
  return retry(
    async () => {
      const a = client.append(journal, appendOpts);
      try {
        for (const d of data) await a.write(d);
        return await a.commit();
      } catch (err) {
        a.abort();
        throw err;
      }
    },
    {
      signal: opts.signal,
      retryable: retryable ?? isRetryableAppendError,
      maxAttempts,
      onRetry,
      delay,
      deadline: timeoutMs !== undefined ? Date.now() + timeoutMs : undefined,
    },
  );
}
