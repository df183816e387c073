import { Args, Flags } from '@oclif/core';
import { GazctlCommand, UsageError } from '../../cli/base.js';
import { activeContext, loadContexts, maskedSettings } from '../../cli/contexts.js';
import { GazctlError } from '../../lib/protocol/errors.js';

export default class ContextShow extends GazctlCommand {
  static override summary = 'Show the settings of a context.';
  static override description = `Prints the settings of the context NAME, or of the one in effect (--context, $GAZCTL_CONTEXT, else the current one), one "OPTION = VALUE" per line. Auth keys, tokens and passwords in URLs print as "<masked>".

-o json prints {"name","file","current","settings":{OPTION: VALUE}}, masked alike.`;
  static override examples = [
    { description: 'The context in effect', command: '<%= config.bin %> context show' },
    { description: 'Another one, as JSON', command: '<%= config.bin %> context show staging -o json' },
  ];
  static override args = {
    NAME: Args.string({ required: false, description: 'Context name (default: the one in effect).' }),
  };
  static override flags = {
    format: Flags.string({ char: 'o', options: ['text', 'json'], default: 'text', description: 'Output format: text, json.' }),
    context: Flags.string({ description: 'The context to show, as the other commands take it.' }),
  };

  async run(): Promise<void> {
    const { args, flags } = await this.parse(ContextShow);
    const f = await loadContexts();
    let name = args.NAME;
    if (name === undefined) {
      const ctx = await activeContext(flags.context);
      if (!ctx) throw new UsageError(`no context is in effect: name one, or make one current (gazctl context use NAME)`);
      name = ctx.name;
    }
    const values = f.contexts.get(name);
    if (!values) throw new GazctlError(`no context ${JSON.stringify(name)} in ${f.path}`);
    const settings = maskedSettings(values);
    if (flags.format === 'json') {
      process.stdout.write(JSON.stringify({ name, file: f.path, current: name === f.current, settings }) + '\n');
      return;
    }
    let out = `# context ${name}${name === f.current ? ' (current)' : ''}, in ${f.path}\n`;
    for (const [k, v] of Object.entries(settings)) out += `${k} = ${v}\n`;
    process.stdout.write(out);
  }
}
