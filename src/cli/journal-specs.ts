// YAML → validated journal changes, shared by `journals apply` and `journals edit`.
import type { ApplyRequest_Change, LabelSelector, ListResponse, ListResponse_Journal } from '../lib/protocol/gen/broker/protocol.js';
import { journalSpecToJson } from '../lib/protocol/protojson.js';
import { decodeJournalTree, flattenJournalTree, validateJournalTree } from '../lib/journalspace/journalspace.js';
import { validateJournalApplyRequest } from '../lib/protocol/validate/index.js';
import { GazctlError, ValidationError } from '../lib/protocol/errors.js';
import { applyInBatches, type PlannedChange } from './apply.js';

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

/** Longest common prefix of the names that ends in "/" ("" when there is none). */
function commonDirPrefix(names: string[]): string {
  if (names.length === 0) return '';
  let p = names[0]!;
  for (const n of names) {
    while (!n.startsWith(p)) p = p.slice(0, -1);
  }
  return p.slice(0, p.lastIndexOf('/') + 1);
}

export interface ClassifiedChanges {
  /** Changes to send. */
  changes: ApplyRequest_Change[];
  plan: PlannedChange[];
  unchanged: number;
}

/**
 * Compares the changes with the journals' current state: an upsert whose spec already equals
 * the current spec, at the expected revision, is dropped as unchanged (so re-applying a listing
 * is a no-op). Everything else is sent, and the broker's transaction still checks revisions.
 */
export async function classifyJournalChanges(
  changes: ApplyRequest_Change[],
  list: (selector: LabelSelector) => Promise<ListResponse>,
): Promise<ClassifiedChanges> {
  const names = changes.map((c) => (c.upsert ? c.upsert.name : c.delete));
  const prefix = commonDirPrefix(names);
  const selector: LabelSelector = {
    include: { labels: prefix ? [{ name: 'name', value: prefix, prefix: true }] : [] },
    exclude: { labels: [] },
  };
  const current = new Map<string, ListResponse_Journal>();
  for (const j of (await list(selector)).journals) current.set(j.spec!.name, j);

  const out: ClassifiedChanges = { changes: [], plan: [], unchanged: 0 };
  for (const c of changes) {
    const name = c.upsert ? c.upsert.name : c.delete;
    const cur = current.get(name);
    const revisionOk = c.expect_mod_revision === -1n || (cur !== undefined && cur.mod_revision === c.expect_mod_revision);
    if (c.upsert && cur && revisionOk && journalSpecToJson(cur.spec) === journalSpecToJson(c.upsert)) {
      out.unchanged++;
      out.plan.push({ name, kind: 'unchanged', expectModRevision: c.expect_mod_revision });
      continue;
    }
    let conflict: string | undefined;
    if (c.expect_mod_revision === 0n && cur) conflict = `already exists at revision ${cur.mod_revision}`;
    else if (c.expect_mod_revision > 0n && !cur) conflict = 'does not exist';
    else if (c.expect_mod_revision > 0n && cur && cur.mod_revision !== c.expect_mod_revision) {
      conflict = `is at revision ${cur.mod_revision}`;
    }
    out.changes.push(c);
    out.plan.push({ name, kind: c.upsert ? 'upsert' : 'delete', expectModRevision: c.expect_mod_revision, conflict });
  }
  return out;
}

/** Classifies and applies journal changes; returns a one-line summary for stderr. */
export async function applyJournalChanges(
  client: { list(sel: LabelSelector): Promise<ListResponse>; apply(c: ApplyRequest_Change[]): Promise<{ header?: { etcd?: { revision: bigint } } }> },
  changes: ApplyRequest_Change[],
  maxTxnSize: number,
  progress?: (done: number, total: number) => void,
): Promise<{ summary: string; revision: bigint }> {
  const classified = await classifyJournalChanges(changes, (sel) => client.list(sel));
  if (classified.changes.length === 0) {
    return { summary: `nothing to apply: ${classified.unchanged} journal${classified.unchanged === 1 ? '' : 's'} unchanged`, revision: 0n };
  }
  let applied: { revision: bigint; batches: number };
  try {
    applied = await applyInBatches(
      classified.changes,
      maxTxnSize,
      async (batch) => (await client.apply(batch)).header?.etcd?.revision ?? 0n,
      progress,
    );
  } catch (err) {
    const conflicts = classified.plan.filter((p) => p.conflict);
    if (err instanceof GazctlError && conflicts.length > 0 && /revision does not match/.test(err.message)) {
      const named = conflicts.slice(0, 3).map((p) => `${p.name} ${p.conflict}`);
      if (conflicts.length > 3) named.push(`and ${conflicts.length - 3} more`);
      err.message = `${err.message} Conflicts: ${named.join('; ')}.`;
    }
    throw err;
  }
  const { revision, batches } = applied;
  const n = classified.changes.length;
  let summary = `applied ${n} journal change${n === 1 ? '' : 's'} in ${batches} transaction${batches === 1 ? '' : 's'} (etcd revision ${revision})`;
  if (classified.unchanged) summary += `; ${classified.unchanged} unchanged`;
  return { summary, revision };
}
