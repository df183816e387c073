import { Flags } from '@oclif/core';
import { GazctlCommand } from '../../cli/base.js';
import { loadContexts, maskedSettings } from '../../cli/contexts.js';
import { renderTable } from '../../cli/render.js';

export default class ContextList extends GazctlCommand {
  static override summary = 'List the contexts.';
  static override description = `Lists the contexts of the contexts file: a "*" marks the current one; the broker and consumer addresses, and how many settings each holds. Secrets are never printed.

-o json prints {"file","current","contexts":[{"name","current","settings":{OPTION: VALUE}}]}, with auth keys, tokens and URL passwords as "<masked>"; "current" is null when no context is current.`;
  static override examples = [
    { description: 'The contexts', command: '<%= config.bin %> context list' },
    { description: 'For a script', command: '<%= config.bin %> context list -o json' },
  ];
  static override flags = {
    format: Flags.string({ char: 'o', options: ['table', 'json'], default: 'table', description: 'Output format: table, json.' }),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(ContextList);
    const f = await loadContexts();
    const names = [...f.contexts.keys()].sort();
    if (flags.format === 'json') {
      const contexts = names.map((name) => ({ name, current: name === f.current, settings: maskedSettings(f.contexts.get(name)!) }));
      process.stdout.write(JSON.stringify({ file: f.path, current: f.current ?? null, contexts }) + '\n');
      return;
    }
    if (names.length === 0) {
      process.stderr.write(`no contexts in ${f.path} (gazctl context create makes one)\n`);
      return;
    }
    const rows = names.map((name) => {
      const m = f.contexts.get(name)!;
      return [name === f.current ? '*' : '', name, m.get('broker.address') ?? '', m.get('consumer.address') ?? '', String(m.size)];
    });
    process.stdout.write(renderTable(['Current', 'Name', 'Broker Address', 'Consumer Address', 'Settings'], rows));
  }
}
