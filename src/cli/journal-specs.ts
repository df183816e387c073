// YAML → validated journal changes, shared by `journals apply` and `journals edit`.
import type { ApplyRequest_Change, LabelSelector, ListResponse } from '../lib/protocol/gen/broker/protocol.js';
import { decodeJournalTree, flattenJournalTree, validateJournalTree } from '../lib/journalspace/journalspace.js';
import { validateJournalApplyRequest } from '../lib/protocol/validate/index.js';
import { ValidationError } from '../lib/protocol/errors.js';
import { ApplyError } from '../lib/client/apply.js';
import { batchChanges } from '../lib/client/batch.js';
import { journalPlanSubject, planJournalChanges, planSelector, type ApplyPlan } from '../lib/client/plan.js';
import { checkMaxTxnSize, explainApplyFailure, renderApplied, renderNothingToApply } from './apply.js';
import type { JournalClient } from '../lib/client/journal-client.js';

/** Decodes, validates and flattens a journal hierarchy; any problem is one ValidationError. */
export function journalChangesFromYaml(text: string, source: string): ApplyRequest_Change[] {
  let changes: ApplyRequest_Change[];
  try {
    const tree = decodeJournalTree(text);
    validateJournalTree(tree);
    // The tree is dropped after this, so the changes may take its specs over; and its shape
    // check has validated every terminal's name, which the request check need not repeat.
    changes = flattenJournalTree(tree, { adoptSpecs: true });
    validateJournalApplyRequest({ changes }, { namesValidated: true });
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.message, source);
    throw err;
  }
  return changes;
}

/** Lists the journals the changes name (one listing) and plans the changes against them. */
export async function planJournalApply(
  changes: ApplyRequest_Change[],
  list: (selector: LabelSelector) => Promise<ListResponse>,
): Promise<ApplyPlan<ApplyRequest_Change>> {
  const names = changes.map(journalPlanSubject.changeName);
  const listing = await list(planSelector(names, 'name'));
  return planJournalChanges(changes, listing.journals);
}

/**
 * Whether every change creates a journal (an upsert expecting revision 0). Such a run needs no
 * listing to plan it: a create is never "unchanged", so every change is sent whatever exists,
 * and what the listing would add (the names that already exist) matters only to explain a
 * refused transaction.
 */
function allCreates(changes: readonly ApplyRequest_Change[]): boolean {
  for (const c of changes) if (c.upsert === undefined || c.expect_mod_revision !== 0n) return false;
  return true;
}

/**
 * Plans and applies journal changes, up to `parallel` transactions at once; returns a one-line
 * summary for stderr. A run of creates only is sent without listing first (as upstream gazctl
 * sends any apply); when a transaction is refused, the journals of the transactions that were
 * not applied are listed then, to name the conflicts as a plan made beforehand would have (the
 * applied ones cannot have conflicted, or they would have been refused).
 */
export async function applyJournalChanges(
  client: Pick<JournalClient, 'list' | 'apply'>,
  changes: ApplyRequest_Change[],
  maxTxnSize: number,
  progress?: (done: number, total: number) => void,
  parallel = 1,
): Promise<{ summary: string; revision: bigint }> {
  const creates = allCreates(changes);
  const plan = creates ? planJournalChanges(changes, []) : await planJournalApply(changes, (sel) => client.list(sel));
  if (plan.changes.length === 0) return { summary: renderNothingToApply(plan, 'journal'), revision: 0n };
  checkMaxTxnSize(maxTxnSize);
  let result: { revision: bigint; batches: number };
  try {
    result = await client.apply(plan.changes, {
      maxTxnSize,
      parallel,
      onBatch: progress ? (b) => progress(b.applied, b.total) : undefined,
    });
  } catch (err) {
    if (err instanceof ApplyError) {
      const explained = creates && err.reason === 'revision-mismatch' ? await conflictsOfUnapplied(client, plan, maxTxnSize, err.appliedBatches) : plan;
      throw explainApplyFailure(err, explained);
    }
    throw err;
  }
  return { summary: renderApplied(plan, result, 'journal'), revision: result.revision };
}

/**
 * The plan of the changes of every batch but `appliedBatches` (of the batches --max-txn-size
 * `maxTxnSize` cuts), against a listing made now; `plan` itself when the listing fails (the
 * failure is then explained without naming conflicts).
 */
async function conflictsOfUnapplied(
  client: Pick<JournalClient, 'list'>,
  plan: ApplyPlan<ApplyRequest_Change>,
  maxTxnSize: number,
  appliedBatches: readonly number[],
): Promise<ApplyPlan<ApplyRequest_Change>> {
  const applied = new Set(appliedBatches);
  const unapplied = batchChanges(plan.changes, maxTxnSize).flatMap((batch, i) => (applied.has(i) ? [] : batch));
  try {
    return await planJournalApply(unapplied, (sel) => client.list(sel));
  } catch {
    return plan;
  }
}
