import { GazctlCommand, shardsBaseFlags } from '../../cli/base.js';
import { dryRun, selector } from '../../cli/flags.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { renderTable } from '../../cli/render.js';
import { booleanOption, choiceOption, oclifFlags, options, type OptionSet } from '../../cli/options.js';
import { statusCell } from '../../cli/shard-specs.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { UnassignError } from '../../lib/client/shard-client.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';
import { replicaStatusName } from '../../lib/protocol/replica-status.js';
import { replicaStatusToJson, routeToJson } from '../../lib/protocol/protojson.js';
import { ReplicaStatus_Code, type ListResponse_Shard } from '../../lib/protocol/gen/consumer/protocol.js';

const OPTIONS = options({
  // In upstream's order (print-config lists gazctl.ini fields in it).
  failed: booleanOption({ description: 'Only remove FAILED assignments, and only of shards that have one; healthy primaries stay.', ini: { field: 'Failed' } }),
  'dry-run': dryRun(),
  selector: selector(true, { field: 'Selector' }, 'shards'),
  // Ours (upstream asks nothing and prints nothing at the default log level): command line only.
  yes: booleanOption({ char: 'y', description: 'Go ahead without asking (for scripts and cron).', ini: null }),
  format: choiceOption({ char: 'o', choices: ['table', 'json'], default: 'table', showDefault: true, description: 'Output format: table, json.', ini: null }),
});

/** One candidate shard: what the listing said, what will go, and what the consumer answered. */
interface Row {
  shard: ListResponse_Shard;
  /** Members whose assignments the consumer will remove: FAILED ones, and the primary unless --failed. */
  removes: { member: string; why: 'primary' | 'failed' }[];
  result?: 'unassigned' | 'would-unassign' | 'unchanged' | 'failed' | 'not-sent';
}

export default class ShardsUnassign extends GazctlCommand {
  static override summary = 'Remove shard assignments so that the allocator assigns the shards afresh.';
  static override description = `Lists the shards matching --selector and asks the consumers to remove assignments of them: every FAILED assignment, and the primary assignment too (healthy or not) unless --failed is given. The allocator then assigns the shards again, usually within seconds: this restarts a failed shard, or moves a primary elsewhere. With --failed only shards that have a FAILED assignment are touched, and only those assignments go.

The plan (each shard with its current status, its route, and which assignments will be removed) is printed first; then the command asks on a terminal, or takes --yes. --dry-run sends the request as a dry run: the consumer works out which shards it would change and changes nothing, and the answer is printed.

The requests carry up to 100 shards each, one after another; each is one etcd transaction, which fails as a whole if an assignment changed since the consumer read it (run the command again). All of them together must finish within 10 seconds. For each shard the result table shows its status and route before the change and whether it was unassigned. A request that fails stops the run (exit 1): the requests before it took effect, and the result table says which shards were unassigned, which failed and which were not sent.

Exit status 1 also when no shard matches the selector. With --failed, finding no FAILED shard is not an error.

-o json prints one document on stdout: {"dry_run","only_failed","sent","shards":[{"id","route","status","removes","result"}]}; route and status as "shards list -o json" prints them; removes lists the assignments that go, as {"member","why"} (why: primary or failed); result only once sent.`;
  static override examples = [
    { description: 'See what would be unassigned', command: '<%= config.bin %> shards unassign -l app=word-count --dry-run' },
    { description: 'Restart every failed shard, from cron', command: '<%= config.bin %> shards unassign -l app=word-count --failed --yes' },
    { description: 'Move the primary of one shard elsewhere', command: '<%= config.bin %> shards unassign -l id=shard-012' },
    { description: 'The plan and the outcome as JSON', command: '<%= config.bin %> shards unassign -l "id:prefix=acme-" --failed --yes -o json' },
  ];
  static override group = 'shards' as const;
  static override baseFlags = shardsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    checkConfirmFlags({ dryRun: flags['dry-run'], yes: flags.yes });
    const json = flags.format === 'json';
    const onlyFailed = flags.failed;
    const dry = flags['dry-run'];
    const client = this.shardClient();
    try {
      const listing = await client.list(flags.selector);
      if (listing.shards.length === 0) throw new GazctlError(`no shards match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);
      const rows: Row[] = listing.shards
        .filter((s) => !onlyFailed || s.status.some((st) => st.code === ReplicaStatus_Code.FAILED))
        .map((shard) => ({ shard, removes: removals(shard, onlyFailed) }));

      if (rows.length === 0) {
        const n = listing.shards.length;
        if (json) process.stdout.write(resultJson(rows, { dry, onlyFailed, applied: false }));
        else process.stdout.write(`no FAILED assignment among the ${n} shard${n === 1 ? '' : 's'} matched: nothing to unassign\n`);
        return;
      }
      if (!json) process.stdout.write(renderTable(['ID', 'Status', 'Route', 'Will Remove'], rows.map(planCells)));

      const go =
        dry ||
        (await confirmDestructive({
          question: `Unassign ${rows.length} shard${rows.length === 1 ? '' : 's'} (remove ${onlyFailed ? 'their FAILED assignments' : 'their primary and FAILED assignments'})?`,
          yes: flags.yes,
          dryRun: false,
          action: 'unassign shards',
        }));
      if (!go) {
        if (json) process.stdout.write(resultJson(rows, { dry, onlyFailed, applied: false }));
        else process.stdout.write('nothing unassigned\n');
        return;
      }

      const ids = rows.map((r) => r.shard.spec!.id);
      let changed: Set<string>;
      let failure: UnassignError | undefined;
      try {
        const res = await client.unassignInBatches(ids, {
          onlyFailed,
          dryRun: dry,
          onBatch: (b) => this.log_.debug('unassign batch answered', { batch: b.index + 1, of: b.batches, requested: b.requested.length, changed: b.changed.length }),
        });
        changed = new Set(res.changed);
      } catch (err) {
        if (!(err instanceof UnassignError)) throw err;
        failure = err;
        changed = new Set(err.changed);
      }
      // Without a failure every row was sent; with one, the rows of its batch failed and later ones were not sent.
      const failedFrom = failure ? ids.indexOf(failure.requested[0]!) : rows.length;
      const failedTo = failure ? failedFrom + failure.requested.length : rows.length;
      rows.forEach((r, i) => {
        r.result = changed.has(r.shard.spec!.id) ? (dry ? 'would-unassign' : 'unassigned') : i < failedFrom ? 'unchanged' : i < failedTo ? 'failed' : 'not-sent';
      });
      for (const r of rows) {
        if (r.result === 'unassigned' || r.result === 'would-unassign') {
          this.log_.info(dry ? 'would unassign shard (dry run)' : 'unassigned shard', { id: r.shard.spec!.id, previousStatus: statusCell(r.shard), previousRoute: routeCell(r.shard) });
        }
      }

      if (json) process.stdout.write(resultJson(rows, { dry, onlyFailed, applied: true }));
      else {
        process.stdout.write(renderTable(['ID', 'Previous Status', 'Previous Route', 'Result'], rows.map(resultCells)));
        const n = changed.size;
        process.stdout.write(dry ? `dry run: ${n} shard${n === 1 ? '' : 's'} would be unassigned, nothing changed\n` : `${n} shard${n === 1 ? '' : 's'} unassigned\n`);
      }
      if (failure) throw failure;
    } finally {
      client.close();
    }
  }
}

function memberName(shard: ListResponse_Shard, i: number): string {
  const m = shard.route?.members[i];
  return m ? m.suffix : `#${i}`;
}

function removals(shard: ListResponse_Shard, onlyFailed: boolean): Row['removes'] {
  const out: Row['removes'] = [];
  const members = shard.route?.members.length ?? 0;
  for (let i = 0; i < members; i++) {
    if (!onlyFailed && i === shard.route!.primary) out.push({ member: memberName(shard, i), why: 'primary' });
    else if (shard.status[i]?.code === ReplicaStatus_Code.FAILED) out.push({ member: memberName(shard, i), why: 'failed' });
  }
  return out;
}

/** Route members in order, with their statuses: "c1:PRIMARY (primary), c2:STANDBY". */
function routeCell(shard: ListResponse_Shard): string {
  const members = shard.route?.members ?? [];
  if (members.length === 0) return '<none>';
  return members
    .map((_, i) => `${memberName(shard, i)}:${replicaStatusName(shard.status[i]?.code ?? ReplicaStatus_Code.IDLE)}${i === shard.route!.primary ? ' (primary)' : ''}`)
    .join(', ');
}

function removesCell(r: Row): string {
  if (r.removes.length === 0) return 'nothing (no primary or FAILED assignment)';
  return r.removes.map((x) => `${x.member} (${x.why})`).join(', ');
}

function planCells(r: Row): string[] {
  return [r.shard.spec!.id, statusCell(r.shard), routeCell(r.shard), removesCell(r)];
}

const RESULT_TEXT = {
  unassigned: 'unassigned',
  'would-unassign': 'would be unassigned (dry run)',
  unchanged: 'not changed',
  failed: 'failed (its request failed)',
  'not-sent': 'not sent (an earlier request failed)',
} as const;

function resultCells(r: Row): string[] {
  return [r.shard.spec!.id, statusCell(r.shard), routeCell(r.shard), RESULT_TEXT[r.result ?? 'unchanged']];
}

/** One JSON document: the options, and each candidate with its listing, the plan and the outcome. */
function resultJson(rows: Row[], o: { dry: boolean; onlyFailed: boolean; applied: boolean }): string {
  const shards = rows.map((r) => {
    const parts = [
      `"id":${JSON.stringify(r.shard.spec!.id)}`,
      `"route":${routeToJson(r.shard.route)}`,
      `"status":[${r.shard.status.map(replicaStatusToJson).join(',')}]`,
      `"removes":${JSON.stringify(r.removes)}`,
    ];
    if (o.applied) parts.push(`"result":${JSON.stringify(r.result ?? 'unchanged')}`);
    return `{${parts.join(',')}}`;
  });
  return `{"dry_run":${o.dry},"only_failed":${o.onlyFailed},"sent":${o.applied},"shards":[${shards.join(',')}]}\n`;
}
