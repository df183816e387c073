import type { JournalClient } from '../../lib/client/journal-client.js';
import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { formatOption, renderTable } from '../../cli/render.js';
import { booleanOption, oclifFlags, options, type OptionSet } from '../../cli/options.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';
import { requestSuspend, suspendLevel } from '../../lib/client/journal-ops.js';
import { mapLimit } from '../../lib/concurrency.js';
import { sleep } from '../../lib/client/retry.js';
import { JournalSpec_Suspend_Level, type ListResponse } from '../../lib/protocol/gen/broker/protocol.js';

const OPTIONS = options({
  selector: selector(true),
  force: booleanOption({ char: 'f', description: 'Suspend journals even if they have local fragments (they are rolled and persisted first).', ini: { field: 'Force' } }),
  format: formatOption(['table', 'json']),
});

const PARALLEL = 16;

interface Row {
  journal: string;
  before: JournalSpec_Suspend_Level;
  after?: JournalSpec_Suspend_Level;
  offset?: bigint;
  result: string;
  failed?: boolean;
}

export default class JournalsSuspend extends GazctlCommand {
  static override summary = 'Suspend idle journals, so they use fewer or no broker replicas.';
  static override description = `Asks the brokers to suspend each selected journal that is not fully suspended yet. A journal without fragments is suspended fully (no replicas). A journal whose fragments are all persisted, the newest at least one flush interval old (24h when the spec sets none), is suspended partially (one replica serves reads). Any other journal is left as it is, unless --force is given: then its local fragments are rolled and persisted, and it is suspended partially whatever their age.

The level and the offset appends resume at are kept in the journal spec's "suspend" field. The next ordinary append resumes the journal. When you apply specs yourself, carry the "suspend" field over ("journals edit", and "journals list -o yaml" followed by "journals apply", do).

The outcome is printed per journal (level after the request). Exit status 1 when a broker refused a request.

-o json prints one document on stdout: {"journals":[{"journal","result","error","suspend","resume_offset"}]}; result is what happened ("suspended", "already suspended", "not suspended", …, or "failed", and then "error" says why); suspend is the level after the run (NONE, PARTIAL, FULL); resume_offset is a decimal string.`;
  static override examples = [
    { description: 'Suspend idle journals of an application', command: '<%= config.bin %> journals suspend -l app=billing' },
    { description: 'Suspend now, even with unpersisted fragments', command: '<%= config.bin %> journals suspend -l name=acme/events --force' },
    { description: 'The outcome as JSON', command: '<%= config.bin %> journals suspend -l app=billing -o json' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const client = this.journalClient();
    try {
      const listing = await client.list(flags.selector);
      if (listing.journals.length === 0) throw new GazctlError(`no journals match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);
      const rows: Row[] = listing.journals.map((j) => ({ journal: j.spec!.name, before: suspendLevel(j.spec), result: '' }));
      let revision = 0n;
      await mapLimit(rows, PARALLEL, async (row) => {
        if (row.before === JournalSpec_Suspend_Level.FULL) {
          row.result = 'already fully suspended';
          return;
        }
        try {
          const out = await requestSuspend(client, row.journal, { force: flags.force });
          if (out.kind === 'ok' && out.revision > revision) revision = out.revision;
          row.result = out.kind;
          this.log_.info('journal suspension status', { journal: row.journal, status: out.kind === 'ok' ? 'OK' : 'SUSPENDED' });
        } catch (err) {
          row.failed = true;
          row.result = `failed: ${(err as Error).message}`;
        }
      });

      // The brokers write the new level to etcd before they answer; list again, at least at
      // the revision the last answer came from, to show it.
      const after = await this.listAtLeast(client, flags.selector, revision);
      const specs = new Map(after.journals.map((j) => [j.spec!.name, j.spec!]));
      for (const row of rows) {
        const spec = specs.get(row.journal);
        row.after = suspendLevel(spec);
        row.offset = spec?.suspend?.offset ?? 0n;
        if (row.failed || row.before === JournalSpec_Suspend_Level.FULL) continue;
        if (row.after === JournalSpec_Suspend_Level.NONE) {
          row.result = flags.force ? 'not suspended' : 'not suspended: not idle (unpersisted or recent fragments; --force suspends anyway)';
        } else if (row.after === row.before) {
          row.result = 'already suspended';
        } else {
          row.result = 'suspended';
        }
      }

      if (flags.format === 'json') {
        const journals = rows.map((r) => ({
          journal: r.journal,
          result: r.failed ? 'failed' : r.result.replace(/:.*$/, ''),
          ...(r.failed ? { error: r.result.replace(/^failed: /, '') } : {}),
          suspend: levelName(r.after ?? r.before),
          resume_offset: (r.offset ?? 0n).toString(),
        }));
        process.stdout.write(JSON.stringify({ journals }) + '\n');
      } else {
        process.stdout.write(
          renderTable(
            ['Journal', 'Suspend', 'Resume Offset', 'Result'],
            rows.map((r) => [r.journal, levelName(r.after ?? r.before), (r.offset ?? 0n).toString(), r.result]),
          ),
        );
      }
      const failed = rows.filter((r) => r.failed);
      if (failed.length > 0) {
        throw new GazctlError(`failed to suspend journal ${failed[0]!.journal}: ${failed[0]!.result.replace(/^failed: /, '')}${failed.length > 1 ? ` (and ${failed.length - 1} more)` : ''}`);
      }
    } finally {
      client.close();
    }
  }

  /** Lists `selector`, polling briefly until the answer is at least at `revision`. */
  private async listAtLeast(client: JournalClient, sel: Parameters<JournalClient['list']>[0], revision: bigint): Promise<ListResponse> {
    let res = await client.list(sel);
    for (let i = 0; i < 50 && (res.header?.etcd?.revision ?? 0n) < revision; i++) {
      await sleep(100);
      res = await client.list(sel);
    }
    return res;
  }
}

function levelName(l: JournalSpec_Suspend_Level): string {
  return JournalSpec_Suspend_Level[l] ?? String(l);
}
