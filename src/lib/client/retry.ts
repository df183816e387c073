// A small retry toolkit shared by every client in this package: the backoff schedule Gazette's
// Go clients use, an abortable sleep, and predicates telling transient failures from final ones.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { Status } from '../protocol/gen/broker/protocol.js';
import { Status as ConsumerStatus } from '../protocol/gen/consumer/protocol.js';
import { BrokerStatusError, ConsumerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { abortError, sleep } from '../concurrency.js';

export { abortError, sleep };

/** Base delay (ms) before retry number `attempt` (0-based): 50, 50, 100, 100, 1000, 1000, 5000... */
export function backoffBase(attempt: number): number {
  if (attempt <= 1) return 50;
  if (attempt <= 3) return 100;
  if (attempt <= 5) return 1000;
  return 5000;
}

/** `ms` scaled by a uniform random factor in [0.8, 1.2]. */
export function withJitter(ms: number, random: () => number = Math.random): number {
  return Math.round(ms * (0.8 + 0.4 * random()));
}

/** The jittered delay before retry number `attempt`. */
export function backoff(attempt: number): number {
  return withJitter(backoffBase(attempt));
}

export function isAbortError(err: unknown): boolean {
  return err instanceof Error && err.name === 'AbortError';
}

/** gRPC status code of an error thrown by grpc-js (or carried by a TransportError). */
export function grpcCode(err: unknown): number | undefined {
  if (err instanceof TransportError) return err.code;
  if (err && typeof err === 'object' && 'code' in err && typeof (err as { code: unknown }).code === 'number') {
    const e = err as { code: number; details?: unknown; metadata?: unknown };
    // grpc-js ServiceErrors have `details` and `metadata`; plain Node errors have string codes.
    if ('details' in e || 'metadata' in e) return e.code;
  }
  return undefined;
}

/** True for gRPC UNAVAILABLE: the service could not be reached, or the connection dropped. */
export function isUnavailable(err: unknown): boolean {
  return grpcCode(err) === GrpcStatus.UNAVAILABLE;
}

/**
 * gRPC codes a long-lived stream (Read, watch) treats as transient: the connection failed, the
 * stream was reset, or the server ended it (shutdown, token expiry). Anything else
 * (INVALID_ARGUMENT, UNAUTHENTICATED, UNIMPLEMENTED, UNKNOWN validation errors...) is final.
 */
export function isTransientStreamCode(code: number | undefined): boolean {
  switch (code) {
    case GrpcStatus.UNAVAILABLE:
    case GrpcStatus.INTERNAL:
    case GrpcStatus.CANCELLED:
    case GrpcStatus.ABORTED:
    case GrpcStatus.DEADLINE_EXCEEDED:
    case GrpcStatus.RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

/** Broker statuses that clear up by themselves (routing and assignment churn). */
export function isTransientBrokerStatus(s: Status): boolean {
  switch (s) {
    case Status.NO_JOURNAL_PRIMARY_BROKER:
    case Status.NOT_JOURNAL_PRIMARY_BROKER:
    case Status.NOT_JOURNAL_BROKER:
    case Status.INSUFFICIENT_JOURNAL_BROKERS:
      return true;
    default:
      return false;
  }
}

/** Consumer statuses that clear up by themselves. */
export function isTransientConsumerStatus(s: ConsumerStatus): boolean {
  return s === ConsumerStatus.NO_SHARD_PRIMARY;
}

/** True for an UNAVAILABLE transport error or a transient broker/consumer status. */
export function isTransient(err: unknown): boolean {
  if (err instanceof BrokerStatusError) return isTransientBrokerStatus(err.status);
  if (err instanceof ConsumerStatusError) return isTransientConsumerStatus(err.status);
  return isUnavailable(err);
}

export interface RetryOptions {
  signal?: AbortSignal;
  /** Decides whether the error of attempt `attempt` (0-based) is worth another try. */
  retryable?: (err: unknown, attempt: number) => boolean;
  /** Give up after this many attempts in total (default: unlimited). */
  maxAttempts?: number;
  /** Absolute deadline (Date.now() ms); a retry that would sleep past it is not made. */
  deadline?: number;
  /** Called before each sleep, e.g. to log. */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
  /** Overrides the schedule (tests). */
  delay?: (attempt: number) => number;
}

/**
 * Runs `fn(attempt)` until it resolves, retrying errors `retryable` accepts (default:
 * `isTransient`) after the backoff schedule. The last error is rethrown when retries run out.
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const retryable = opts.retryable ?? ((e: unknown) => isTransient(e));
  const delay = opts.delay ?? backoff;
  for (let attempt = 0; ; attempt++) {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    try {
      return await fn(attempt);
    } catch (err) {
      if (opts.signal?.aborted) throw abortError(opts.signal);
      if (err instanceof GazctlError && !(err instanceof BrokerStatusError || err instanceof ConsumerStatusError || err instanceof TransportError)) {
        throw err; // validation and other local errors never get better by retrying
      }
      if (!retryable(err, attempt)) throw err;
      if (opts.maxAttempts !== undefined && attempt + 1 >= opts.maxAttempts) throw err;
      const ms = delay(attempt);
      if (opts.deadline !== undefined && Date.now() + ms >= opts.deadline) throw err;
      opts.onRetry?.(err, attempt, ms);
      await sleep(ms, opts.signal);
    }
  }
}
