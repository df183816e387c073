import { Args, Flags } from '@oclif/core';
import { GazctlCommand, UsageError } from '../../cli/base.js';
import { loadContexts, saveContexts } from '../../cli/contexts.js';
import { GazctlError } from '../../lib/protocol/errors.js';

export default class ContextUse extends GazctlCommand {
  static override summary = 'Make a context the current one (or none).';
  static override description = `Commands run with the current context unless --context or $GAZCTL_CONTEXT names another. --none leaves no context current: commands then use gazctl.ini, the environment and the defaults alone.`;
  static override examples = [
    { description: 'Work on production', command: '<%= config.bin %> context use prod' },
    { description: 'No context', command: '<%= config.bin %> context use --none' },
  ];
  static override args = {
    NAME: Args.string({ required: false, description: 'Context name.' }),
  };
  static override flags = {
    none: Flags.boolean({ description: 'Leave no context current.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(ContextUse);
    if (Boolean(flags.none) === (args.NAME !== undefined)) throw new UsageError('give a context NAME, or --none');
    const f = await loadContexts();
    if (args.NAME !== undefined && !f.contexts.has(args.NAME)) {
      const known = [...f.contexts.keys()];
      throw new GazctlError(`no context ${JSON.stringify(args.NAME)} in ${f.path}${known.length ? `; there are: ${known.join(', ')}` : ''}`);
    }
    f.current = args.NAME;
    await saveContexts(f);
    process.stderr.write(args.NAME === undefined ? 'no context is current\n' : `current context: ${args.NAME}\n`);
  }
}
