import { Args, Flags } from '@oclif/core';
import { GazctlCommand } from '../../cli/base.js';
import { checkConfirmFlags, confirmDestructive } from '../../cli/confirm.js';
import { loadContexts, saveContexts } from '../../cli/contexts.js';
import { GazctlError } from '../../lib/protocol/errors.js';

export default class ContextDelete extends GazctlCommand {
  static override summary = 'Delete a context.';
  static override description = `Removes the context NAME and its settings from the contexts file (if it was current, none is then). Asks on a terminal; --yes for scripts; --dry-run says what would go.`;
  static override examples = [{ description: 'Delete a context from a script', command: '<%= config.bin %> context delete old-cluster --yes' }];
  static override args = {
    NAME: Args.string({ required: true, description: 'Context name.' }),
  };
  static override flags = {
    yes: Flags.boolean({ char: 'y', description: 'Delete without asking.' }),
    'dry-run': Flags.boolean({ description: 'Only say what would be deleted.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(ContextDelete);
    checkConfirmFlags({ dryRun: flags['dry-run'], yes: flags.yes });
    const f = await loadContexts();
    const ctx = f.contexts.get(args.NAME);
    if (!ctx) throw new GazctlError(`no context ${JSON.stringify(args.NAME)} in ${f.path}`);
    const current = f.current === args.NAME;
    process.stderr.write(`plan: delete context ${args.NAME} (${ctx.size} setting(s)${current ? ', the current context' : ''}) from ${f.path}\n`);
    const go = await confirmDestructive({ question: `Delete context ${args.NAME}?`, yes: flags.yes, dryRun: flags['dry-run'], action: 'delete a context' });
    if (!go) {
      process.stderr.write(flags['dry-run'] ? 'dry run: nothing deleted\n' : 'nothing deleted\n');
      return;
    }
    f.contexts.delete(args.NAME);
    if (current) f.current = undefined;
    await saveContexts(f);
    process.stderr.write(`deleted context ${args.NAME}${current ? '; no context is current now' : ''}\n`);
  }
}
