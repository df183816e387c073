import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { maxTxnSize, parallel, selector } from '../../cli/flags.js';
import { oclifFlags, options, type OptionSet } from '../../cli/options.js';
import { editLoop } from '../../cli/editor.js';
import { applyJournalChanges, journalChangesFromYaml } from '../../cli/journal-specs.js';
import { encodeJournalTree, journalTreeFromListing } from '../../lib/journalspace/journalspace.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';

const OPTIONS = options({
  // Upstream marks edit's selector no-ini: it comes from the command line only.
  selector: selector(true, null),
  'max-txn-size': maxTxnSize(),
  parallel: parallel(),
});

export default class JournalsEdit extends GazctlCommand {
  static override summary = 'Edit journal specs in your editor and apply them.';
  static override description = `Lists the journals matching the selector as a YAML hierarchy, opens it in $GAZ_EDITOR, $EDITOR or vi, and applies what you save. If the edit fails to validate or to apply (for example because a journal changed meanwhile), the editor opens again showing the error, with your edits kept. Save an empty file to cancel.

Revisions in the YAML make the apply fail, rather than overwrite, when someone else changed a journal in between.

With --max-txn-size the edit is applied in batches, up to --parallel (default 4) at once; --parallel 1 sends them one after another, as upstream gazctl does.`;
  static override examples = [
    { description: 'Edit every journal under a prefix', command: '<%= config.bin %> journals edit -l name:prefix=acme/' },
    { description: 'Edit with a specific editor', command: 'GAZ_EDITOR="code --wait" <%= config.bin %> journals edit -l app=billing' },
    { description: 'Edit thousands of journals, applied 100 per transaction, 2 transactions at a time', command: '<%= config.bin %> journals edit -l name:prefix=acme/ --max-txn-size 100 --parallel 2' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const { selector, 'max-txn-size': maxTxnSize, parallel } = await this.resolve(OPTIONS);
    const svc = this.serviceOptions('broker');
    const client = this.journalClient(svc);
    try {
      const listing = await client.list(selector);
      if (listing.journals.length === 0) {
        throw new GazctlError(`no journals match selector ${JSON.stringify(formatLabelSelector(selector))}`);
      }
      const initial = encodeJournalTree(journalTreeFromListing(listing.journals));
      await editLoop({
        kind: 'journals',
        initial,
        apply: async (text) => {
          const changes = journalChangesFromYaml(text, 'edited specs');
          const { summary, revision } = await applyJournalChanges(client, changes, maxTxnSize, undefined, parallel);
          this.log_.info('successfully applied', { revision });
          process.stderr.write(summary + '\n');
        },
      });
    } finally {
      client.close();
    }
  }
}
