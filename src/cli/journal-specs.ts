// YAML → validated journal changes, shared by `journals apply` and `journals edit`.
import type { ApplyRequest_Change } from '../lib/protocol/gen/broker/protocol.js';
import { decodeJournalTree, flattenJournalTree, validateJournalTree } from '../lib/spec/journalspace.js';
import { validateJournalApplyRequest } from '../lib/protocol/validate.js';
import { ValidationError } from '../lib/protocol/errors.js';
import type { PlannedChange } from './apply.js';

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

export function planOfJournalChanges(changes: ApplyRequest_Change[]): PlannedChange[] {
  return changes.map((c) => ({
    name: c.upsert ? c.upsert.name : c.delete,
    kind: c.upsert ? 'upsert' : 'delete',
    expectModRevision: c.expect_mod_revision,
  }));
}
