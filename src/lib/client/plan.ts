// Apply plans: what each change of an Apply would do given the items' current state, for
// journals and shards alike. The plan drops upserts that would change nothing (so re-applying a
// listing is a no-op) and predicts the revision conflicts the broker's or consumer's
// transaction would refuse; the transaction still checks revisions itself.
import type {
  ApplyRequest_Change as JournalChange,
  LabelSelector,
  ListResponse_Journal,
} from '../protocol/gen/broker/protocol.js';
import type { ApplyRequest_Change as ShardChange, ListResponse_Shard } from '../protocol/gen/consumer/protocol.js';
import { journalSpecToJson, shardSpecToJson } from '../protocol/protojson.js';

/**
 * - `create`: the item must not exist yet (expected revision 0).
 * - `update`: the item must be at the expected revision.
 * - `upsert`: written whatever its revision (expected revision -1).
 * - `delete`: removed (at the expected revision, or at any with -1).
 * - `unchanged`: an upsert whose spec already is the current one at the expected revision; not sent.
 */
export type PlanKind = 'create' | 'update' | 'upsert' | 'delete' | 'unchanged';

export interface PlannedChange<C> {
  /** Journal name or shard ID. */
  name: string;
  kind: PlanKind;
  expectModRevision: bigint;
  /**
   * Why the transaction will refuse this change, when the listing already shows it:
   * "already exists at revision N", "does not exist" or "is at revision N".
   */
  conflict?: string;
  /** The change itself. */
  change: C;
}

export interface ApplyPlan<C> {
  /** One entry per input change, in input order. */
  entries: PlannedChange<C>[];
  /** The changes to send (every entry but the unchanged ones), in input order. */
  changes: C[];
  /** Number of unchanged entries. */
  unchanged: number;
  /** The entries with a predicted conflict. */
  conflicts: PlannedChange<C>[];
}

/** How to read one kind of item (journal or shard) for planning. */
export interface PlanSubject<C, Cur> {
  /** The name (or ID) a change is about. */
  changeName(c: C): string;
  expectModRevision(c: C): bigint;
  /** Whether the change is an upsert (else a delete). */
  isUpsert(c: C): boolean;
  /** The spec of an upsert as canonical text (asked only when there is a current spec to compare with). */
  upsertText(c: C): string;
  /** Whether an unchanged spec is still worth sending (e.g. it carries other writes). */
  alwaysSend?(c: C): boolean;
  currentName(cur: Cur): string;
  currentRevision(cur: Cur): bigint;
  currentText(cur: Cur): string;
}

/**
 * Classifies `changes` against `current` (a listing that includes every item they name; extra
 * items are ignored). Linear in the number of changes plus listed items.
 */
export function planChanges<C, Cur>(changes: readonly C[], current: Iterable<Cur>, subject: PlanSubject<C, Cur>): ApplyPlan<C> {
  const byName = new Map<string, Cur>();
  for (const cur of current) byName.set(subject.currentName(cur), cur);
  const plan: ApplyPlan<C> = { entries: [], changes: [], unchanged: 0, conflicts: [] };
  for (const change of changes) {
    const name = subject.changeName(change);
    const expect = subject.expectModRevision(change);
    const cur = byName.get(name);
    const curRevision = cur === undefined ? undefined : subject.currentRevision(cur);
    const upsert = subject.isUpsert(change);

    // Specs are rendered only to compare with an existing item at the expected revision, so a
    // run of creates costs no rendering at all.
    if (upsert && cur !== undefined && (expect === -1n || expect === curRevision) && !subject.alwaysSend?.(change)) {
      if (subject.upsertText(change) === subject.currentText(cur)) {
        plan.unchanged++;
        plan.entries.push({ name, kind: 'unchanged', expectModRevision: expect, change });
        continue;
      }
    }
    let conflict: string | undefined;
    if (expect === 0n && curRevision !== undefined) conflict = `already exists at revision ${curRevision}`;
    else if (expect > 0n && curRevision === undefined) conflict = 'does not exist';
    else if (expect > 0n && curRevision !== expect) conflict = `is at revision ${curRevision}`;

    const kind: PlanKind = !upsert ? 'delete' : expect === 0n ? 'create' : expect === -1n ? 'upsert' : 'update';
    const entry: PlannedChange<C> = conflict === undefined ? { name, kind, expectModRevision: expect, change } : { name, kind, expectModRevision: expect, conflict, change };
    plan.entries.push(entry);
    plan.changes.push(change);
    if (conflict !== undefined) plan.conflicts.push(entry);
  }
  return plan;
}

/** Journals: named by `name`, compared by the proto-JSON of their spec. */
export const journalPlanSubject: PlanSubject<JournalChange, ListResponse_Journal> = {
  changeName: (c) => (c.upsert ? c.upsert.name : c.delete),
  expectModRevision: (c) => c.expect_mod_revision,
  isUpsert: (c) => c.upsert !== undefined,
  upsertText: (c) => journalSpecToJson(c.upsert),
  currentName: (j) => j.spec?.name ?? '',
  currentRevision: (j) => j.mod_revision,
  currentText: (j) => journalSpecToJson(j.spec),
};

/**
 * Shards: named by `id`, compared by the proto-JSON of their spec. An upsert that also writes
 * primary hints is always sent, since the listing does not show hints.
 */
export const shardPlanSubject: PlanSubject<ShardChange, ListResponse_Shard> = {
  changeName: (c) => (c.upsert ? c.upsert.id : c.delete),
  expectModRevision: (c) => c.expect_mod_revision,
  isUpsert: (c) => c.upsert !== undefined,
  upsertText: (c) => shardSpecToJson(c.upsert),
  alwaysSend: (c) => c.primary_hints !== undefined,
  currentName: (s) => s.spec?.id ?? '',
  currentRevision: (s) => s.mod_revision,
  currentText: (s) => shardSpecToJson(s.spec),
};

/** Plans journal changes against a journal listing. */
export function planJournalChanges(changes: readonly JournalChange[], current: Iterable<ListResponse_Journal>): ApplyPlan<JournalChange> {
  return planChanges(changes, current, journalPlanSubject);
}

/** Plans shard changes against a shard listing. */
export function planShardChanges(changes: readonly ShardChange[], current: Iterable<ListResponse_Shard>): ApplyPlan<ShardChange> {
  return planChanges(changes, current, shardPlanSubject);
}

/**
 * The one selector whose listing covers every name: `<label>:prefix=` their longest common
 * prefix that ends in "/" (everything when there is none). `label` is "name" for journals and
 * "id" for shards.
 */
export function planSelector(names: readonly string[], label: 'name' | 'id'): LabelSelector {
  const prefix = commonDirPrefix(names);
  return {
    include: { labels: prefix ? [{ name: label, value: prefix, prefix: true }] : [] },
    exclude: { labels: [] },
  };
}

/** Longest common prefix of the names that ends in "/" ("" when there is none). */
export function commonDirPrefix(names: readonly string[]): string {
  if (names.length === 0) return '';
  let p = names[0]!;
  for (const n of names) {
    if (n.startsWith(p)) continue;
    let i = 0;
    const max = Math.min(p.length, n.length);
    while (i < max && p.charCodeAt(i) === n.charCodeAt(i)) i++;
    p = p.slice(0, i);
    if (p === '') break;
  }
  return p.slice(0, p.lastIndexOf('/') + 1);
}
