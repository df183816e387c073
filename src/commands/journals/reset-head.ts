import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { dryRun, selector } from '../../cli/flags.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { formatOption, renderTable } from '../../cli/render.js';
import { booleanOption, oclifFlags, options, type OptionSet } from '../../cli/options.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';
import { indexEnd, resetHeadAt, suspendLevel } from '../../lib/client/journal-ops.js';
import { mapLimit } from '../../lib/concurrency.js';
import { JournalSpec_Suspend_Level } from '../../lib/protocol/gen/broker/protocol.js';

const OPTIONS = options({
  selector: selector(true),
  'dry-run': dryRun(),
  yes: booleanOption({ char: 'y', description: 'Go ahead without asking (for scripts).', ini: null }),
  format: formatOption(['table', 'json']),
});

/** Journals handled at once (each is a ListFragments and then one empty append). */
const PARALLEL = 16;

interface PlanRow {
  journal: string;
  suspend: JournalSpec_Suspend_Level;
  fragments: number;
  head: bigint;
  /** Why nothing will be done, when nothing will. */
  skip?: string;
  result?: string;
  failed?: boolean;
}

export default class JournalsResetHead extends GazctlCommand {
  static override summary = 'Move write heads to the end of the fragment index (disaster recovery).';
  static override description = `After etcd or R or more brokers of a journal were lost, the brokers now serving it agree on a write offset that is behind the fragments already in its stores. They then refuse every append with INDEX_HAS_GREATER_OFFSET rather than write an offset a second time. Once you are sure every fragment of the old brokers is persisted (for instance because those brokers are gone), reset-head moves the write head of each selected journal to the end of its fragment index, and appends go on from there.

For each journal the end of the index is taken from its fragment listing; then one empty append naming that offset is sent. A journal written meanwhile refuses it with WRONG_APPEND_OFFSET, which is harmless (its head is consistent already) and reported as raced. Running it on healthy journals is therefore safe.

The plan (journal, suspension, indexed fragments, the head appends will continue at) is printed first; then the command asks on a terminal, or takes --yes. --dry-run prints the plan only.

Fully suspended journals and journals without fragments are skipped: there is nothing to reset. A partially suspended journal is reset only if its broker can keep the suspension (SUSPEND_KEEP); brokers that cannot (v0.103 and older) would resume it, so the journal is skipped with that reason.

Exit status 1 when a journal could not be reset (raced and skipped journals are not failures).

-o json prints one document on stdout, after the run (or the plan, with --dry-run or a refusal): {"applied","journals":[{"journal","suspend","fragments","new_head","action","reason","result","detail"}]}; action is reset or skip ("reason" says why, "new_head" is then null); new_head is a decimal string; result (reset, raced, skipped or failed) and detail only once applied.`;
  static override examples = [
    { description: 'See what would be reset', command: '<%= config.bin %> journals reset-head -l app=billing --dry-run' },
    { description: 'Reset every journal, from a script', command: '<%= config.bin %> journals reset-head -l "name:prefix=" --yes' },
    { description: 'The plan and the outcome as JSON', command: '<%= config.bin %> journals reset-head -l name=acme/events --yes -o json' },
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
    const client = this.journalClient();
    try {
      const listing = await client.list(flags.selector);
      if (listing.journals.length === 0) throw new GazctlError(`no journals match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);

      const rows: PlanRow[] = await mapLimit(listing.journals, PARALLEL, async (j) => {
        const spec = j.spec!;
        const row: PlanRow = { journal: spec.name, suspend: suspendLevel(spec), fragments: 0, head: 0n };
        if (row.suspend === JournalSpec_Suspend_Level.FULL) {
          row.skip = 'fully suspended: its fragment index is empty';
          return row;
        }
        const fragments = await client.listFragments(spec.name, {});
        row.fragments = fragments.length;
        row.head = indexEnd(fragments);
        if (row.head === 0n) row.skip = 'no fragments: nothing to reset';
        return row;
      });
      const todo = rows.filter((r) => !r.skip);

      if (!json) process.stdout.write(renderTable(['Journal', 'Suspend', 'Fragments', 'New Head', 'Action'], rows.map(planCells)));
      const go =
        todo.length > 0 &&
        (await confirmDestructive({
          question: `Move the write head of ${todo.length} journal${todo.length === 1 ? '' : 's'} to the end of its fragment index?`,
          yes: flags.yes,
          dryRun: flags['dry-run'],
          action: 'reset write heads',
        }));
      if (!go) {
        if (json) process.stdout.write(planJson(rows, false));
        else if (todo.length > 0) process.stdout.write(flags['dry-run'] ? 'dry run: nothing reset\n' : 'nothing reset\n');
        return;
      }

      await mapLimit(todo, PARALLEL, async (row) => {
        const keep = row.suspend === JournalSpec_Suspend_Level.PARTIAL;
        try {
          const out = await resetHeadAt(client, row.journal, row.head, { keepSuspension: keep });
          switch (out.kind) {
            case 'reset':
              row.result = `write head at ${out.head}`;
              this.log_.info('reset write head', { journal: row.journal, head: out.head });
              break;
            case 'raced':
              row.result = 'not reset: raced writes (harmless, the journal was appended to meanwhile)';
              this.log_.info('did not reset (raced writes)', { journal: row.journal });
              break;
            case 'keep-unsupported':
              row.result = 'skipped: partially suspended, and its broker cannot reset it without resuming it (no SUSPEND_KEEP)';
              this.log_.warn('did not reset a partially suspended journal', { journal: row.journal, err: out.detail });
              break;
          }
        } catch (err) {
          row.failed = true;
          row.result = `failed: ${(err as Error).message}`;
        }
      });

      if (json) process.stdout.write(planJson(rows, true));
      else process.stdout.write(renderTable(['Journal', 'Result'], todo.map((r) => [r.journal, r.result ?? ''])));
      const failed = todo.filter((r) => r.failed);
      if (failed.length > 0) {
        throw new GazctlError(`failed to reset ${failed.length} of ${todo.length} journals; first: ${failed[0]!.journal}: ${failed[0]!.result!.replace(/^failed: /, '')}`);
      }
    } finally {
      client.close();
    }
  }
}

function levelName(l: JournalSpec_Suspend_Level): string {
  return JournalSpec_Suspend_Level[l] ?? String(l);
}

function planCells(r: PlanRow): string[] {
  const action = r.skip
    ? `skip: ${r.skip}`
    : r.suspend === JournalSpec_Suspend_Level.PARTIAL
      ? 'reset, keeping the partial suspension (skipped if the broker cannot)'
      : 'reset';
  return [r.journal, levelName(r.suspend), String(r.fragments), r.skip ? '' : r.head.toString(), action];
}

/** One JSON document: the plan, and each journal's outcome when the resets ran. */
function planJson(rows: PlanRow[], ran: boolean): string {
  const journals = rows.map((r) => {
    const o: Record<string, unknown> = {
      journal: r.journal,
      suspend: levelName(r.suspend),
      fragments: r.fragments,
      new_head: r.skip ? null : r.head.toString(),
      action: r.skip ? 'skip' : 'reset',
    };
    if (r.skip) o.reason = r.skip;
    if (ran && !r.skip) {
      o.result = r.failed ? 'failed' : /^write head/.test(r.result ?? '') ? 'reset' : /^not reset/.test(r.result ?? '') ? 'raced' : 'skipped';
      o.detail = r.result;
    }
    return o;
  });
  return JSON.stringify({ applied: ran, journals }) + '\n';
}
