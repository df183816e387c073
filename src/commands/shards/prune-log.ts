import { GazctlCommand, shardsBaseFlags } from '../../cli/base.js';
import { dryRun, selector } from '../../cli/flags.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { EXIT } from '../../cli/exit.js';
import { StoreSet } from '../../cli/fragments-plan.js';
import { booleanOption, choiceOption, oclifFlags, optionalStringOption, options, type OptionSet } from '../../cli/options.js';
import { formatBytes, Progress } from '../../cli/progress.js';
import { renderTable } from '../../cli/render.js';
import { buildPrunePlan, pruneAudit, renderRanges, type LogPlan } from '../../cli/prune-log-plan.js';
import { deleteFragments, fetchShardHints, LogGates, makeShardClient, recoveryLogOf } from '../../cli/shard-logs.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';

const OPTIONS = options({
  selector: selector(true, { field: 'Selector' }, 'shards'),
  'dry-run': dryRun(),
  yes: booleanOption({ char: 'y', description: 'Delete without asking (for scripts and cron).', ini: { field: 'Yes' } }),
  format: choiceOption({
    char: 'o',
    choices: ['table', 'json'],
    default: 'table',
    showDefault: true,
    description: 'Output format: table, or json (an audit document on stdout; the plan then goes to stderr).',
    ini: { field: 'Format' },
  }),
  'file-root': optionalStringOption({ description: 'Local directory rooting file:// fragment stores (needed to delete in them).', ini: { field: 'FileRoot' } }),
});

/** Deletes in flight per log (upstream's bound). */
const DELETES_PER_LOG = 32;

export default class ShardsPruneLog extends GazctlCommand {
  static override aliases = ['shards:prune'];
  static override summary = 'Delete recovery-log fragments that no hints of the selected shards need.';
  static override description = `For each shard matching --selector, fetches its hints from the consumer (the primary hints and every backup slot), works out the live segments of the recovery logs they name (the byte ranges a recovery would read; the last segment of each set of hints is open-ended, since playback reads on to the write head), and deletes the fragments of those logs that overlap no live segment. A shard's recovery log is <recovery_log_prefix>/<id>; hints may also name other logs (forks), whose fragments are then planned the same way.

A log is skipped, with its reason, when:
  - a shard using it has a missing hints slot (a shard with hint_backups: N protects its log until it has written all N backups) or hints without live files;
  - its journal spec cannot be fetched, or a store of its spec fails the brokers' health check (no delete probe);
  - the journal is suspended.

Only the fragments the brokers index are planned (ListFragments). A fragment that is still unpersisted and overlaps no live segment means the selector misses a shard that uses the log: it is reported as a problem, nothing of that log is deleted, and the run ends with exit 1.

The plan (per log: shards and hints used, live ranges, fragments to delete and to keep, content bytes) is printed first. --dry-run stops there; --yes deletes without asking (cron); on a terminal the command asks, and without either it refuses. Deletes go to each fragment's backing store with gazctl's own store credentials (as journals prune; --file-root for file:// stores), up to ${DELETES_PER_LOG} at once per log. A delete the store refuses for want of permission is reported and the run goes on (exit 0 if nothing else failed); any other failure is reported, the run goes on, and it ends with exit 1 naming what failed.

-o json prints one audit document on stdout: {"dry_run","deleted","logs":[{"log","status","reason","shards","hints":[{"shard","source","hints"}],"live_segments","fragments":[{"begin","end","sum","backing_store","path","mod_time","action","reason","result","error"}],"bytes":{...}}],"totals":{...},"problems":[...]}, offsets as exact integers and hints as the consumer stores them in etcd. --log.level=debug logs each fragment's decision.

Also runs as "shards prune", upstream's name.`;
  static override examples = [
    { description: 'See what would be pruned', command: '<%= config.bin %> shards prune-log --selector app=x --dry-run' },
    { description: 'Prune from cron, keeping a JSON audit', command: '<%= config.bin %> shards prune-log --selector app=x --yes -o json >> prune-audit.ndjson' },
    { description: 'Recovery logs in file:// stores mounted under /var/lib/gazette', command: '<%= config.bin %> shards prune --selector app=x --yes --file-root /var/lib/gazette' },
  ];
  static override group = 'shards' as const;
  static override iniSection = 'shards.prune';
  static override baseFlags = shardsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    checkConfirmFlags({ dryRun: flags['dry-run'], yes: flags.yes });
    const json = flags.format === 'json';
    // With -o json stdout holds the audit document alone; the plan and the summary go to stderr.
    const say = (s: string) => (json ? process.stderr : process.stdout).write(s);
    const problems: string[] = [];
    const problem = (s: string) => {
      problems.push(s);
      process.stderr.write(`gazctl: ${s}\n`);
      process.exitCode = EXIT.ERROR;
    };

    const shards = makeShardClient(this.serviceOptions('consumer'), this.log_);
    const journals = this.journalClient();
    const stores = new StoreSet(flags['file-root']);
    try {
      const listing = await shards.list(flags.selector);
      const specs = listing.shards.map((s) => s.spec!).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      if (specs.length === 0) throw new GazctlError(`no shards match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);
      const withLogs = specs.flatMap((s) => {
        const log = recoveryLogOf(s);
        if (log === undefined) this.log_.info('shard has no recovery log', { shard: s.id });
        return log === undefined ? [] : [{ id: s.id, log }];
      });
      const hints = await fetchShardHints(shards, withLogs);
      const plan = await buildPrunePlan(hints, {
        gates: new LogGates(journals),
        listFragments: (log) => journals.listFragments(log, { largePages: true }),
        log: this.log_,
      });
      for (const l of plan.logs) if (l.problem !== undefined) problem(`log ${l.log}: ${l.problem}`);

      say(renderPlan(plan.logs));
      const doomed = plan.logs.filter((l) => l.status === 'planned');
      const count = doomed.reduce((n, l) => n + l.delete.length, 0);
      const bytes = doomed.reduce((n, l) => n + l.deleteBytes, 0n);
      say(`plan: delete ${count} fragment(s), ${formatBytes(Number(bytes))} of content, of ${doomed.length} log(s); ${plan.logs.filter((l) => l.status === 'skipped').length} log(s) skipped\n`);

      let go = false;
      if (count > 0) {
        go = await confirmDestructive({
          question: `Delete ${count} recovery-log fragment(s) (${formatBytes(Number(bytes))} of content)?`,
          yes: flags.yes,
          dryRun: flags['dry-run'],
          action: 'delete fragments',
        });
        if (!go) say(flags['dry-run'] ? 'dry run: nothing deleted\n' : 'nothing deleted\n');
      }
      if (go) {
        const progress = new Progress({ label: 'deleted', total: count, totalBytes: Number(bytes) });
        for (const l of doomed) {
          l.outcomes = await deleteFragments(stores, l.delete.map((d) => d.fragment), { concurrency: DELETES_PER_LOG, progress });
          l.status = 'pruned';
        }
        progress.finish();
        reportOutcomes(doomed, problem, this.log_);
        const deleted = doomed.flatMap((l) => l.outcomes!.filter((o) => o.result === 'deleted' || o.result === 'gone'));
        const deletedBytes = doomed.reduce((n, l) => n + l.delete.reduce((m, d, i) => (l.outcomes![i]!.result === 'deleted' || l.outcomes![i]!.result === 'gone' ? m + (d.fragment.end - d.fragment.begin) : m), 0n), 0n);
        say(`deleted ${deleted.length} of ${count} fragment(s), ${formatBytes(Number(deletedBytes))} of content\n`);
      }
      if (json) process.stdout.write(pruneAudit(plan, { dryRun: flags['dry-run'], deleted: go, problems }) + '\n');
    } finally {
      stores.close();
      shards.close();
      journals.close();
    }
  }
}

/** One line per store and kind of failure: refused deletes are warnings, other failures problems. */
function reportOutcomes(logs: LogPlan[], problem: (s: string) => void, log: { info(msg: string, f?: Record<string, unknown>): void }): void {
  const by = new Map<string, { denied: boolean; count: number; first: string }>();
  for (const l of logs) {
    l.outcomes!.forEach((o, i) => {
      if (o.result !== 'denied' && o.result !== 'failed') return;
      const f = l.delete[i]!;
      const key = `${o.result}\u0000${l.log}\u0000${f.object.store}`;
      let e = by.get(key);
      if (e === undefined) by.set(key, (e = { denied: o.result === 'denied', count: 0, first: `${f.object.path}: ${o.error}` }));
      e.count++;
    });
  }
  for (const [key, e] of [...by].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const [, logName, store] = key.split('\u0000');
    if (e.denied) {
      process.stderr.write(`gazctl: warning: log ${logName}: store ${store}: no permission to delete; ${e.count} fragment(s) left in place (first: ${e.first})\n`);
      log.info('skipping fragment removal: no permission to delete', { journal: logName, store, count: e.count });
    } else problem(`log ${logName}: store ${store}: ${e.count} delete(s) failed; those fragments are left in place (first: ${e.first})`);
  }
}

function renderPlan(logs: LogPlan[]): string {
  if (logs.length === 0) return 'no recovery logs to prune\n';
  const rows = logs.map((l) => [
    l.log,
    l.shards.join(', '),
    l.hints.map((h) => `${h.shard}:${h.source}`).join(', '),
    renderRanges(l.liveSegments),
    String(l.delete.length),
    formatBytes(Number(l.deleteBytes)),
    String(l.keep.length),
    formatBytes(Number(l.keepBytes)),
    l.status === 'planned' || l.status === 'nothing' ? '' : `${l.status}: ${l.reason ?? l.problem ?? ''}`,
  ]);
  return renderTable(['Log', 'Shards', 'Hints', 'Live Ranges', 'Delete', 'Bytes', 'Keep', 'Bytes', 'Note'], rows);
}
