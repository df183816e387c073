import { GazctlCommand, shardsBaseFlags } from '../../cli/base.js';
import { maxTxnSize, parallel, selector } from '../../cli/flags.js';
import { oclifFlags, options, type OptionSet } from '../../cli/options.js';
import { editLoop } from '../../cli/editor.js';
import { applyShardChanges, checkShardJournals, shardChangesFromYaml } from '../../cli/shard-specs.js';
import { encodeShardSet, shardSetFromListing } from '../../lib/shardspace/shardspace.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';

const OPTIONS = options({
  // Upstream marks edit's selector no-ini: it comes from the command line only.
  selector: selector(true, null, 'shards'),
  'max-txn-size': maxTxnSize(),
  parallel: parallel(),
});

export default class ShardsEdit extends GazctlCommand {
  static override summary = 'Edit shard specs in your editor and apply them.';
  static override description = `Lists the shards matching the selector as a shard set (fields shared by all of them under "common"), opens it in $GAZ_EDITOR, $EDITOR or vi, and applies what you save, after checking the journals it names as "shards apply" does. If the edit fails to validate, names a missing or unsuitable journal, or fails to apply (for example because a shard changed meanwhile), the editor opens again showing the error, with your edits kept. Save an empty file to cancel.

Revisions in the YAML make the apply fail, rather than overwrite, when someone else changed a shard in between.

With --max-txn-size the edit is applied in batches, up to --parallel (default 4) at once; --parallel 1 sends them one after another, as upstream gazctl does.`;
  static override examples = [
    { description: 'Edit the shards of an application', command: '<%= config.bin %> shards edit -l app=word-count' },
    { description: 'Edit shards by ID prefix with a specific editor', command: 'GAZ_EDITOR="code --wait" <%= config.bin %> shards edit -l id:prefix=acme-' },
    { description: 'Edit thousands of shards, applied 100 per transaction', command: '<%= config.bin %> shards edit -l app=word-count --max-txn-size 100' },
  ];
  static override group = 'shards' as const;
  static override baseFlags = shardsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const { selector, 'max-txn-size': maxTxnSize, parallel } = await this.resolve(OPTIONS);
    const shards = this.shardClient();
    const journals = this.journalClient();
    try {
      const listing = await shards.list(selector);
      if (listing.shards.length === 0) {
        throw new GazctlError(`no shards match selector ${JSON.stringify(formatLabelSelector(selector))}`);
      }
      const initial = encodeShardSet(shardSetFromListing(listing.shards));
      await editLoop({
        kind: 'shards',
        initial,
        apply: async (text) => {
          const changes = shardChangesFromYaml(text, 'edited specs');
          await checkShardJournals(changes, journals);
          const { summary, revision } = await applyShardChanges(shards, changes, maxTxnSize, undefined, parallel);
          this.log_.info('successfully applied', { revision });
          process.stderr.write(summary + '\n');
        },
      });
    } finally {
      shards.close();
      journals.close();
    }
  }
}
