import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { dryRun, selector } from '../../cli/flags.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { EXIT } from '../../cli/exit.js';
import { renderTable } from '../../cli/render.js';
import { booleanOption, oclifFlags, optionalStringOption, options, type OptionSet } from '../../cli/options.js';
import { formatBytes } from '../../cli/progress.js';
import { StoreSet, deleteObjects, durationNs, allJournalNames, listJournals, warnIgnored } from '../../cli/fragments-plan.js';
import { planRetentionAll, type JournalRetentionInput } from '../../lib/fragment/retention.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';

const OPTIONS = options({
  selector: selector(true),
  'dry-run': dryRun(),
  yes: booleanOption({ char: 'y', description: 'Delete without asking (for scripts).', ini: { field: 'Yes' } }),
  'file-root': optionalStringOption({ description: 'Local directory rooting file:// fragment stores (needed to list and delete in them).', ini: { field: 'FileRoot' } }),
});

export default class JournalsPrune extends GazctlCommand {
  static override summary = 'Delete fragments older than their journal\'s retention, in every store.';
  static override description = `Deletes the fragment objects of each selected journal whose store modification time is older than the journal's fragment.retention, in every store of its spec and under every path postfix (not only the fragments the brokers index). Copies of a fragment in two stores age separately.

A retention of 0, or none, keeps everything (upstream's prune deletes every fragment then). The fragment holding a journal's newest content is kept whatever its age, so an idle journal keeps the fragment its write head rests on.

The plan (count and bytes per journal and store) is printed first; then the command asks on a terminal, takes --yes in scripts and refuses without either; --dry-run prints the plan only. Deletes run in parallel. A store where deletes are refused is reported with one line and the other stores are pruned (exit 1). A store that cannot be listed is reported (exit 1) and nothing of its journals is deleted.

Objects under a journal's prefix whose names are not fragment names (a README, notes, an operator's copy) are ignored: each is named once in a warning on stderr, and none is counted, planned or deleted.`;
  static override examples = [
    { description: 'See what would be pruned', command: '<%= config.bin %> journals prune -l app=billing --dry-run' },
    { description: 'Prune from cron', command: '<%= config.bin %> journals prune -l app=billing --yes' },
    { description: 'Prune file:// stores mounted under /var/lib/gazette', command: '<%= config.bin %> journals prune -l name:prefix=acme/ --yes --file-root /var/lib/gazette' },
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
    const problem = (s: string) => {
      process.stderr.write(`gazctl: ${s}\n`);
      process.exitCode = EXIT.ERROR;
    };
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
      const plan = planRetentionAll(inputs, Date.now());

      const rows: string[][] = [];
      for (const j of plan.journals) {
        const why = j.retention === 0n ? 'no retention: keeps everything' : `${j.keptNewest.length} kept as newest content`;
        if (j.byStore.length === 0) rows.push([j.journal, '', '0', '0 B', why]);
        for (const t of j.byStore) rows.push([j.journal, t.store, String(t.count), formatBytes(t.bytes), why]);
      }
      if (rows.length > 0) process.stdout.write(renderTable(['Journal', 'Store', 'Expired', 'Bytes', 'Note'], rows));
      process.stdout.write(`plan: delete ${plan.count} expired object(s), ${formatBytes(plan.bytes)}, of ${plan.journals.length} journal(s)\n`);
      if (plan.count === 0) return;
      const go = await confirmDestructive({
        question: `Delete ${plan.count} expired fragment object(s) (${formatBytes(plan.bytes)})?`,
        yes: flags.yes,
        dryRun: flags['dry-run'],
        action: 'delete fragments',
      });
      if (!go) {
        process.stdout.write(flags['dry-run'] ? 'dry run: nothing deleted\n' : 'nothing deleted\n');
        return;
      }
      const res = await deleteObjects(stores, plan.journals.flatMap((j) => j.expired));
      for (const f of res.failures) problem(f);
      process.stdout.write(`deleted ${res.deleted} of ${plan.count} object(s), ${formatBytes(res.bytes)}\n`);
    } finally {
      stores.close();
      client.close();
    }
  }
}
