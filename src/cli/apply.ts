// How `journals apply|edit` (and later the shards commands) show an apply to the operator: the
// --dry-run plan, and the one line that says what was and was not applied when an apply fails.
// Planning, batching and classifying failures are the library's (src/lib/client/plan.ts and
// apply.ts); this file only renders their results.
import { GazctlError, ValidationError } from '../lib/protocol/errors.js';
import { batchCount, ETCD_DEFAULT_MAX_TXN_OPS } from '../lib/client/batch.js';
import type { ApplyError } from '../lib/client/apply.js';
import type { ApplyPlan, PlannedChange } from '../lib/client/plan.js';

/** Refuses a --max-txn-size (e.g. from gazctl.ini) that is not a non-negative integer. */
export function checkMaxTxnSize(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new ValidationError(`must be a non-negative integer (got ${n})`, '--max-txn-size');
}

/** Number of transactions `n` changes take with --max-txn-size `maxTxnSize`. */
export function transactionCount(n: number, maxTxnSize: number): number {
  checkMaxTxnSize(maxTxnSize);
  return batchCount(n, maxTxnSize);
}

export function describeChange(c: PlannedChange<unknown>): string {
  const line = describeKind(c);
  return c.conflict ? `${line}  CONFLICT: ${c.name} ${c.conflict}` : line;
}

function describeKind(c: PlannedChange<unknown>): string {
  switch (c.kind) {
    case 'unchanged':
      return `unchanged  ${c.name}`;
    case 'delete':
      return `delete  ${c.name}  (${c.expectModRevision === -1n ? 'any revision' : `at revision ${c.expectModRevision}`})`;
    case 'create':
      return `create  ${c.name}`;
    case 'upsert':
      return `upsert  ${c.name}  (any revision)`;
    case 'update':
      return `update  ${c.name}  (at revision ${c.expectModRevision})`;
  }
}

/** The --dry-run output: one line per change, then a summary. */
export function renderPlan(plan: ApplyPlan<unknown>, maxTxnSize: number, noun: string): string {
  const send = plan.changes.length;
  const batches = send ? transactionCount(send, maxTxnSize) : 0;
  const conflicts = plan.conflicts.length;
  const lines = plan.entries.map(describeChange);
  let summary = `${send} ${noun} change${send === 1 ? '' : 's'} in ${batches} transaction${batches === 1 ? '' : 's'}`;
  if (plan.unchanged) summary += `, ${plan.unchanged} unchanged`;
  if (conflicts) summary += `; ${conflicts} conflict${conflicts === 1 ? '' : 's'}: the apply would be refused`;
  lines.push(`${summary}; nothing applied (--dry-run).`);
  return lines.join('\n') + '\n';
}

/** The summary line of a successful apply. */
export function renderApplied(plan: ApplyPlan<unknown>, result: { revision: bigint; batches: number }, noun: string): string {
  const n = plan.changes.length;
  const { revision, batches } = result;
  let summary = `applied ${n} ${noun} change${n === 1 ? '' : 's'} in ${batches} transaction${batches === 1 ? '' : 's'} (etcd revision ${revision})`;
  if (plan.unchanged) summary += `; ${plan.unchanged} unchanged`;
  return summary;
}

/** The summary line when every change is unchanged. */
export function renderNothingToApply(plan: ApplyPlan<unknown>, noun: string): string {
  return `nothing to apply: ${plan.unchanged} ${noun}${plan.unchanged === 1 ? '' : 's'} unchanged`;
}

/**
 * The operator's line for a failed apply: what etcd or the service refused, what to do about
 * it, and which transactions were applied before the failing one. Conflicts the plan predicted
 * are named when the failure is a revision mismatch.
 */
export function explainApplyFailure(err: ApplyError, plan?: ApplyPlan<unknown>): GazctlError {
  const already = err.batches > 1 ? ` ${whatWasApplied(err)}` : ' Nothing was applied.';
  switch (err.reason) {
    case 'too-many-operations':
      return new GazctlError(
        `etcd refused a transaction of ${err.batchSize} changes (too many operations; etcd allows ${ETCD_DEFAULT_MAX_TXN_OPS} per transaction by default). Re-run with --max-txn-size ${Math.min(100, ETCD_DEFAULT_MAX_TXN_OPS)} to apply in smaller, non-atomic batches.${already}`,
        { cause: err },
      );
    case 'revision-mismatch': {
      let line = `apply refused: an item's revision does not match (it was changed or deleted since it was listed, or a "create" names one that already exists). Re-list, merge your changes and apply again.${already}`;
      const conflicts = plan?.conflicts ?? [];
      if (conflicts.length > 0) {
        const named = conflicts.slice(0, 3).map((p) => `${p.name} ${p.conflict}`);
        if (conflicts.length > 3) named.push(`and ${conflicts.length - 3} more`);
        line += ` Conflicts: ${named.join('; ')}.`;
      }
      return new GazctlError(line, { cause: err });
    }
    case 'other': {
      return new GazctlError(`apply failed: ${err.detail}.${already}`, { cause: err });
    }
  }
}

/**
 * Which transactions of a failed multi-batch apply were applied. When they are exactly those
 * before the failed one (always so one transaction at a time), one sentence says so; otherwise
 * (transactions after the failed one were in flight and went through) each kind is named by its
 * 1-based ranges: "Transactions 1-4 and 6 of 10 were applied (500 changes); 5 failed; 7-10 were
 * not sent."
 */
function whatWasApplied(err: ApplyError): string {
  const n = err.batches;
  if (err.appliedInOrder) {
    return err.applied > 0
      ? `Transaction ${err.batchIndex + 1} of ${n} failed; the ${err.applied} changes of the transactions before it were applied.`
      : `Transaction 1 of ${n} failed; nothing was applied.`;
  }
  const applied = new Set(err.appliedBatches);
  const failed = new Set(err.failedBatches);
  const notSent: number[] = [];
  for (let b = 0; b < n; b++) if (!applied.has(b) && !failed.has(b)) notSent.push(b);
  const a = err.appliedBatches.length;
  if (a === 0) return `Transaction ${err.batchIndex + 1} of ${n} failed; nothing was applied.`;
  const changes = `${err.applied} change${err.applied === 1 ? '' : 's'}`;
  let line = `${a === 1 ? 'Transaction' : 'Transactions'} ${ranges(err.appliedBatches)} of ${n} ${a === 1 ? 'was' : 'were'} applied (${changes}); ${ranges(err.failedBatches)} failed`;
  if (notSent.length > 0) line += `; ${ranges(notSent)} ${notSent.length === 1 ? 'was' : 'were'} not sent`;
  return line + '.';
}

/** 0-based ascending indexes as 1-based ranges: [0,1,2,3,5] → "1-4 and 6"; [0,2,4] → "1, 3 and 5". */
export function ranges(indexes: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < indexes.length; ) {
    let j = i;
    while (j + 1 < indexes.length && indexes[j + 1] === indexes[j]! + 1) j++;
    parts.push(i === j ? `${indexes[i]! + 1}` : `${indexes[i]! + 1}-${indexes[j]! + 1}`);
    i = j + 1;
  }
  return parts.length <= 1 ? (parts[0] ?? '') : `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
}
