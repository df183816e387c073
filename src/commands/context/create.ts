import { Args, Flags } from '@oclif/core';
import { GazctlCommand } from '../../cli/base.js';
import { checkContextName, loadContexts, parseSettings, saveContexts } from '../../cli/contexts.js';
import { contextOptions } from '../../cli/context-options.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import Health from '../health.js';

export default class ContextCreate extends GazctlCommand {
  static override summary = 'Create a context: named settings for one cluster.';
  static override description = `Stores OPTION=VALUE settings under NAME in the contexts file ($XDG_CONFIG_HOME/gazctl/contexts.yaml, else ~/.config/gazctl/contexts.yaml; $GAZCTL_CONTEXTS_FILE names another), written with mode 0600. OPTION is the long name of an option of the journals and shards commands (broker.address, consumer.address, broker.trusted-ca-file, broker.auth-token, zone, timeout, ...) or an etcd option (etcd.address, etcd.trusted-ca-file, ...); each value is checked as the command line would check it.

A command runs with the context --context names, else $GAZCTL_CONTEXT, else the current one (gazctl context use). Its settings beat gazctl.ini and the environment; the command line beats them (gazctl print-config shows where each value comes from).`;
  static override examples = [
    { description: 'A context for production, made current', command: '<%= config.bin %> context create prod broker.address=http://gazette.prod.example:8080 consumer.address=http://word-count.prod.example:8080 --use' },
    { description: 'One with TLS and a token', command: '<%= config.bin %> context create staging broker.address=https://gazette.staging:8080 broker.trusted-ca-file=/etc/gazette/ca.pem broker.auth-token=$TOKEN' },
  ];
  static override strict = false;
  static override args = {
    NAME: Args.string({ required: true, description: 'Context name (letters, digits, ".", "_", "-").' }),
  };
  static override flags = {
    use: Flags.boolean({ description: 'Also make it the current context.' }),
  };

  async run(): Promise<void> {
    const { args, flags, argv } = await this.parse(ContextCreate);
    const name = args.NAME;
    checkContextName(name);
    const settings = parseSettings((argv as string[]).slice(1), contextOptions(Health.etcdOptionSet()));
    const f = await loadContexts();
    if (f.contexts.has(name)) throw new GazctlError(`context ${JSON.stringify(name)} exists already in ${f.path} (gazctl context set changes it)`);
    f.contexts.set(name, new Map(settings));
    if (flags.use) f.current = name;
    await saveContexts(f);
    process.stderr.write(`created context ${name}${flags.use ? ' (current)' : ''} in ${f.path}\n`);
  }
}
