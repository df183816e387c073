// YAML → validated journal changes, shared by `journals apply` and `journals edit`.
import type { ApplyRequest_Change, LabelSelector, ListResponse } from '../lib/protocol/gen/broker/protocol.js';
import { decodeJournalTree, flattenJournalTree, validateJournalTree } from '../lib/journalspace/journalspace.js';
import { validateJournalApplyRequest } from '../lib/protocol/validate/index.js';
import { ValidationError } from '../lib/protocol/errors.js';
import { ApplyError } from '../lib/client/apply.js';
import { journalPlanSubject, planJournalChanges, planSelector, type ApplyPlan } from '../lib/client/plan.js';
import { checkMaxTxnSize, explainApplyFailure, renderApplied, renderNothingToApply } from './apply.js';
import type { JournalClient } from '../lib/client/journal-client.js';

/** Decodes, validates and flattens a journal hierarchy; any problem is one ValidationError. */
export function journalChangesFromYaml(text: string, source: string): ApplyRequest_Change[] {
  let changes: ApplyRequest_Change[];
  try {
    const tree = decodeJournalTree(text);
    validateJournalTree(tree);
    changes = flattenJournalTree(tree);
    validateJournalApplyRequest({ changes });
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

/** Plans and applies journal changes; returns a one-line summary for stderr. */
export async function applyJournalChanges(
  client: Pick<JournalClient, 'list' | 'apply'>,
  changes: ApplyRequest_Change[],
  maxTxnSize: number,
  progress?: (done: number, total: number) => void,
): Promise<{ summary: string; revision: bigint }> {
  const plan = await planJournalApply(changes, (sel) => client.list(sel));
  if (plan.changes.length === 0) return { summary: renderNothingToApply(plan, 'journal'), revision: 0n };
  checkMaxTxnSize(maxTxnSize);
  let result: { revision: bigint; batches: number };
  try {
    result = await client.apply(plan.changes, {
      maxTxnSize,
      onBatch: progress ? (b) => progress(b.applied, b.total) : undefined,
    });
  } catch (err) {
    if (err instanceof ApplyError) throw explainApplyFailure(err, plan);
    throw err;
  }
  return { summary: renderApplied(plan, result, 'journal'), revision: result.revision };
}
