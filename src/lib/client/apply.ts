// The one Apply path of the library, for journals and shards alike: changes are cut into
// batches (each its own etcd transaction), sent one after another, and the first failure stops
// the run with an ApplyError saying which batch failed, what was already applied, and why.
import { BrokerStatusError, ConsumerStatusError, GazctlError, TransportError } from '../protocol/errors.js';
import { Status as BrokerStatus } from '../protocol/gen/broker/protocol.js';
import { Status as ConsumerStatus } from '../protocol/gen/consumer/protocol.js';
import { batchChanges } from './batch.js';
import { grpcCode, isAbortError } from './retry.js';

/**
 * Why an Apply batch failed:
 * - `too-many-operations`: etcd refused the transaction for having more operations than its
 *   per-transaction limit (128 by default); smaller batches would go through.
 * - `revision-mismatch`: the transaction's revision checks failed (status ETCD_TRANSACTION_FAILED):
 *   an item changed or was deleted since it was listed, or a create names an existing one.
 * - `other`: anything else (unreachable service, authorization, another status).
 */
export type ApplyFailureReason = 'too-many-operations' | 'revision-mismatch' | 'other';

/** Progress of a run, passed to `onBatch` after each batch that succeeded. */
export interface ApplyBatchInfo {
  /** 0-based index of the batch just applied. */
  index: number;
  /** Number of batches in the run. */
  batches: number;
  /** Changes in this batch. */
  size: number;
  /** Changes applied so far, this batch included. */
  applied: number;
  /** Changes in the whole run. */
  total: number;
  /** Etcd revision of this batch's transaction. */
  revision: bigint;
}

export interface ApplyResult<R> {
  /** Etcd revision of the last transaction (0 when the response carried none). */
  revision: bigint;
  /** Number of transactions sent. */
  batches: number;
  /** Number of changes applied (all of them). */
  applied: number;
  /** The last batch's response. */
  response: R;
}

export interface ApplyOptions {
  /** Most changes per transaction; 0 or absent: all in one. */
  maxTxnSize?: number;
  /** Called after each successful batch. */
  onBatch?: (info: ApplyBatchInfo) => void;
}

/** An Apply run stopped at a failing batch; the batches before it were applied. */
export class ApplyError extends GazctlError {
  constructor(
    message: string,
    /** Machine-readable cause of the failure. */
    readonly reason: ApplyFailureReason,
    /** 0-based index of the failed batch. */
    readonly batchIndex: number,
    /** Number of batches in the run. */
    readonly batches: number,
    /** Changes in the failed batch. */
    readonly batchSize: number,
    /** Changes applied by the batches before the failed one. */
    readonly applied: number,
    /** Changes in the whole run. */
    readonly total: number,
    /** The broker's or consumer's status when it answered with one (see `cause` for which). */
    readonly status: number | undefined,
    /** That status's name. */
    readonly statusName: string | undefined,
    /** The failure itself, without the batch context (the message of a one-batch run). */
    readonly detail: string,
    /** BrokerStatusError / ConsumerStatusError for a status, else the transport (or other) error. */
    cause: unknown,
  ) {
    super(message, { cause });
  }
}

/** What distinguishes the two services' Apply for {@link applyInBatches}. */
export interface ApplyService<R> {
  /** Describes the operation in messages, e.g. "applying journal specs". */
  what: string;
  /** The status error of a non-OK response (BrokerStatusError or ConsumerStatusError). */
  statusError: (status: number, context: string) => BrokerStatusError | ConsumerStatusError;
}

// Etcd's error text for a transaction over its --max-txn-ops limit, as the broker or consumer
// passes it on in the gRPC status details.
const TOO_MANY_OPS = 'too many operations in txn request';

/** Whether `err` (or an error it wraps) is etcd's too-many-operations refusal. */
function isTooManyOperations(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (grpcCode(e) !== undefined && !(e instanceof TransportError)) {
      const details = (e as { details?: unknown }).details;
      if (typeof details === 'string' && details.toLowerCase().includes(TOO_MANY_OPS)) return true;
    }
  }
  return false;
}

function isRevisionMismatch(e: BrokerStatusError | ConsumerStatusError): boolean {
  return e instanceof BrokerStatusError ? e.status === BrokerStatus.ETCD_TRANSACTION_FAILED : e.status === ConsumerStatus.ETCD_TRANSACTION_FAILED;
}

/**
 * Sends `changes` through `send` in batches of at most `opts.maxTxnSize` (0 or absent: one
 * request; an empty list is still sent once), one after another. The first failure stops the
 * run and is thrown as an {@link ApplyError}; an abort is rethrown as is.
 *
 * With `prepare`, each batch is prepared (e.g. encoded) before it is sent, and `send` gets the
 * result with it: the next batch is prepared while the current one's request is in flight, so
 * the wait for the service and the work for the next request overlap. Batches are still sent
 * strictly one after another. A `prepare` that throws is not a failure of its own: `send` then
 * gets undefined for that batch and handles it unprepared (so any error comes from sending it,
 * as without `prepare`).
 */
export async function applyInBatches<C, R extends { status: number; header?: { etcd?: { revision: bigint } } }, P = never>(
  changes: readonly C[],
  send: (batch: C[], prepared?: P) => Promise<R>,
  service: ApplyService<R>,
  opts: ApplyOptions = {},
  prepare?: (batch: C[]) => P,
): Promise<ApplyResult<R>> {
  const batches = batchChanges(changes, opts.maxTxnSize ?? 0);
  const total = changes.length;
  let applied = 0;
  let revision = 0n;
  let last: R | undefined;
  const ahead = prepare ? new Prepared(batches, prepare) : undefined;
  try {
    for (let b = 0; b < batches.length; b++) {
      await sendBatch(b);
    }
  } finally {
    ahead?.cancel();
  }
  return { revision, batches: batches.length, applied, response: last! };

  async function sendBatch(b: number): Promise<void> {
    const batch = batches[b]!;
    // The message of a one-batch run is the plain status or transport error, as from any RPC.
    const context =
      batches.length > 1
        ? `${service.what}: batch ${b + 1} of ${batches.length} failed (${applied} of ${total} changes already applied)`
        : service.what;
    const fail = (detail: string, reason: ApplyFailureReason, cause: unknown, status?: BrokerStatusError | ConsumerStatusError) =>
      new ApplyError(
        batches.length > 1 ? `${context}: ${status ? status.statusName : detail}` : detail,
        reason,
        b,
        batches.length,
        batch.length,
        applied,
        total,
        status?.status,
        status?.statusName,
        detail,
        cause,
      );
    let res: R;
    try {
      if (ahead) {
        const pending = send(batch, ahead.take(b));
        // The next batch is prepared once this request is on its way (after the I/O of this turn).
        if (b + 1 < batches.length) ahead.schedule(b + 1);
        res = await pending;
      } else res = await send(batch);
    } catch (err) {
      if (isAbortError(err)) throw err;
      const reason = isTooManyOperations(err) ? 'too-many-operations' : 'other';
      throw fail(err instanceof Error ? err.message : String(err), reason, err);
    }
    if (res.status !== 0) {
      const se = service.statusError(res.status, service.what);
      throw fail(se.message, isRevisionMismatch(se) ? 'revision-mismatch' : 'other', se, se);
    }
    applied += batch.length;
    revision = res.header?.etcd?.revision ?? 0n;
    last = res;
    opts.onBatch?.({ index: b, batches: batches.length, size: batch.length, applied, total, revision });
  }
}

/** The one batch prepared ahead of its turn (see applyInBatches). */
class Prepared<C, P> {
  private index = -1;
  private value: P | undefined;
  private timer: NodeJS.Immediate | undefined;

  constructor(
    private readonly batches: readonly C[][],
    private readonly prepare: (batch: C[]) => P,
  ) {}

  /** Prepares batch `i` on a later turn of the event loop. */
  schedule(i: number): void {
    this.cancel();
    this.timer = setImmediate(() => {
      this.timer = undefined;
      this.run(i);
    });
  }

  /** Batch `i` prepared: ahead of time when that is done, else now; undefined when prepare threw. */
  take(i: number): P | undefined {
    if (this.index !== i) {
      this.cancel();
      this.run(i);
    }
    const v = this.value;
    this.index = -1;
    this.value = undefined;
    return v;
  }

  cancel(): void {
    if (this.timer !== undefined) clearImmediate(this.timer);
    this.timer = undefined;
  }

  private run(i: number): void {
    this.index = i;
    try {
      this.value = this.prepare(this.batches[i]!);
    } catch {
      this.value = undefined;
    }
  }
}
