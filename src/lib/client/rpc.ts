// Low-level call helpers shared by the clients: promisified unary calls with AbortSignal and
// deadline support, gRPC error descriptions, and lean codecs for the two hot streams (Read
// content responses and Append content requests), which skip a copy per chunk.
import type { CallOptions as GrpcCallOptions, ClientUnaryCall, Metadata, ServiceError } from '@grpc/grpc-js';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { AppendRequest, ReadResponse, Status } from '../protocol/gen/broker/protocol.js';
import { TransportError } from '../protocol/errors.js';
import { abortError, grpcCode, isUnavailable, retry } from './retry.js';
import { diagnosed } from './transport-diagnosis.js';
import { parseEndpoint } from '../protocol/route.js';
import { latestSocksFailure, socksFailure } from '../socks.js';

/** The recent failure of the SOCKS proxy to reach the endpoint named in `who` ("broker http://h:p"). */
function socksNote(who: string): string | undefined {
  const ep = /\b(?:https?):\/\/\S+/.exec(who)?.[0];
  if (!ep) return undefined;
  try {
    return socksFailure(parseEndpoint(ep).target);
  } catch {
    return undefined;
  }
}

/** Starts one unary call (a grpc-js call, which can be cancelled). */
export type UnaryStarter<Res> = (
  md: Metadata,
  opts: Partial<GrpcCallOptions>,
  cb: (err: ServiceError | null, res: Res) => void,
) => Pick<ClientUnaryCall, 'cancel'>;

/** Runs one unary call, cancelling it when `signal` aborts. */
export function unaryCall<Res>(
  start: UnaryStarter<Res>,
  md: Metadata,
  opts: { signal?: AbortSignal; deadline?: number },
): Promise<Res> {
  const { signal } = opts;
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise<Res>((resolve, reject) => {
    const callOpts: Partial<GrpcCallOptions> = opts.deadline !== undefined ? { deadline: opts.deadline } : {};
    const onAbort = () => call.cancel();
    const call = start(md, callOpts, (err, res) => {
      signal?.removeEventListener('abort', onAbort);
      if (signal?.aborted) reject(abortError(signal));
      else if (err) reject(err);
      else resolve(res);
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** grpc-js details without its trailing resolver note and timestamps, on one line. */
export function cleanGrpcDetails(details: string | undefined): string {
  return (details ?? '')
    .replace(/\s*Resolution note:.*$/s, '')
    .replace(/ \(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** A one-line description of a gRPC error ("UNAVAILABLE: No connection established ..."). */
export function describeGrpcError(err: unknown): string {
  const code = grpcCode(err);
  if (code === undefined || err instanceof TransportError) return err instanceof Error ? err.message : String(err);
  const e = err as ServiceError;
  const name = GrpcStatus[code] ?? String(code);
  // Through a SOCKS proxy, grpc-js only saw its local tunnel drop: say what the proxy said.
  const via = code === GrpcStatus.UNAVAILABLE ? latestSocksFailure(10_000) : undefined;
  return `${name}: ${via ?? (cleanGrpcDetails(e.details) || e.message)}`;
}

// ---- Read responses --------------------------------------------------------------------------

const EMPTY = Buffer.alloc(0);

/**
 * Decodes a ReadResponse. A content response (only `offset` and `content`) is decoded inline
 * with `content` as a view of the received message, not a copy; anything else takes the
 * generated decoder.
 */
export function decodeReadResponse(buf: Buffer): ReadResponse {
  let pos = 0;
  const n = buf.length;
  let offset = 0;
  let content: Buffer = EMPTY;
  while (pos < n) {
    const tag = buf[pos++]!;
    if (tag === 0x18) {
      // offset: a non-negative varint below 2^49 keeps this exact in a double.
      let v = 0;
      let mul = 1;
      let b: number;
      let i = 0;
      do {
        if (pos >= n || i === 7) return slowDecode(buf);
        b = buf[pos++]!;
        v += (b & 0x7f) * mul;
        mul *= 128;
        i++;
      } while (b & 0x80);
      offset = v;
    } else if (tag === 0x3a) {
      let len = 0;
      let mul = 1;
      let b: number;
      let i = 0;
      do {
        if (pos >= n || i === 5) return slowDecode(buf);
        b = buf[pos++]!;
        len += (b & 0x7f) * mul;
        mul *= 128;
        i++;
      } while (b & 0x80);
      if (pos + len > n) return slowDecode(buf);
      content = buf.subarray(pos, pos + len);
      pos += len;
    } else {
      return slowDecode(buf);
    }
  }
  return {
    status: Status.OK,
    header: undefined,
    offset: BigInt(offset),
    write_head: 0n,
    fragment: undefined,
    fragment_url: '',
    content,
  };
}

function slowDecode(buf: Buffer): ReadResponse {
  return ReadResponse.decode(buf);
}

// ---- Append requests -------------------------------------------------------------------------

function varintBytes(v: number): number[] {
  const out: number[] = [];
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** Internal marker for a content-only append message: just the bytes. */
export interface AppendContent {
  content: Uint8Array;
}

/** Encodes an AppendRequest, or a bare content message with a single copy of its bytes. */
export function encodeAppendMessage(msg: AppendRequest | AppendContent): Buffer {
  if (!('journal' in msg)) {
    const c = msg.content;
    const head = varintBytes(c.length);
    const out = Buffer.allocUnsafe(1 + head.length + c.length);
    out[0] = 0x22; // field 4, length-delimited
    for (let i = 0; i < head.length; i++) out[1 + i] = head[i]!;
    out.set(c, 1 + head.length);
    return out;
  }
  return Buffer.from(AppendRequest.encode(msg).finish());
}

// ---- Request/response retries ------------------------------------------------------------------

export type RetryHook = (info: { op: string; attempt: number; delayMs: number; error: unknown }) => void;

/** How a client retries. */
export interface RetryPolicy {
  /** Delay (ms) before retry number `attempt` (0-based); default: the jittered backoff schedule. */
  delay?: (attempt: number) => number;
  /** Give up after this many attempts in total (default: until the time budget runs out). */
  maxAttempts?: number;
}

/**
 * Options of a call. A client takes them at construction as defaults for every call, and each
 * call may override them (a call's signal is combined with the default one: either aborts).
 */
export interface CallOptions {
  signal?: AbortSignal;
  /**
   * Overall time budget, retries included; 0 or absent: none. Without one, calls that Go's
   * gazctl makes wait-for-ready (List, Apply, watch, Stat) retry an unreachable service until
   * aborted.
   */
  timeoutMs?: number;
  retry?: RetryPolicy;
  /** Called before each retry sleep (for logging). */
  onRetry?: RetryHook;
}

/**
 * Maps a gRPC failure to a TransportError: UNAVAILABLE (or running out of time while the service
 * was unreachable) reads "`<who>` is unreachable: <detail>".
 */
export function transportError(who: string, op: string, err: unknown, lastUnavailable: unknown, timedOut: boolean): unknown {
  const code = grpcCode(err);
  if (code === undefined || err instanceof TransportError) return err;
  if (code === GrpcStatus.UNAVAILABLE || (timedOut && code === GrpcStatus.DEADLINE_EXCEEDED)) {
    const detail = cleanGrpcDetails(
      lastUnavailable
        ? (lastUnavailable as ServiceError).details
        : code === GrpcStatus.DEADLINE_EXCEEDED
          ? 'no answer in time'
          : (err as ServiceError).details,
    );
    // Through a SOCKS proxy, grpc-js only sees its local tunnel drop: say what the proxy said.
    const via = socksNote(who);
    return new TransportError(`${who} is unreachable: ${via ?? detail}`, code, { cause: err });
  }
  return new TransportError(`${op}: ${describeGrpcError(err)}`, code, { cause: err });
}

/**
 * Runs `fn(deadline)` retrying gRPC UNAVAILABLE (and whatever `more` accepts) on the backoff
 * schedule until it succeeds, `timeoutMs` runs out, `maxAttempts` is reached or `signal` aborts.
 */
export async function retryCall<T>(
  who: string,
  op: string,
  opts: CallOptions,
  fn: (deadline: number | undefined) => Promise<T>,
  extra: { more?: (err: unknown) => boolean; maxAttempts?: number; delay?: (attempt: number) => number; onRetry?: RetryHook } = {},
): Promise<T> {
  const deadline = opts.timeoutMs !== undefined ? Date.now() + opts.timeoutMs : undefined;
  let lastUnavailable: unknown;
  try {
    return await retry(() => diagnosed(fn(deadline), who, deadline), {
      signal: opts.signal,
      deadline,
      maxAttempts: extra.maxAttempts,
      delay: extra.delay,
      retryable: (err) => {
        if (isUnavailable(err)) {
          lastUnavailable = err;
          return true;
        }
        return extra.more?.(err) ?? false;
      },
      onRetry: (error, attempt, delayMs) => extra.onRetry?.({ op, attempt, delayMs, error }),
    });
  } catch (err) {
    if (opts.signal?.aborted) throw abortError(opts.signal);
    const timedOut = deadline !== undefined && Date.now() >= deadline - 5;
    throw transportError(who, op, err, lastUnavailable, timedOut);
  }
}
