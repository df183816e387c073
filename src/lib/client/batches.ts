// Sequential Apply batches (`--max-txn-size`), shared by the journal and shard clients.
import { TransportError } from '../protocol/errors.js';
import { batchChanges } from './batch.js';

/**
 * Sends `changes` in batches of at most `maxTxnSize` (0 or absent: one request) one after
 * another, stopping at the first failure, whose message then says which batch failed and how
 * many changes were already applied. Returns the last batch's response.
 */
export async function applyInBatches<C, R extends { status: number }>(
  changes: C[],
  maxTxnSize: number | undefined,
  what: string,
  send: (batch: C[]) => Promise<R>,
  statusError: (status: R['status'], context: string) => Error,
): Promise<R> {
  const batches = batchChanges(changes, maxTxnSize ?? 0);
  let applied = 0;
  let last: R | undefined;
  for (let b = 0; b < batches.length; b++) {
    const batch = batches[b]!;
    const context =
      batches.length > 1
        ? `${what}: batch ${b + 1} of ${batches.length} failed (${applied} of ${changes.length} changes already applied)`
        : what;
    let res: R;
    try {
      res = await send(batch);
    } catch (err) {
      if (batches.length > 1 && err instanceof TransportError) {
        throw new TransportError(`${context}: ${err.message}`, err.code, { cause: err });
      }
      throw err;
    }
    if (res.status !== 0) throw statusError(res.status, context);
    applied += batch.length;
    last = res;
  }
  return last!;
}
