import { GazctlCommand, journalsBaseFlags, UsageError } from '../../cli/base.js';
import { dryRun, selector } from '../../cli/flags.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { EXIT } from '../../cli/exit.js';
import { formatOption, humanizeBytes, humanizeTime, renderTable } from '../../cli/render.js';
import { booleanOption, oclifFlags, optionalStringOption, options, type OptionSet } from '../../cli/options.js';
import { formatBytes } from '../../cli/progress.js';
import {
  StoreSet,
  compareWithChain,
  deleteObjects,
  jsonWithBigints,
  allJournalNames,
  listJournals,
  warnIgnored,
  writeHeadOf,
  type IgnoredObject,
  type Comparison,
  type ListedJournal,
} from '../../cli/fragments-plan.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';
import { forksReport, planForks, type ForkReportRow, type JournalForks, type JournalForksReport } from '../../lib/fragment/forks.js';
import { mapLimit } from '../../lib/concurrency.js';

const OPTIONS = options({
  selector: selector(true),
  format: formatOption(['table', 'json']),
  prune: booleanOption({ description: 'Delete the dead-end forks (after the plan and a confirmation).', ini: { field: 'Prune' } }),
  'dry-run': dryRun(),
  yes: booleanOption({ char: 'y', description: 'Delete without asking (for scripts); with --prune.', ini: { field: 'Yes' } }),
  'file-root': optionalStringOption({ description: 'Local directory rooting file:// fragment stores (needed to list and delete in them).', ini: { field: 'FileRoot' } }),
});

export default class JournalsForks extends GazctlCommand {
  static override summary = 'Find forks of journal histories in the fragment stores, and delete dead-ends.';
  static override description = `Lists every fragment object of each selected journal in every store of its spec and works out its main chain: from the fragment with the greatest end, step back to the fragment ending where the current one begins (the smallest begin wins), until offset 0 or a missing offset. Copies of a fragment (same begin, end and sum, in other stores or path postfixes) are one fragment. Every other object is a fork:

  dead-end   everything it holds lies inside the chain (a superseded shorter copy, a divergent rewrite of offsets the chain holds, a fragment straddling two chain fragments): safe to delete
  gap        it holds offsets the chain does not: reported, never deleted
  ambiguous  the journal's history cannot be told from offsets (two fragments with the same offsets but different sums continue the chain, or the chain ends past the broker's write head: run reset-head first): nothing of the journal is deleted

Each fork is read against the chain: "diverges at" is the first offset where its content differs, or "same content".

--prune deletes the dead-ends after printing the plan: it asks on a terminal, takes --yes in scripts, and refuses without either; --dry-run prints the plan only. A store that cannot be listed is reported (exit 1) and nothing of its journals is deleted.

Objects under a journal's prefix whose names are not fragment names (a README, notes, an operator's copy) are ignored: each is named once in a warning on stderr, none is a fork or deleted, and -o json lists them under "ignored".

-o json prints one document: {"journals":[{"journal","chain":{"begin","end"},"forks":[{"kind","begin","end","sum","store","path","size","mod_time","diverges_at",...}],"ignored":[{"store","path","size","reason"}]}]}, offsets as exact integers; diverges_at is "same content" for an identical copy.`;
  static override examples = [
    { description: 'Forks of one journal', command: '<%= config.bin %> journals forks -l name=acme/events' },
    { description: 'As JSON, for a script', command: '<%= config.bin %> journals forks -l app=billing -o json' },
    { description: 'What a cleanup would delete', command: '<%= config.bin %> journals forks -l app=billing --prune --dry-run' },
    { description: 'Delete dead-ends in file:// stores from cron', command: '<%= config.bin %> journals forks -l app=billing --prune --yes --file-root /var/lib/gazette' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    if (!flags.prune && (flags['dry-run'] || flags.yes)) {
      throw new UsageError(`--${flags['dry-run'] ? 'dry-run' : 'yes'} only applies with --prune`);
    }
    checkConfirmFlags({ dryRun: flags['dry-run'], yes: flags.yes });
    const json = flags.format === 'json';
    // With -o json stdout holds the document alone; the plan and summary go to stderr.
    const say = (s: string) => (json ? process.stderr : process.stdout).write(s);
    const problem = (s: string) => {
      process.stderr.write(`gazctl: ${s}\n`);
      process.exitCode = EXIT.ERROR;
    };

    const client = this.journalClient();
    const stores = new StoreSet(flags['file-root']);
    try {
      const listing = await client.list(flags.selector);
      const specs = listing.journals.map((j) => j.spec!).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      if (specs.length === 0) throw new GazctlError(`no journals match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);
      const listed = await listJournals(specs, stores, { journals: await allJournalNames(client) });
      warnIgnored(listed, (msg, fields) => this.log_.warn(msg, fields));
      const heads = await mapLimit(listed, 8, async (l): Promise<bigint | Error> => {
        if (l.problems.length > 0) return new Error('not needed');
        try {
          return await writeHeadOf(client, l.spec);
        } catch (e) {
          return e as Error;
        }
      });
      const plans: JournalForks[] = [];
      const ignored = new Map<JournalForks, IgnoredObject[]>();
      listed.forEach((l: ListedJournal, i) => {
        const head = heads[i]!;
        if (l.problems.length === 0 && head instanceof Error) l.problems.push(`journal ${l.journal}: cannot read its write head from the broker: ${head.message}`);
        for (const p of l.problems) problem(p);
        if (l.problems.length > 0) return;
        const plan = planForks(l.journal, l.objects, { writeHead: head as bigint });
        plans.push(plan);
        ignored.set(plan, l.ignored);
      });

      const comparisons = new Map<JournalForks, Comparison[]>();
      await mapLimit(plans, 4, async (p) => {
        comparisons.set(p, await mapLimit(p.forks, 4, (f) => compareWithChain(stores, p, f.object)));
      });

      const report = forksReport(plans);
      const doc = {
        journals: report.journals.map((j, i) => {
          const cmp = comparisons.get(plans[i]!)!;
          return {
            ...j,
            forks: j.forks.map((f, k) => {
              const c = cmp[k]!;
              return { ...f, diverges_at: c.kind === 'differs' ? c.at : c.kind === 'same' ? 'same content' : f.diverges_at, compared: c.kind !== 'unread' };
            }),
            ignored: ignored.get(plans[i]!)!,
          };
        }),
      };
      if (json) process.stdout.write(jsonWithBigints(doc) + '\n');
      else process.stdout.write(renderForks(doc.journals));

      if (!flags.prune) return;
      const planned = plans.filter((p) => p.deletable.length > 0);
      const count = planned.reduce((n, p) => n + p.deletable.length, 0);
      const bytes = planned.reduce((n, p) => n + p.deletable.reduce((m, o) => m + o.size, 0), 0);
      say(`plan: delete ${count} dead-end object(s), ${formatBytes(bytes)}\n`);
      for (const p of planned) {
        say(`  ${p.journal}: ${p.deletable.length} object(s), ${formatBytes(p.deletable.reduce((m, o) => m + o.size, 0))}\n`);
      }
      for (const p of plans) if (p.ambiguous !== undefined) say(`  ${p.journal}: nothing deleted, ambiguous: ${p.ambiguous}\n`);
      if (count === 0) return;
      const go = await confirmDestructive({
        question: `Delete ${count} dead-end fragment object(s) (${formatBytes(bytes)})?`,
        yes: flags.yes,
        dryRun: flags['dry-run'],
        action: 'delete fragments',
      });
      if (!go) {
        say(flags['dry-run'] ? 'dry run: nothing deleted\n' : 'nothing deleted\n');
        return;
      }
      const res = await deleteObjects(stores, planned.flatMap((p) => p.deletable));
      for (const f of res.failures) problem(f);
      say(`deleted ${res.deleted} of ${count} object(s), ${formatBytes(res.bytes)}\n`);
    } finally {
      stores.close();
      client.close();
    }
  }
}

type DocJournal = Omit<JournalForksReport, 'forks'> & {
  forks: (Omit<ForkReportRow, 'diverges_at'> & { diverges_at: bigint | string; compared: boolean })[];
  ignored: IgnoredObject[];
};

function renderForks(journals: DocJournal[]): string {
  const now = Date.now() / 1000;
  let out = '';
  for (const j of journals) {
    const kinds = { 'dead-end': 0, gap: 0, ambiguous: 0 };
    for (const f of j.forks) kinds[f.kind]++;
    out += `${j.journal}: chain [${j.chain.begin}, ${j.chain.end}), ${j.forks.length} fork(s): ${kinds['dead-end']} dead-end, ${kinds.gap} gap, ${kinds.ambiguous} ambiguous\n`;
    if (j.ambiguous !== undefined) out += `  ambiguous: ${j.ambiguous}\n`;
    if (j.forks.length === 0) continue;
    const rows = j.forks.map((f) => [
      f.kind,
      f.begin.toString(),
      f.end.toString(),
      f.sum.slice(0, 12) + '...',
      f.store,
      f.path,
      humanizeBytes(f.size),
      f.mod_time === 0 ? '' : humanizeTime(f.mod_time, now),
      String(f.diverges_at),
    ]);
    out += renderTable(['Kind', 'Begin', 'End', 'SHA1', 'Store', 'Path', 'Size', 'Modified', 'Diverges At'], rows);
  }
  if (journals.length === 0) out += 'no journals listed\n';
  return out;
}
