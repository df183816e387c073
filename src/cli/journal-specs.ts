// YAML → validated journal changes, shared by `journals apply` and `journals edit`.
import type { ApplyRequest_Change, LabelSelector, ListResponse, ListResponse_Journal } from '../lib/protocol/gen/broker/protocol.js';
import { decodeJournalTree, flattenJournalTree, validateJournalTree } from '../lib/journalspace/journalspace.js';
import { validateJournalApplyRequest } from '../lib/protocol/validate/index.js';
import { ValidationError } from '../lib/protocol/errors.js';
import { journalPlanSubject, type ApplyPlan } from '../lib/client/plan.js';
import { applyChanges, planApply, type ApplyTarget } from './apply.js';
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

/** Journals through a JournalClient, for the shared plan and apply path (src/cli/apply.ts). */
function journalTarget(client: Pick<JournalClient, 'list'> & Partial<Pick<JournalClient, 'apply'>>): ApplyTarget<ApplyRequest_Change, ListResponse_Journal> {
  return {
    subject: journalPlanSubject,
    label: 'name',
    noun: 'journal',
    list: async (sel) => (await client.list(sel)).journals,
    apply: (changes, opts) => client.apply!(changes, opts),
  };
}

/** Lists the journals the changes name (one listing) and plans the changes against them. */
export function planJournalApply(
  changes: ApplyRequest_Change[],
  list: (selector: LabelSelector) => Promise<ListResponse>,
): Promise<ApplyPlan<ApplyRequest_Change>> {
  return planApply(journalTarget({ list }), changes);
}

/**
 * Plans and applies journal changes, up to `parallel` transactions at once; returns a one-line
 * summary for stderr (see applyChanges: a run of creates only is sent without listing first).
 */
export function applyJournalChanges(
  client: Pick<JournalClient, 'list' | 'apply'>,
  changes: ApplyRequest_Change[],
  maxTxnSize: number,
  progress?: (done: number, total: number) => void,
  parallel = 1,
): ReturnType<typeof applyChanges<ApplyRequest_Change, unknown>> {
  return applyChanges(journalTarget(client), changes, maxTxnSize, progress, parallel);
}
