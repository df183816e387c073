import { contextFlag, GazctlCommand, journalsOptions, shardsOptions } from '../cli/base.js';
import { activeContext } from '../cli/contexts.js';
import { groupSections, renderConfig, type ConfigSection } from '../cli/print-config.js';
import type { Sources } from '../cli/options.js';
import { findIniFile, loadIni } from '../lib/config/ini.js';
import AttachUUIDs from './attach-uuids.js';
import Health from './health.js';
import JournalsAppend from './journals/append.js';
import JournalsApply from './journals/apply.js';
import JournalsEdit from './journals/edit.js';
import JournalsFlush from './journals/flush.js';
import JournalsForks from './journals/forks.js';
import JournalsFragments from './journals/fragments.js';
import JournalsList from './journals/list.js';
import JournalsPrune from './journals/prune.js';
import JournalsRead from './journals/read.js';
import JournalsResetHead from './journals/reset-head.js';
import JournalsStoreHealth from './journals/store-health.js';
import JournalsSuspend from './journals/suspend.js';
import ShardsApply from './shards/apply.js';
import ShardsEdit from './shards/edit.js';
import ShardsList from './shards/list.js';
import ShardsPruneLog from './shards/prune-log.js';
import ShardsRecover from './shards/recover.js';
import ShardsUnassign from './shards/unassign.js';

/** Sub-commands by group, in the order of their sections (alphabetical, as upstream's). */
const SUBCOMMANDS: Record<'journals' | 'shards', [string, typeof GazctlCommand][]> = {
  journals: [
    ['append', JournalsAppend],
    ['apply', JournalsApply],
    ['edit', JournalsEdit],
    ['flush', JournalsFlush],
    ['forks', JournalsForks],
    ['fragments', JournalsFragments],
    ['list', JournalsList],
    ['prune', JournalsPrune],
    ['read', JournalsRead],
    ['reset-head', JournalsResetHead],
    ['store-health', JournalsStoreHealth],
    ['suspend', JournalsSuspend],
  ],
  shards: [
    ['apply', ShardsApply],
    ['edit', ShardsEdit],
    ['list', ShardsList],
    ['prune-log', ShardsPruneLog],
    ['recover', ShardsRecover],
    ['unassign', ShardsUnassign],
  ],
};

export default class PrintConfig extends GazctlCommand {
  static override summary = 'Print the effective configuration of every command, as gazctl.ini text.';
  static override description = `Reads gazctl.ini (./gazctl.ini, else ~/.config/gazette/gazctl.ini, as every command does) and the environment, and prints the configuration every command would run with: a section per option group and sub-command, each option with its description, and "Field = value". A value equal to the built-in default is shown commented out ("; Field = default"); any other value, and every service endpoint (default included), is preceded by a comment naming where it came from (the command line, a gazctl.ini section, an environment variable or the default), which answers "which broker is this talking to, and why". With nothing configured the endpoints are the Kubernetes Service names http://gazette:8080 (brokers) and http://consumer:8080 (consumers). The output is itself a valid gazctl.ini.

With a context in effect (--context, $GAZCTL_CONTEXT or the current one: gazctl context --help) its values show as "(from context NAME (path))"; they rank below the command line and above gazctl.ini and the environment.

Auth keys and tokens are masked ("<masked>"): the output is safe to paste into a ticket (upstream prints them in clear). A value that does not parse (a malformed address or duration in gazctl.ini or the environment) fails with one line and exit status 2, as it would for any command.`;
  static override examples = [
    { description: 'Where do the broker and consumer addresses come from?', command: '<%= config.bin %> print-config | grep -B2 Address' },
    { description: 'Start a gazctl.ini from the current settings', command: '<%= config.bin %> print-config > gazctl.ini' },
  ];

  static override flags = { ...contextFlag };

  async run(): Promise<void> {
    const { flags } = await this.parse(PrintConfig);
    const ini = loadIni(findIniFile());
    const context = await activeContext(flags.context);
    const base = { argv: {}, given: new Set<string>(), ini, env: process.env };
    const sections: ConfigSection[] = [{ name: 'attach-uuids', options: Object.values(AttachUUIDs.optionSet()), sources: { ...base, group: '', section: 'attach-uuids' } }];
    for (const group of ['journals', 'shards'] as const) {
      const groupSources: Sources = { ...base, group, context };
      const set = group === 'journals' ? journalsOptions : shardsOptions;
      sections.push(...groupSections(group, set, group === 'journals' ? ['Logging', 'Broker'] : ['Logging', 'Consumer', 'Broker'], groupSources));
      for (const [sub, cmd] of SUBCOMMANDS[group]) {
        const section = cmd.iniSection ?? `${group}.${sub}`;
        sections.push({ name: section, options: Object.values(cmd.optionSet()), sources: { ...base, group, section } });
      }
    }
    // Ours: `gazctl health` and the etcd endpoints it checks.
    sections.push({ name: 'health', options: Object.values(Health.optionSet()), sources: { ...base, group: 'journals', section: 'health' } });
    sections.push({ name: 'etcd', options: Object.values(Health.etcdOptionSet()), sources: { ...base, group: 'journals', section: 'etcd', context } });
    process.stdout.write(renderConfig(sections));
  }
}
