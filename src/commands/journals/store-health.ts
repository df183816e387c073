import { Args } from '@oclif/core';
import { GazctlCommand, journalsBaseFlags, UsageError } from '../../cli/base.js';
import { oclifFlags, optionalStringOption, options, type OptionSet } from '../../cli/options.js';
import { formatOption } from '../../cli/render.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { checkStoreURL } from '../../lib/protocol/validate/store-url.js';
import { Status } from '../../lib/protocol/gen/broker/protocol.js';

const OPTIONS = options({
  'check-delete-prefix': optionalStringOption({
    description: 'Also write and delete a probe object under this prefix of the store (ending in "/"; empty: the store root), to prove delete permission.',
    ini: { field: 'CheckDeletePrefix' },
  }),
  format: formatOption(['text', 'json']),
});

export default class JournalsStoreHealth extends GazctlCommand {
  static override summary = 'Check that the brokers can use a fragment store.';
  static override description = `Asks the broker at --broker.address (no routing) whether it can use the fragment store STORE_URL, with its own credentials, not yours. The broker checks the store (waiting for its first background check of that store if it has none yet) and answers healthy, or unhealthy with the reason.

With --check-delete-prefix the broker also writes and deletes a throw-away object under that prefix, which proves it may delete (as retention pruning needs). The prefix is relative to the store, ends in "/", or is empty for the store root. Brokers that predate this probe (v0.103 and older) ignore it and check only what they always check.

Prints "Fragment store <url> is healthy" and exits 0, or prints the reason on stderr and exits 1. -o json prints {"store","check_delete_prefix","healthy","error"} on stdout either way (check_delete_prefix null when not asked, error "" when healthy), with the same exit status and, when unhealthy, the same line on stderr.`;
  static override examples = [
    { description: 'An S3 bucket', command: '<%= config.bin %> journals store-health s3://my-bucket/and/prefix/' },
    { description: 'A local directory', command: '<%= config.bin %> journals store-health file:///var/local/data/' },
    { description: 'Also prove delete permission under a prefix', command: '<%= config.bin %> journals store-health s3://my-bucket/ --check-delete-prefix probes/' },
    { description: 'For a monitoring script', command: '<%= config.bin %> journals store-health s3://my-bucket/ -o json' },
  ];
  static override args = {
    STORE_URL: Args.string({ required: true, description: 'Fragment store URL, e.g. s3://bucket/prefix/ or file:///dir/.' }),
  };
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const { args } = await this.parse(JournalsStoreHealth);
    const store = args.STORE_URL;
    const problem = checkStoreURL(store);
    if (problem) throw new UsageError(`STORE_URL ${JSON.stringify(store)}: ${problem}`);
    const prefix = flags['check-delete-prefix'];
    if (prefix !== undefined) {
      const bad = checkDeletePrefix(prefix);
      if (bad) throw new UsageError(`--check-delete-prefix ${JSON.stringify(prefix)}: ${bad}`);
    }
    const client = this.journalClient();
    try {
      const res = await client.fragmentStoreHealth(store, prefix);
      const healthy = res.status === Status.OK;
      if (flags.format === 'json') {
        const error = healthy ? '' : oneLine(res.store_health_error);
        process.stdout.write(JSON.stringify({ store, check_delete_prefix: prefix ?? null, healthy, error }) + '\n');
      }
      if (healthy) {
        if (flags.format !== 'json') process.stdout.write(`Fragment store ${store} is healthy\n`);
        return;
      }
      throw new GazctlError(`fragment store ${store} is unhealthy: ${oneLine(res.store_health_error)}`);
    } finally {
      client.close();
    }
  }
}

/** Why `p` is not a usable delete-probe prefix, or undefined: "" or a relative path ending in "/". */
export function checkDeletePrefix(p: string): string | undefined {
  if (p === '') return undefined;
  if (!p.endsWith('/')) return 'must end in "/"';
  if (p.startsWith('/')) return 'must be relative to the store (no leading "/")';
  const parts = p.slice(0, -1).split('/');
  if (parts.some((s) => s === '')) return 'must not contain empty path segments';
  if (parts.some((s) => s === '.' || s === '..')) return 'must not contain "." or ".." segments';
  return undefined;
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, '; ').trim() || 'no reason given';
}
