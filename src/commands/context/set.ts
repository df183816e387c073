import { Args, Flags } from '@oclif/core';
import { GazctlCommand, UsageError } from '../../cli/base.js';
import { loadContexts, parseSettings, saveContexts } from '../../cli/contexts.js';
import { contextOptions } from '../../cli/context-options.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import Health from '../health.js';

export default class ContextSet extends GazctlCommand {
  static override summary = 'Change settings of a context.';
  static override description = `Sets OPTION=VALUE settings of the context NAME (replacing a value it holds) and removes those named by --unset; each value is checked as the command line would check it. The file is rewritten atomically, mode 0600.`;
  static override examples = [
    { description: 'Point prod at another broker Service', command: '<%= config.bin %> context set prod broker.address=http://gazette.gazette-prod.svc:8080' },
    { description: 'Drop a token', command: '<%= config.bin %> context set prod --unset broker.auth-token' },
  ];
  static override strict = false;
  static override args = {
    NAME: Args.string({ required: true, description: 'Context name.' }),
  };
  static override flags = {
    unset: Flags.string({ description: 'Remove this setting (repeatable).', multiple: true }),
  };

  async run(): Promise<void> {
    const { args, flags, argv } = await this.parse(ContextSet);
    const known = contextOptions(Health.etcdOptionSet());
    const settings = parseSettings((argv as string[]).slice(1), known);
    const unset = flags.unset ?? [];
    for (const k of unset) if (!known[k]) throw new UsageError(`--unset ${JSON.stringify(k)}: not an option a context can hold`);
    if (settings.length === 0 && unset.length === 0) throw new UsageError('nothing to change: give OPTION=VALUE settings or --unset OPTION');
    const f = await loadContexts();
    const ctx = f.contexts.get(args.NAME);
    if (!ctx) throw new GazctlError(`no context ${JSON.stringify(args.NAME)} in ${f.path} (gazctl context create makes one)`);
    for (const [k, v] of settings) ctx.set(k, v);
    for (const k of unset) ctx.delete(k);
    await saveContexts(f);
    process.stderr.write(`updated context ${args.NAME}: ${[...settings.map(([k]) => `set ${k}`), ...unset.map((k) => `removed ${k}`)].join(', ')}\n`);
  }
}
