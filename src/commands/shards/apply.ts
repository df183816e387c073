import { GazctlCommand, shardsBaseFlags } from '../../cli/base.js';
import { dryRun, maxTxnSize, parallel } from '../../cli/flags.js';
import { oclifFlags, options, stringOption, type OptionSet } from '../../cli/options.js';
import { readInput } from '../../cli/input.js';
import { planJson, renderPlan } from '../../cli/apply.js';
import { formatOption } from '../../cli/render.js';
import { applyShardChanges, checkShardJournals, planShardApply, shardChangesFromYaml } from '../../cli/shard-specs.js';

const OPTIONS = options({
  specs: stringOption({ description: 'Path of the YAML shard set, or - for stdin.', default: '-', showDefault: true, ini: { field: 'SpecsPath' } }),
  'dry-run': dryRun(),
  'max-txn-size': maxTxnSize(),
  parallel: parallel(),
  format: formatOption(['text', 'json']),
});

export default class ShardsApply extends GazctlCommand {
  static override summary = 'Apply a YAML set of shard specs.';
  static override description = `Reads a shard set (the format "shards list -o yaml" prints: a "common" spec whose fields every shard takes where it leaves them unset, and the "shards"), validates all of it, checks the journals it names, and applies it as one etcd transaction: every change is applied, or none is.

Before anything is applied (and also with --dry-run) every source journal must exist with a content-type consumers can read messages from (application/x-ndjson, application/x-protobuf-fixed or text/csv), and each shard's recovery log, <recovery_log_prefix>/<id>, must exist with content-type application/x-gazette-recoverylog.

A shard's "revision" must match its current revision (omit it to create a shard that must not exist yet; -1 skips the check). "delete: true" on a shard deletes it; "delete: true" under "common" deletes every listed shard (one with its own "delete: false" is kept).

etcd limits a transaction to 128 operations by default. For larger sets pass --max-txn-size: changes are then applied in batches that are each atomic, but not atomic as a whole, up to --parallel (default 4) at once; --parallel 1 sends them one after another, as upstream gazctl does. When a batch is refused no further batch is sent; the error names exactly which transactions were applied.

-o json prints one document on stdout (the summary line stays on stderr): {"dry_run","applied","revision","transactions","unchanged","conflicts","changes":[{"name","action","expect_mod_revision","conflict"}]}, one change per input entry in input order; action is create, update, upsert, delete or unchanged; revisions are exact integers, "revision" null when nothing was applied. A run of creates only is planned without listing the current shards (as it is applied).`;
  static override examples = [
    { description: 'The plan as JSON, for a script', command: '<%= config.bin %> shards apply --specs shards.yaml --dry-run -o json' },
    { description: 'Apply a shard set from a file', command: '<%= config.bin %> shards apply --specs shards.yaml' },
    { description: 'Preview the changes (create / update / delete lines), after checking the journals', command: '<%= config.bin %> shards apply --specs shards.yaml --dry-run' },
    { description: 'List, edit with a script, and re-apply', command: "<%= config.bin %> shards list -l app=word-count -o yaml | sed 's/hot_standbys: 1/hot_standbys: 2/' | <%= config.bin %> shards apply" },
    { description: 'Apply 1,000 shards in batches of 100, one at a time', command: '<%= config.bin %> shards apply --specs shards.yaml --max-txn-size 100 --parallel 1' },
  ];
  static override group = 'shards' as const;
  static override baseFlags = shardsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const maxTxnSize = flags['max-txn-size'];
    const text = await readInput(flags.specs);
    const changes = shardChangesFromYaml(text, flags.specs === '-' ? 'stdin' : flags.specs);
    const journals = this.journalClient();
    try {
      await checkShardJournals(changes, journals);
    } finally {
      journals.close();
    }
    const shards = this.shardClient();
    try {
      if (flags['dry-run']) {
        const plan = await planShardApply(changes, shards);
        process.stdout.write(flags.format === 'json' ? planJson(plan, maxTxnSize, { dryRun: true }) : renderPlan(plan, maxTxnSize, 'shard'));
        return;
      }
      const tty = process.stderr.isTTY;
      const { summary, revision, plan } = await applyShardChanges(
        shards,
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
      shards.close();
    }
  }
}
