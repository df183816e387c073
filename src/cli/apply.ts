// Shared apply logic for `journals apply|edit` (and later the shards commands): plan
// rendering, batched application with progress, and errors that tell the operator exactly
// what was and was not applied.
import { GazctlError } from '../lib/protocol/errors.js';
import { batchChanges, ETCD_DEFAULT_MAX_TXN_OPS } from '../lib/client/batch.js';

export interface PlannedChange {
  /** Journal name or shard ID. */
  name: string;
  kind: 'upsert' | 'delete' | 'unchanged';
  expectModRevision: bigint;
  /** Why the broker will refuse this change (revision mismatch), when known in advance. */
  conflict?: string;
}

export function describeChange(c: PlannedChange): string {
  const line = describeKind(c);
  return c.conflict ? `${line}  CONFLICT: ${c.name} ${c.conflict}` : line;
}

function describeKind(c: PlannedChange): string {
  if (c.kind === 'unchanged') return `unchanged  ${c.name}`;
  if (c.kind === 'delete') {
    return `delete  ${c.name}  (${c.expectModRevision === -1n ? 'any revision' : `at revision ${c.expectModRevision}`})`;
  }
  if (c.expectModRevision === 0n) return `create  ${c.name}`;
  if (c.expectModRevision === -1n) return `upsert  ${c.name}  (any revision)`;
  return `update  ${c.name}  (at revision ${c.expectModRevision})`;
}

export function renderPlan(plan: PlannedChange[], maxTxnSize: number, noun: string): string {
  const send = plan.filter((c) => c.kind !== 'unchanged');
  const batches = send.length ? batchChanges(send, maxTxnSize).length : 0;
  const conflicts = plan.filter((c) => c.conflict).length;
  const lines = plan.map(describeChange);
  let summary = `${send.length} ${noun} change${send.length === 1 ? '' : 's'} in ${batches} transaction${batches === 1 ? '' : 's'}`;
  if (plan.length > send.length) summary += `, ${plan.length - send.length} unchanged`;
  if (conflicts) summary += `; ${conflicts} conflict${conflicts === 1 ? '' : 's'}: the apply would be refused`;
  lines.push(`${summary}; nothing applied (--dry-run).`);
  return lines.join('\n') + '\n';
}

/**
 * Applies `changes` in batches of `maxTxnSize` through `applyBatch`, which returns the etcd
 * revision of its transaction. Translates failures into one clear line.
 */
export async function applyInBatches<C>(
  changes: C[],
  maxTxnSize: number,
  applyBatch: (batch: C[]) => Promise<bigint>,
  progress?: (done: number, total: number) => void,
): Promise<{ revision: bigint; batches: number }> {
  const batches = batchChanges(changes, maxTxnSize);
  let applied = 0;
  let revision = 0n;
  for (let i = 0; i < batches.length; i++) {
    const batch = batches[i]!;
    try {
      revision = await applyBatch(batch);
    } catch (err) {
      throw explainApplyFailure(err as Error, { batchIndex: i, batches: batches.length, applied, batchSize: batch.length, maxTxnSize });
    }
    applied += batch.length;
    progress?.(applied, changes.length);
  }
  return { revision, batches: batches.length };
}

function explainApplyFailure(
  err: Error,
  ctx: { batchIndex: number; batches: number; applied: number; batchSize: number; maxTxnSize: number },
): GazctlError {
  const already =
    ctx.batches > 1
      ? ctx.applied > 0
        ? ` Transaction ${ctx.batchIndex + 1} of ${ctx.batches} failed; the ${ctx.applied} changes of the transactions before it were applied.`
        : ` Transaction 1 of ${ctx.batches} failed; nothing was applied.`
      : ' Nothing was applied.';
  const msg = err.message ?? String(err);
  if (/too many operations in txn request/i.test(msg)) {
    const e = new GazctlError(
      `etcd refused a transaction of ${ctx.batchSize} changes (too many operations; etcd allows ${ETCD_DEFAULT_MAX_TXN_OPS} per transaction by default). Re-run with --max-txn-size ${Math.min(100, ETCD_DEFAULT_MAX_TXN_OPS)} to apply in smaller, non-atomic batches.${already}`,
      { cause: err },
    );
    return e;
  }
  if (/ETCD_TRANSACTION_FAILED/.test(msg)) {
    return new GazctlError(
      `apply refused: an item's revision does not match (it was changed or deleted since it was listed, or a "create" names one that already exists). Re-list, merge your changes and apply again.${already}`,
      { cause: err },
    );
  }
  const e = new GazctlError(`apply failed: ${msg}.${already}`, { cause: err });
  if ((err as GazctlError).exitCode) e.exitCode = (err as GazctlError).exitCode;
  return e;
}
