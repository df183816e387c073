import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { dryRun, selector } from '../../cli/flags.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { EXIT } from '../../cli/exit.js';
import { formatOption, renderTable } from '../../cli/render.js';
import { booleanOption, oclifFlags, optionalStringOption, options, type OptionSet } from '../../cli/options.js';
import { formatBytes } from '../../cli/progress.js';
import { StoreSet, deleteObjects, durationNs, allJournalNames, jsonWithBigints, listJournals, warnIgnored } from '../../cli/fragments-plan.js';
import { formatGoDuration } from '../../lib/protocol/duration.js';
import type { RetentionPlan } from '../../lib/fragment/retention.js';
import { planRetentionAll, type JournalRetentionInput } from '../../lib/fragment/retention.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';

const OPTIONS = options({
  selector: selector(true),
  'dry-run': dryRun(),
  yes: booleanOption({ char: 'y', description: 'Delete without asking (for scripts).', ini: { field: 'Yes' } }),
  'file-root': optionalStringOption({ description: 'Local directory rooting file:// fragment stores (needed to list and delete in them).', ini: { field: 'FileRoot' } }),
  format: formatOption(['table', 'json']),
});

export default class JournalsPrune extends GazctlCommand {
  static override summary = 'Delete fragments older than their journal\'s retention, in every store.';
  static override description = `Deletes the fragment objects of each selected journal whose store modification time is older than the journal's fragment.retention, in every store of its spec and under every path postfix (not only the fragments the brokers index). Copies of a fragment in two stores age separately.

A retention of 0, or none, keeps everything (upstream's prune deletes every fragment then). The fragment holding a journal's newest content is kept whatever its age, so an idle journal keeps the fragment its write head rests on.

The plan (count and bytes per journal and store) is printed first; then the command asks on a terminal, takes --yes in scripts and refuses without either; --dry-run prints the plan only. Deletes run in parallel. A store where deletes are refused is reported with one line and the other stores are pruned (exit 1). A store that cannot be listed is reported (exit 1) and nothing of its journals is deleted.

Objects under a journal's prefix whose names are not fragment names (a README, notes, an operator's copy) are ignored: each is named once in a warning on stderr, and none is counted, planned or deleted.

-o json prints one document on stdout once the run is over (the plan, the question and the summary then go to stderr): {"dry_run","applied","count","bytes","deleted","deleted_bytes","journals":[{"journal","retention","cutoff","kept_newest","stores":[{"store","count","bytes"}],"expired":[{"store","path","begin","end","size","mod_time"}]}],"problems":[...]}; "applied" is false when nothing was deleted (a dry run, a refusal, nothing expired), offsets are exact integers, retention a Go duration ("" for none), cutoff and mod_time unix seconds.`;
  static override examples = [
    { description: 'See what would be pruned', command: '<%= config.bin %> journals prune -l app=billing --dry-run' },
    { description: 'Prune from cron', command: '<%= config.bin %> journals prune -l app=billing --yes' },
    { description: 'Prune file:// stores mounted under /var/lib/gazette', command: '<%= config.bin %> journals prune -l name:prefix=acme/ --yes --file-root /var/lib/gazette' },
    { description: 'Prune from cron, keeping a JSON audit', command: '<%= config.bin %> journals prune -l app=billing --yes -o json >> prune-audit.ndjson' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    checkConfirmFlags({ dryRun: flags['dry-run'], yes: flags.yes });
    const json = flags.format === 'json';
    // With -o json stdout holds the document alone; the plan and the summary go to stderr.
    const say = (s: string) => (json ? process.stderr : process.stdout).write(s);
    const problems: string[] = [];
    const problem = (s: string) => {
      problems.push(s);
      process.stderr.write(`gazctl: ${s}\n`);
      process.exitCode = EXIT.ERROR;
    };
    let plan: RetentionPlan | undefined;
    let deleted = { count: 0, bytes: 0, applied: false };
    const client = this.journalClient();
    const stores = new StoreSet(flags['file-root']);
    try {
      const listing = await client.list(flags.selector);
      const specs = listing.journals.map((j) => j.spec!);
      if (specs.length === 0) throw new GazctlError(`no journals match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);
      const listed = await listJournals(specs, stores, { journals: await allJournalNames(client) });
      warnIgnored(listed, (msg, fields) => this.log_.warn(msg, fields));
      const inputs: JournalRetentionInput[] = [];
      for (const l of listed) {
        for (const p of l.problems) problem(p);
        if (l.problems.length === 0) inputs.push({ journal: l.journal, objects: l.objects, retention: durationNs(l.spec.fragment?.retention) });
      }
      plan = planRetentionAll(inputs, Date.now());

      const rows: string[][] = [];
      for (const j of plan.journals) {
        const why = j.retention === 0n ? 'no retention: keeps everything' : `${j.keptNewest.length} kept as newest content`;
        if (j.byStore.length === 0) rows.push([j.journal, '', '0', '0 B', why]);
        for (const t of j.byStore) rows.push([j.journal, t.store, String(t.count), formatBytes(t.bytes), why]);
      }
      if (rows.length > 0) say(renderTable(['Journal', 'Store', 'Expired', 'Bytes', 'Note'], rows));
      say(`plan: delete ${plan.count} expired object(s), ${formatBytes(plan.bytes)}, of ${plan.journals.length} journal(s)\n`);
      if (plan.count === 0) return;
      const go = await confirmDestructive({
        question: `Delete ${plan.count} expired fragment object(s) (${formatBytes(plan.bytes)})?`,
        yes: flags.yes,
        dryRun: flags['dry-run'],
        action: 'delete fragments',
      });
      if (!go) {
        say(flags['dry-run'] ? 'dry run: nothing deleted\n' : 'nothing deleted\n');
        return;
      }
      const res = await deleteObjects(stores, plan.journals.flatMap((j) => j.expired));
      deleted = { count: res.deleted, bytes: res.bytes, applied: true };
      for (const f of res.failures) problem(f);
      say(`deleted ${res.deleted} of ${plan.count} object(s), ${formatBytes(res.bytes)}\n`);
    } finally {
      if (json && plan) process.stdout.write(pruneJson(plan, { dryRun: flags['dry-run'], ...deleted, problems }) + '\n');
      stores.close();
      client.close();
    }
  }
}

/** The -o json document of a prune run (see the command's description). */
export function pruneJson(plan: RetentionPlan, run: { dryRun: boolean; applied: boolean; count: number; bytes: number; problems: string[] }): string {
  return jsonWithBigints({
    dry_run: run.dryRun,
    applied: run.applied,
    count: plan.count,
    bytes: plan.bytes,
    deleted: run.count,
    deleted_bytes: run.bytes,
    journals: plan.journals.map((j) => ({
      journal: j.journal,
      retention: j.retention === 0n ? '' : formatGoDuration(j.retention),
      cutoff: j.cutoff ?? null,
      kept_newest: j.keptNewest.length,
      stores: j.byStore,
      expired: j.expired.map((o) => ({ store: o.store, path: o.path, begin: o.begin, end: o.end, size: o.size, mod_time: o.modTime })),
    })),
    problems: run.problems,
  });
}
