// The journals that shard specs name must exist before the specs are applied, as upstream's
// tools check too: every source journal, with a content-type whose message framing consumers
// know how to read, and the recovery log (`<recovery_log_prefix>/<id>`), labelled as one. A
// consumer would otherwise accept the spec and then fail the shard at run time.
import type { LabelSelector, ListResponse, ListResponse_Journal } from '../protocol/gen/broker/protocol.js';
import type { ApplyRequest_Change } from '../protocol/gen/consumer/protocol.js';
import { ValidationError } from '../protocol/errors.js';
import {
  CONTENT_TYPE_CSV,
  CONTENT_TYPE_JSON_LINES,
  CONTENT_TYPE_PROTO_FIXED,
  CONTENT_TYPE_RECOVERY_LOG,
  LABEL_CONTENT_TYPE,
  META_LABEL_NAME,
  compareStrings,
  labelValue,
} from '../protocol/labels.js';

/** Content types of journals a consumer can read messages from (the framings Gazette registers). */
export const FRAMED_CONTENT_TYPES: readonly string[] = [CONTENT_TYPE_JSON_LINES, CONTENT_TYPE_PROTO_FIXED, CONTENT_TYPE_CSV];

/** Names per listing: a selector of this many names stays far below any message limit. */
const NAMES_PER_LISTING = 500;

/** A shard spec names a journal that is missing or of the wrong kind. */
export class ReferencedJournalError extends ValidationError {
  constructor(
    readonly shard: string,
    readonly journal: string,
    readonly role: 'source' | 'recovery log',
    readonly problem: string,
  ) {
    super(`shard ${JSON.stringify(shard)}: ${role} journal ${JSON.stringify(journal)} ${problem}`);
  }
}

interface Reference {
  shard: string;
  /** As the spec writes it (a source may carry a `;suffix`). */
  journal: string;
  /** The journal itself, without a `;suffix`. */
  name: string;
  role: 'source' | 'recovery log';
}

/** The journals the upserts of `changes` name, in change order: each shard's sources, then its recovery log. */
export function referencedJournals(changes: readonly ApplyRequest_Change[]): Reference[] {
  const refs: Reference[] = [];
  for (const c of changes) {
    const spec = c.upsert;
    if (!spec) continue;
    for (const src of spec.sources) refs.push({ shard: spec.id, journal: src.journal, name: stripMeta(src.journal), role: 'source' });
    if (spec.recovery_log_prefix !== '') {
      const log = `${spec.recovery_log_prefix}/${spec.id}`;
      refs.push({ shard: spec.id, journal: log, name: stripMeta(log), role: 'recovery log' });
    }
  }
  return refs;
}

function stripMeta(journal: string): string {
  const semi = journal.indexOf(';');
  return semi === -1 ? journal : journal.slice(0, semi);
}

/** The one problem of a reference, given the listed journal (undefined: it does not exist). */
function problemOf(ref: Reference, listed: ListResponse_Journal | undefined): string | undefined {
  if (!listed) return 'does not exist';
  const ct = labelValue(listed.spec?.labels, LABEL_CONTENT_TYPE);
  if (ref.role === 'source') {
    if (ct !== undefined && FRAMED_CONTENT_TYPES.includes(ct)) return undefined;
    const want = `a source needs one of ${FRAMED_CONTENT_TYPES.join(', ')}`;
    return ct === undefined || ct === '' ? `has no ${LABEL_CONTENT_TYPE} label (${want})` : `has ${LABEL_CONTENT_TYPE} ${ct}, which is not a message framing (${want})`;
  }
  if (ct === CONTENT_TYPE_RECOVERY_LOG) return undefined;
  const want = `expected ${LABEL_CONTENT_TYPE} ${CONTENT_TYPE_RECOVERY_LOG}`;
  return ct === undefined || ct === '' ? `has no ${LABEL_CONTENT_TYPE} label (${want})` : `has ${LABEL_CONTENT_TYPE} ${ct} (${want})`;
}

/**
 * Checks every journal the upserts of `changes` name (deletes name none): throws a
 * ReferencedJournalError for the first problem in change order, naming the shard and the
 * journal. The journals are looked up with `list` (a broker's List), a few hundred names per
 * listing, each name once.
 */
export async function verifyReferencedJournals(
  changes: readonly ApplyRequest_Change[],
  list: (selector: LabelSelector) => Promise<Pick<ListResponse, 'journals'>>,
): Promise<void> {
  const refs = referencedJournals(changes);
  if (refs.length === 0) return;
  const names = [...new Set(refs.map((r) => r.name))].sort(compareStrings);
  const found = new Map<string, ListResponse_Journal>();
  for (let i = 0; i < names.length; i += NAMES_PER_LISTING) {
    const chunk = names.slice(i, i + NAMES_PER_LISTING);
    // Values of one include label are alternatives: this lists exactly the named journals.
    const selector: LabelSelector = {
      include: { labels: chunk.map((value) => ({ name: META_LABEL_NAME, value, prefix: false })) },
      exclude: { labels: [] },
    };
    const resp = await list(selector);
    for (const j of resp.journals) if (j.spec) found.set(j.spec.name, j);
  }
  for (const ref of refs) {
    const problem = problemOf(ref, found.get(ref.name));
    if (problem !== undefined) throw new ReferencedJournalError(ref.shard, ref.journal, ref.role, problem);
  }
}
