// How `journals apply|edit` (and later the shards commands) show an apply to the operator: the
// --dry-run plan, and the one line that says what was and was not applied when an apply fails.
// Planning, batching and classifying failures are the library's (src/lib/client/plan.ts and
// apply.ts); this file only renders their results.
import { GazctlError, ValidationError } from '../lib/protocol/errors.js';
import { batchChanges, batchCount, ETCD_DEFAULT_MAX_TXN_OPS } from '../lib/client/batch.js';
import { ApplyError, type ApplyOptions } from '../lib/client/apply.js';
import { planChanges, planSelector, type ApplyPlan, type PlanSubject, type PlannedChange } from '../lib/client/plan.js';
import type { LabelSelector } from '../lib/protocol/gen/broker/protocol.js';

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

/**
 * The -o json document of an apply: the plan (one entry per input change, in input order) and
 * whether and at which etcd revision it was applied (null when nothing was sent).
 */
export function planJson(plan: ApplyPlan<unknown>, maxTxnSize: number, run: { dryRun: boolean; revision?: bigint }): string {
  const send = plan.changes.length;
  const applied = !run.dryRun && send > 0 && run.revision !== undefined;
  const doc = {
    dry_run: run.dryRun,
    applied,
    revision: applied ? `\u0000${run.revision}` : null,
    transactions: send ? transactionCount(send, maxTxnSize) : 0,
    unchanged: plan.unchanged,
    conflicts: plan.conflicts.length,
    changes: plan.entries.map((c) => ({
      name: c.name,
      action: c.kind,
      expect_mod_revision: `\u0000${c.expectModRevision}`,
      ...(c.conflict ? { conflict: c.conflict } : {}),
    })),
  };
  // Revisions are exact integers (they may pass 2^53).
  return JSON.stringify(doc).replace(/"\\u0000(-?\d+)"/g, '$1') + '\n';
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

// ---- planning and applying, for journals and shards alike ------------------------------------

/** What `planApply` and `applyChanges` need of one kind of item (journals or shards) and its client. */
export interface ApplyTarget<C, Cur> {
  subject: PlanSubject<C, Cur>;
  /** The meta-label a selector names items by: `name` (journals) or `id` (shards). */
  label: 'name' | 'id';
  /** `journal` or `shard`, for the summary lines. */
  noun: string;
  /** The items a selector matches (the service's List). */
  list(selector: LabelSelector): Promise<Iterable<Cur>>;
  /** Applies changes in batches (the client's apply). */
  apply(changes: C[], opts: ApplyOptions): Promise<{ revision: bigint; batches: number }>;
}

/** Lists the items the changes name (one listing) and plans the changes against them. */
export async function planApply<C, Cur>(target: ApplyTarget<C, Cur>, changes: readonly C[]): Promise<ApplyPlan<C>> {
  if (changes.length === 0) return planChanges(changes, [], target.subject);
  const names = changes.map((c) => target.subject.changeName(c));
  return planChanges(changes, await target.list(planSelector(names, target.label)), target.subject);
}

/**
 * Whether every change creates an item (an upsert expecting revision 0). Such a run needs no
 * listing to plan it: a create is never "unchanged", so every change is sent whatever exists,
 * and what the listing would add (the names that already exist) matters only to explain a
 * refused transaction.
 */
function allCreates<C>(subject: PlanSubject<C, unknown>, changes: readonly C[]): boolean {
  for (const c of changes) if (!subject.isUpsert(c) || subject.expectModRevision(c) !== 0n) return false;
  return true;
}

/**
 * Plans and applies changes, up to `parallel` transactions at once; returns a one-line summary
 * for stderr. A run of creates only is sent without listing first (as upstream gazctl sends any
 * apply); when a transaction is refused, the items of the transactions that were not applied
 * are listed then, to name the conflicts as a plan made beforehand would have (the applied ones
 * cannot have conflicted, or they would have been refused).
 */
export async function applyChanges<C, Cur>(
  target: ApplyTarget<C, Cur>,
  changes: C[],
  maxTxnSize: number,
  progress?: (done: number, total: number) => void,
  parallel = 1,
): Promise<{ summary: string; revision: bigint; plan: ApplyPlan<C> }> {
  const creates = allCreates(target.subject as PlanSubject<C, unknown>, changes);
  const plan = creates ? planChanges(changes, [], target.subject) : await planApply(target, changes);
  if (plan.changes.length === 0) return { summary: renderNothingToApply(plan, target.noun), revision: 0n, plan };
  checkMaxTxnSize(maxTxnSize);
  let result: { revision: bigint; batches: number };
  try {
    result = await target.apply(plan.changes, {
      maxTxnSize,
      parallel,
      onBatch: progress ? (b) => progress(b.applied, b.total) : undefined,
    });
  } catch (err) {
    if (err instanceof ApplyError) {
      const explained = creates && err.reason === 'revision-mismatch' ? await conflictsOfUnapplied(target, plan, maxTxnSize, err.appliedBatches) : plan;
      throw explainApplyFailure(err, explained);
    }
    throw err;
  }
  return { summary: renderApplied(plan, result, target.noun), revision: result.revision, plan };
}

/**
 * The plan of the changes of every batch but `appliedBatches` (of the batches --max-txn-size
 * `maxTxnSize` cuts), against a listing made now; `plan` itself when the listing fails (the
 * failure is then explained without naming conflicts).
 */
async function conflictsOfUnapplied<C, Cur>(
  target: ApplyTarget<C, Cur>,
  plan: ApplyPlan<C>,
  maxTxnSize: number,
  appliedBatches: readonly number[],
): Promise<ApplyPlan<C>> {
  const applied = new Set(appliedBatches);
  const unapplied = batchChanges(plan.changes, maxTxnSize).flatMap((batch, i) => (applied.has(i) ? [] : batch));
  try {
    return await planApply(target, unapplied);
  } catch {
    return plan;
  }
}
