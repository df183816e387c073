// Shard sets for `shards apply` and `shards edit`, and listings for `shards list`: YAML →
// validated changes whose journals were checked, the shared plan and apply path (src/cli/apply.ts)
// over a ShardClient, and the table of a listing.
import type { ApplyRequest_Change, ListResponse, ListResponse_Shard } from '../lib/protocol/gen/consumer/protocol.js';
import type { ShardSummary } from '../lib/protocol/fast-decode.js';
import { ReplicaStatus_Code } from '../lib/protocol/gen/consumer/protocol.js';
import { buildShardApplyRequest, decodeShardSet } from '../lib/shardspace/shardspace.js';
import { ValidationError } from '../lib/protocol/errors.js';
import { shardPlanSubject, type ApplyPlan } from '../lib/client/plan.js';
import { verifyReferencedJournals } from '../lib/client/referenced-journals.js';
import { reduceShardStatus, replicaStatusName } from '../lib/protocol/replica-status.js';
import { labelValues } from '../lib/protocol/labels.js';
import type { JournalClient } from '../lib/client/journal-client.js';
import type { ShardClient } from '../lib/client/shard-client.js';
import { applyChanges, planApply, type ApplyTarget } from './apply.js';
import { renderTable } from './render.js';

/** Decodes, validates and flattens a shard set; any problem is one ValidationError naming `source`. */
export function shardChangesFromYaml(text: string, source: string): ApplyRequest_Change[] {
  try {
    return buildShardApplyRequest(decodeShardSet(text)).changes;
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.message, source);
    throw err;
  }
}

/**
 * Checks the journals the changes name (source journals with a message framing, recovery logs)
 * through the brokers, as upstream does before any apply or dry run: a ReferencedJournalError
 * names the first shard and journal at fault.
 */
export function checkShardJournals(changes: readonly ApplyRequest_Change[], journals: Pick<JournalClient, 'list'>): Promise<void> {
  return verifyReferencedJournals(changes, (sel) => journals.list(sel));
}

function shardTarget(client: Pick<ShardClient, 'list'> & Partial<Pick<ShardClient, 'apply'>>): ApplyTarget<ApplyRequest_Change, ListResponse_Shard> {
  return {
    subject: shardPlanSubject,
    label: 'id',
    noun: 'shard',
    list: async (sel) => (await client.list(sel)).shards,
    apply: (changes, opts) => client.apply!(changes, opts),
  };
}

/** Lists the shards the changes name (one listing) and plans the changes against them. */
export function planShardApply(changes: ApplyRequest_Change[], client: Pick<ShardClient, 'list'>): Promise<ApplyPlan<ApplyRequest_Change>> {
  return planApply(shardTarget(client), changes);
}

/**
 * Plans and applies shard changes, up to `parallel` transactions at once; returns a one-line
 * summary for stderr (see applyChanges: a run of creates only is sent without listing first).
 */
export function applyShardChanges(
  client: Pick<ShardClient, 'list' | 'apply'>,
  changes: ApplyRequest_Change[],
  maxTxnSize: number,
  progress?: (done: number, total: number) => void,
  parallel = 1,
): ReturnType<typeof applyChanges<ApplyRequest_Change, unknown>> {
  return applyChanges(shardTarget(client), changes, maxTxnSize, progress, parallel);
}

// ---- the table of `shards list` ----------------------------------------------------------------

export interface ShardTableColumns {
  rf: boolean;
  primary: boolean;
  replicas: boolean;
  labels: readonly string[];
  /** The Lag cell of each shard (by id), when --lag is given. */
  lag?: ReadonlyMap<string, string>;
  /** The Backlog Age cell of each shard (by id), when --lag is given. */
  age?: ReadonlyMap<string, string>;
}

/** Longest error text a Status cell shows, in characters (-o json has them whole). */
const MAX_ERROR_CHARS = 200;

/**
 * The Status cell: the reduced status of the route members. A FAILED shard also shows its
 * errors (one line, each at most 200 characters), which upstream's table leaves out.
 */
export function statusCell(shard: Pick<ListResponse_Shard, 'route' | 'status'>): string {
  const s = reduceShardStatus(shard);
  const name = replicaStatusName(s.code);
  if (s.code !== ReplicaStatus_Code.FAILED || s.errors.length === 0) return name;
  const errors = [...new Set(s.errors.map((e) => e.replace(/\s+/g, ' ').trim()))].map((e) =>
    [...e].length > MAX_ERROR_CHARS ? [...e].slice(0, MAX_ERROR_CHARS - 1).join('') + '…' : e,
  );
  return `${name}: ${errors.join('; ')}`;
}

/** The shards table: ID, Status, then RF, Primary, Replicas, label columns and Lag as asked. */
export function renderShardTable(resp: { shards: readonly ShardSummary[] }, cols: ShardTableColumns): string {
  const headers = ['ID', 'Status'];
  if (cols.rf) headers.push('RF');
  if (cols.primary) headers.push('Primary');
  if (cols.replicas) headers.push('Replicas');
  headers.push(...cols.labels);
  if (cols.lag) headers.push('Lag');
  if (cols.age) headers.push('Backlog Age');
  const rows = resp.shards.map((sh) => {
    const spec = sh.spec!;
    const members = sh.route?.members ?? [];
    const primaryIndex = sh.route?.primary ?? -1;
    let primary = '<none>';
    const replicas: string[] = [];
    members.forEach((m, i) => {
      const code = sh.status[i]?.code ?? ReplicaStatus_Code.IDLE;
      const cell = `${m.suffix}:${replicaStatusName(code)}`;
      if (i === primaryIndex) primary = cell;
      else replicas.push(cell);
    });
    const row = [spec.id, statusCell(sh)];
    if (cols.rf) row.push(String(spec.disable ? 0 : spec.hot_standbys + 1));
    if (cols.primary) row.push(primary);
    if (cols.replicas) row.push(replicas.join(','));
    for (const l of cols.labels) {
      const vs = labelValues(spec.labels, l);
      row.push(vs.length ? vs.join(',') : '<none>');
    }
    if (cols.lag) row.push(cols.lag.get(spec.id) ?? '');
    if (cols.age) row.push(cols.age.get(spec.id) ?? '');
    return row;
  });
  return renderTable(headers, rows);
}
