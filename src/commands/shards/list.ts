import { setTimeout as sleep } from 'node:timers/promises';
import { GazctlCommand, shardsBaseFlags } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { formatOption } from '../../cli/render.js';
import { booleanOption, listOption, oclifFlags, options, type OptionValues, type OptionSet } from '../../cli/options.js';
import { renderShardTable } from '../../cli/shard-specs.js';
import { mapLimit } from '../../lib/concurrency.js';
import { shardLag, type JournalLag } from '../../lib/client/shard-lag.js';
import { formatBacklogAge } from '../../lib/client/backlog-age.js';
import { formatGoDuration } from '../../lib/protocol/duration.js';
import { shardListResponseToJson, shardSpecToJson } from '../../lib/protocol/protojson.js';
import { routeToJson, replicaStatusToJson } from '../../lib/protocol/protojson.js';
import { encodeShardSetBytes, shardSetFromListing } from '../../lib/shardspace/shardspace.js';
import type { ListResponse } from '../../lib/protocol/gen/consumer/protocol.js';
import type { ShardSummaryList } from '../../lib/protocol/fast-decode.js';
import type { JournalClient } from '../../lib/client/journal-client.js';
import type { ShardClient } from '../../lib/client/shard-client.js';

const OPTIONS = options({
  selector: selector(false, { field: 'Selector' }, 'shards'),
  format: formatOption(['table', 'yaml', 'json']),
  'label-columns': listOption({ char: 'L', description: 'Add a column with the values of this label (repeatable).', ini: { field: 'Labels' } }),
  primary: booleanOption({ char: 'p', description: 'Show the primary consumer of each shard, with its status.', ini: { field: 'Primary' } }),
  replicas: booleanOption({ char: 'r', description: 'Show the standby consumers of each shard, with their statuses.', ini: { field: 'Replicas' } }),
  rf: booleanOption({ description: 'Show the replication factor (hot standbys + 1; 0 when disabled).', ini: { field: 'RF' } }),
  lag: booleanOption({ description: 'Show how far each shard trails its journals (bytes: write head minus read-through offset) and how old its oldest unread message is (Backlog Age). One Stat and up to two reads per journal: use a focused --selector.', ini: { field: 'Lag' } }),
  // Ours: upstream's shards list has no --watch. The consumer List has no watch, so it polls.
  watch: booleanOption({ description: 'Print the listing again whenever it changes (polled every second), until interrupted.', ini: null }),
});
type ListOptions = OptionValues<typeof OPTIONS>;

/** How often --watch lists the shards. */
const WATCH_INTERVAL_MS = 1000;
/** Shards whose lag is fetched at once. */
const LAG_CONCURRENCY = 8;

export default class ShardsList extends GazctlCommand {
  static override summary = 'List shards with their status, routes and settings.';
  static override description = `Lists the shards matching a label selector (shards also match the meta-label "id", e.g. -l "id in (shard-12, shard-34)" or -l id:prefix=acme-).

The table shows each shard's ID and Status: the most advanced status of its consumers (IDLE, BACKFILL, STANDBY, PRIMARY, FAILED; IDLE when none is assigned). A FAILED shard also shows its errors there. On request it adds RF, Primary and Replicas (consumer:STATUS), label columns and, last, Lag: for each journal the shard reads, the bytes between what the shard has read through and the journal's write head. --lag asks each shard's primary and a broker per journal: keep the selector focused.

With --lag a Backlog Age column follows Lag: for each journal, how long ago the oldest message the shard has not read through (as of its last committed transaction) was published. That is the clock of the message UUID at the shard's read-through offset, for NDJSON messages with a "UUID" field as Gazette's Go applications write them, or CSV records with the UUID first: "0s" when nothing is unread; ">=<age>" when the message has no UUID, a bound from the modification time of the persisted fragment holding it; "-" when neither is known (a fragment not yet persisted). Upstream has no such column.

-o yaml prints the shard set that "shards apply" and "shards edit" accept (fields shared by all shards hoisted into "common", with revisions, so re-applying it is a no-op and a concurrent change is refused). -o json prints the whole List response as proto3 JSON; with --lag (ours) each shard gains "lag": [{"journal","read_through","write_head","lag","backlog_age_seconds","backlog_age_bound"}], offsets as strings, the age in whole seconds with its bound "exact" or "at-least" (null and null when unknown).

With --watch the listing is printed again whenever it changes, until interrupted (Ctrl-C ends with status 0).`;
  static override examples = [
    { description: 'All shards with their primary and standbys', command: '<%= config.bin %> shards list -p -r --rf' },
    { description: 'Shards of an application with a label column and their lag', command: '<%= config.bin %> shards list -l app=word-count -L app --lag' },
    { description: 'Specific shards by ID', command: '<%= config.bin %> shards list -l "id in (shard-000, shard-001)"' },
    { description: 'The shard set as YAML, for editing and re-applying', command: '<%= config.bin %> shards list -l app=word-count -o yaml > shards.yaml' },
    { description: 'Keep watching the statuses', command: '<%= config.bin %> shards list -p -r --watch' },
    { description: 'Backlog ages for an alert', command: '<%= config.bin %> shards list -l app=word-count --lag -o json | jq \'.shards[].lag[] | select(.backlog_age_seconds > 300)\'' },
  ];
  static override group = 'shards' as const;
  static override baseFlags = shardsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const shards = this.shardClient();
    // --lag reads journals through the brokers: only then is a broker client made.
    const journals = flags.lag && flags.format !== 'yaml' ? this.journalClient() : undefined;
    try {
      if (!flags.watch) {
        const resp = await this.fetch(flags, shards);
        process.stdout.write(await this.render(resp, flags, shards, journals));
        return;
      }
      await this.watch(flags, shards, journals);
    } finally {
      shards.close();
      journals?.close();
    }
  }

  /** Lists every second; prints a listing when its shards (or their lag) differ from the last one printed. */
  private async watch(flags: ListOptions, shards: ShardClient, journals: JournalClient | undefined): Promise<void> {
    const ac = new AbortController();
    const stop = () => ac.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    let last: string | undefined;
    try {
      while (!ac.signal.aborted) {
        const resp = await shards.list(flags.selector, { signal: ac.signal });
        const text = await this.render(resp, flags, shards, journals, ac.signal);
        if (ac.signal.aborted) break;
        // The response header (etcd revision) moves with any write to etcd: only the shards count.
        const key = flags.format === 'table' ? (text as string) : listingKey(resp);
        if (key !== last) {
          last = key;
          process.stdout.write(flags.format === 'json' ? `${text as string}\n` : text);
        }
        await sleep(WATCH_INTERVAL_MS, undefined, { signal: ac.signal });
      }
    } catch (err) {
      if (!ac.signal.aborted) throw err;
    } finally {
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
    }
  }

  /** The listing: a table needs only a few fields of each spec, so it gets them alone (summaries). */
  private fetch(flags: ListOptions, shards: ShardClient, signal?: AbortSignal): Promise<ListResponse | ShardSummaryList> {
    const opts = signal ? { signal } : {};
    if (flags.format === 'table') return shards.listSummaries(flags.selector, { labels: flags['label-columns'].length > 0 }, opts);
    return shards.list(flags.selector, opts);
  }

  /** The lag and backlog age of each shard of `ids`, a few shards at a time. */
  private async lags(ids: string[], shards: ShardClient, journals: JournalClient, signal?: AbortSignal): Promise<Map<string, JournalLag[]>> {
    const lags = await mapLimit(ids, LAG_CONCURRENCY, (id) => shardLag(shards, journals, id, { signal, age: true }));
    return new Map(ids.map((id, i) => [id, lags[i]!]));
  }

  /** The listing as the output shows it: text, or (YAML) its UTF-8 bytes, written as they are. */
  private async render(resp: ListResponse | ShardSummaryList, flags: ListOptions, shards: ShardClient, journals: JournalClient | undefined, signal?: AbortSignal): Promise<string | Uint8Array> {
    if (flags.format !== 'table') {
      const full = resp as ListResponse;
      if (flags.format === 'json') {
        const text = shardListResponseToJson(full);
        return journals ? withLag(text, await this.lags(full.shards.map((sh) => sh.spec!.id), shards, journals, signal)) : text;
      }
      return encodeShardSetBytes(shardSetFromListing(full.shards));
    }
    let lag: Map<string, string> | undefined;
    let age: Map<string, string> | undefined;
    if (journals) {
      const ids = resp.shards.map((s) => s.spec!.id);
      const lags = await this.lags(ids, shards, journals, signal);
      const now = Date.now();
      lag = new Map(ids.map((id) => [id, lags.get(id)!.map((l) => `${l.journal}:${l.lag}`).join(', ')]));
      age = new Map(ids.map((id) => [id, lags.get(id)!.map((l) => `${l.journal}:${formatBacklogAge(l.oldest!, now, formatGoDuration)}`).join(', ')]));
    }
    return renderShardTable(resp, { rf: flags.rf, primary: flags.primary, replicas: flags.replicas, labels: flags['label-columns'], lag, age });
  }
}

/**
 * The List response's proto3 JSON with each shard's lag added (`--lag -o json`, ours): under
 * "lag", per source, {"journal","read_through","write_head","lag","backlog_age_seconds",
 * "backlog_age_bound"}; offsets as strings as elsewhere in the document; the age in whole
 * seconds and its bound "exact" (the message UUID), "at-least" (the fragment's mod time), or
 * both null when unknown; 0 and "exact" when nothing is unread.
 */
function withLag(text: string, lags: ReadonlyMap<string, JournalLag[]>): string {
  const doc = JSON.parse(text) as { shards?: { spec?: { id?: string }; lag?: unknown }[] };
  const now = Date.now();
  for (const sh of doc.shards ?? []) {
    sh.lag = (lags.get(sh.spec?.id ?? '') ?? []).map((l) => {
      const o = l.oldest;
      const known = o !== undefined && o.kind !== 'unknown';
      return {
        journal: l.journal,
        read_through: l.readThrough.toString(),
        write_head: l.writeHead.toString(),
        lag: l.lag.toString(),
        backlog_age_seconds: !known ? null : o.kind === 'none' ? 0 : Math.max(0, Math.floor((now - o.atMs) / 1000)),
        backlog_age_bound: !known ? null : o.kind === 'persisted-by' ? 'at-least' : 'exact',
      };
    });
  }
  return JSON.stringify(doc);
}

/** What a watched listing is compared by: each shard's spec, revisions, route and statuses. */
function listingKey(resp: ListResponse): string {
  return resp.shards
    .map((s) => `${shardSpecToJson(s.spec)}|${s.mod_revision}|${routeToJson(s.route)}|${s.status.map(replicaStatusToJson).join(',')}`)
    .join('\n');
}
