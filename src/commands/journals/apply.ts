import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { dryRun, maxTxnSize, parallel } from '../../cli/flags.js';
import { oclifFlags, options, stringOption, type OptionSet } from '../../cli/options.js';
import { readInput } from '../../cli/input.js';
import { planJson, renderPlan } from '../../cli/apply.js';
import { formatOption } from '../../cli/render.js';
import { applyJournalChanges, journalChangesFromYaml, planJournalApply } from '../../cli/journal-specs.js';
import type { JournalClient } from '../../lib/client/journal-client.js';

const OPTIONS = options({
  specs: stringOption({ description: 'Path of the YAML specs, or - for stdin.', default: '-', showDefault: true, ini: { field: 'SpecsPath' } }),
  'dry-run': dryRun(),
  'max-txn-size': maxTxnSize(),
  parallel: parallel(),
  format: formatOption(['text', 'json']),
});

export default class JournalsApply extends GazctlCommand {
  static override summary = 'Apply a YAML hierarchy of journal specs.';
  static override description = `Reads a journal hierarchy (the format "journals list -o yaml" prints), validates all of it, and applies it as one etcd transaction: every change is applied, or none is.

A journal's "revision" must match its current revision (omit it to create a journal that must not exist yet; -1 skips the check). "delete: true" deletes a journal (its fragments stay in their stores).

etcd limits a transaction to 128 operations by default. For larger hierarchies pass --max-txn-size: changes are then applied in batches that are each atomic, but not atomic as a whole. Up to --parallel batches (default 4) are in flight at once, which takes a fraction of the time of sending them one after another (--parallel 1, as upstream gazctl does): each transaction mostly waits on etcd. When a batch is refused no further batch is sent, but those already in flight may still go through; the error then names exactly which transactions were applied.

-o json prints one document on stdout (the summary line stays on stderr): {"dry_run","applied","revision","transactions","unchanged","conflicts","changes":[{"name","action","expect_mod_revision","conflict"}]}, one change per input entry in input order; action is create, update, upsert, delete or unchanged; revisions are exact integers, "revision" null when nothing was applied. A run of creates only is planned without listing the current journals (as it is applied).`;
  static override examples = [
    { description: 'The plan as JSON, for a script', command: '<%= config.bin %> journals apply --specs journals.yaml --dry-run -o json' },
    { description: 'Apply specs from a file', command: '<%= config.bin %> journals apply --specs journals.yaml' },
    { description: 'Preview the changes', command: '<%= config.bin %> journals apply --specs journals.yaml --dry-run' },
    { description: 'Apply 1,000 journals in batches of 100', command: '<%= config.bin %> journals list -o yaml | <%= config.bin %> journals apply --max-txn-size 100' },
    { description: 'Apply 10,000 journals in batches of 100, 8 transactions at a time', command: '<%= config.bin %> journals apply --specs journals.yaml --max-txn-size 100 --parallel 8' },
    { description: 'Apply batches strictly one after another, as upstream gazctl does', command: '<%= config.bin %> journals apply --specs journals.yaml --max-txn-size 100 --parallel 1' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const maxTxnSize = flags['max-txn-size'];
    // The broker connection is set up while the specs are read and checked. A client that
    // cannot be made now (a malformed address, say) is made again after them, so that such a
    // problem is reported where it always was: after any problem with the specs.
    let early: JournalClient | undefined;
    try {
      early = this.journalClient(this.serviceOptions('broker'));
      // The connection the Apply batches (and any listing before them) take.
      early.pool.connect();
    } catch {
      early = undefined;
    }
    let changes;
    try {
      const text = await readInput(flags.specs);
      changes = journalChangesFromYaml(text, flags.specs === '-' ? 'stdin' : flags.specs);
    } catch (err) {
      early?.close();
      throw err;
    }
    const client = early ?? this.journalClient(this.serviceOptions('broker'));
    try {
      if (flags['dry-run']) {
        const plan = await planJournalApply(changes, (sel) => client.list(sel));
        process.stdout.write(flags.format === 'json' ? planJson(plan, maxTxnSize, { dryRun: true }) : renderPlan(plan, maxTxnSize, 'journal'));
        return;
      }
      const tty = process.stderr.isTTY;
      const { summary, revision, plan } = await applyJournalChanges(
        client,
        changes,
        maxTxnSize,
        tty ? (done, total) => process.stderr.write(`\rapplied ${done}/${total} changes`) : undefined,
        flags.parallel,
      );
      if (tty) process.stderr.write('\n');
      this.log_.info('successfully applied', { revision });
      process.stderr.write(summary + '\n');
      if (flags.format === 'json') process.stdout.write(planJson(plan, maxTxnSize, { dryRun: false, revision }));
    } finally {
      client.close();
    }
  }
}
