// Splitting Apply changes into consecutive transactions (the `maxTxnSize` of an apply).
import { ValidationError } from '../protocol/errors.js';

/** Etcd's default limit on operations per transaction (`--max-txn-ops`). */
export const ETCD_DEFAULT_MAX_TXN_OPS = 128;

/**
 * Cuts `changes` into consecutive batches of at most `maxTxnSize` changes, each to be sent as its
 * own Apply (its own Etcd transaction; the whole is then not atomic). 0 means everything in one
 * batch; an empty change list still yields one (empty) batch, which is sent like upstream does.
 */
export function batchChanges<T>(changes: readonly T[], maxTxnSize: number): T[][] {
  if (!Number.isInteger(maxTxnSize) || maxTxnSize < 0) {
    throw new ValidationError(`must be a non-negative integer (got ${maxTxnSize})`, 'maxTxnSize');
  }
  if (maxTxnSize === 0 || changes.length <= maxTxnSize) return [[...changes]];
  const out: T[][] = [];
  for (let i = 0; i < changes.length; i += maxTxnSize) out.push(changes.slice(i, i + maxTxnSize));
  return out;
}

/** How many batches {@link batchChanges} cuts `n` changes into (at least one). */
export function batchCount(n: number, maxTxnSize: number): number {
  if (!Number.isInteger(maxTxnSize) || maxTxnSize < 0) {
    throw new ValidationError(`must be a non-negative integer (got ${maxTxnSize})`, 'maxTxnSize');
  }
  return maxTxnSize === 0 || n <= maxTxnSize ? 1 : Math.ceil(n / maxTxnSize);
}
