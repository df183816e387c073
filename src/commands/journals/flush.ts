import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { formatOption, renderTable } from '../../cli/render.js';
import { booleanOption, oclifFlags, options, type OptionSet } from '../../cli/options.js';
import { FlushClient, FlushUnsupportedError, type FlushResult } from '../../lib/client/flush-client.js';
import type { JournalClient } from '../../lib/client/journal-client.js';
import { sleep } from '../../lib/client/retry.js';
import { mapLimit } from '../../lib/concurrency.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { fragmentContentPath } from '../../lib/protocol/fragment.js';
import { JournalSpec_Suspend_Level, type Fragment } from '../../lib/protocol/gen/broker/protocol.js';
import { formatLabelSelector } from '../../lib/protocol/selector.js';

const OPTIONS = options({
  selector: selector(true),
  wait: booleanOption({
    description: 'After each flush, also wait until the journal\'s fragment listing (what "journals fragments" and "journals read --from/--to" see) shows every offset before the flushed write head as persisted.',
    ini: null,
  }),
  format: formatOption(['table', 'json']),
});

/** Journals flushed at once. */
const PARALLEL = 16;

interface Row {
  journal: string;
  result?: FlushResult;
  /** The journal is fully suspended: nothing is spooled, nothing to flush. */
  suspended?: boolean;
  error?: string;
}

export default class JournalsFlush extends GazctlCommand {
  static override summary = 'Persist the open spools of journals now.';
  static override description = `Asks the primary broker of each selected journal to close its open spool (the fragment appends currently go to) and store it, and prints each journal's persisted fragment: its name (path in the store), begin and end offsets, store and modification time. A flush returns only once the fragment is in the journal's fragment store, together with every spool the broker closed before it; appends that reached the primary before the flush are in it, appends after it start a new fragment. A journal whose spool is empty is reported with the last fragment its primary knows to be stored (if any), and "(empty spool)".

Without --wait the command trusts the primary's answer: the fragment is stored. With --wait it also lists the journal's fragments through the brokers, as "journals fragments" and "journals read --from/--to" do, until every fragment before the flushed write head shows as persisted (a broker answering the listing may not have indexed the new object yet); it gives up after --timeout (0: never).

Fully suspended journals are skipped (they hold no spool). The exit status is 1 when any journal could not be flushed; the error names it.

On-demand flush is an addition of these brokers (the gazctl.flush.Flush gRPC service). Upstream brokers do not have it: against them the command fails with exit status 1; there, spools are persisted on the schedule of each journal's fragment.flush_interval.

A daily batch job can flush first, then process what was persisted since the previous run: every byte appended before the flush returned is in a fragment whose modification time is at most the time taken after it.

-o json prints one line per journal (NDJSON): {"journal","result","error","write_head","fragment":{"name","begin","end","backing_store","mod_time"}}; result is flushed, empty, suspended or failed ("error" then says why); offsets are exact integers; fragment is absent when there is none.`;
  static override examples = [
    { description: 'Persist the spools of an application\'s journals', command: '<%= config.bin %> journals flush -l app=billing' },
    { description: 'As JSON, waiting until the listings show the fragments', command: '<%= config.bin %> journals flush -l name=acme/events --wait -o json' },
    {
      description: 'Cron, just after midnight UTC: flush, then process what was persisted over the last day',
      command: 'gazctl journals flush -l app=billing --wait && TO=$(date -u +%s) && gazctl journals read -l app=billing --from $((TO - 86400)) --to $TO -o yesterday.out',
    },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const svc = this.serviceOptions('broker');
    const client = this.journalClient(svc);
    const flusher = new FlushClient(svc, { pool: client.pool, timeoutMs: svc.timeoutMs });
    try {
      const listing = await client.list(flags.selector);
      if (listing.journals.length === 0) throw new GazctlError(`no journals match selector ${JSON.stringify(formatLabelSelector(flags.selector))}`);
      const rows: Row[] = listing.journals.map((j) => ({ journal: j.spec!.name, suspended: j.spec?.suspend?.level === JournalSpec_Suspend_Level.FULL }));
      let unsupported: FlushUnsupportedError | undefined;
      await mapLimit(rows, PARALLEL, async (row) => {
        if (row.suspended || unsupported) return;
        try {
          row.result = await flusher.flush(row.journal);
          this.log_.info('flushed journal', { journal: row.journal, rolled: row.result.rolled, writeHead: row.result.writeHead.toString() });
          if (flags.wait) await this.waitListed(client, row.result, svc.timeoutMs);
        } catch (e) {
          if (e instanceof FlushUnsupportedError) unsupported ??= e;
          row.error = (e as Error).message;
        }
      });
      // A broker without the service refuses every journal alike: one line says so.
      if (unsupported) throw unsupported;

      if (flags.format === 'json') process.stdout.write(rows.map((r) => rowJson(r) + '\n').join(''));
      else process.stdout.write(renderTable(['Journal', 'Fragment', 'Begin', 'End', 'Store', 'Mod Time', 'Result'], rows.map(rowCells)));

      const failed = rows.filter((r) => r.error !== undefined);
      if (failed.length > 0) {
        const names = failed.map((r) => r.journal);
        const shown = names.slice(0, 5).join(', ') + (names.length > 5 ? ` and ${names.length - 5} more` : '');
        throw new GazctlError(`could not flush ${failed.length} of ${rows.length} journals: ${shown} (first error: ${failed[0]!.error})`);
      }
    } finally {
      flusher.close();
      client.close();
    }
  }

  /**
   * Lists the journal's fragments until none before the flushed write head is still local, and
   * the persisted ones reach it. Gives up after `timeoutMs` (0: never).
   */
  private async waitListed(client: JournalClient, r: FlushResult, timeoutMs: number): Promise<void> {
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : Infinity;
    const head = r.writeHead;
    for (let attempt = 0; ; attempt++) {
      const frags = (await client.listFragments(r.journal)).map((f) => f.spec!);
      const before = frags.filter((f) => f.begin < head);
      const local = before.filter((f) => f.mod_time === 0n);
      const reach = before.reduce((m, f) => (f.mod_time !== 0n && f.end > m ? f.end : m), 0n);
      if (local.length === 0 && (before.length === 0 || reach >= head)) return;
      if (Date.now() >= deadline) {
        throw new GazctlError(`flushing ${r.journal}: the brokers still list [${local[0]?.begin ?? reach}, ${head}) as not persisted after --timeout`);
      }
      this.log_.debug('waiting for the fragment listing', { journal: r.journal, attempt, local: local.length });
      await sleep(Math.min(1000, 50 * 2 ** Math.min(attempt, 5)));
    }
  }
}

function modTimeText(f: Fragment): string {
  return f.mod_time === 0n ? '' : new Date(Number(f.mod_time) * 1000).toISOString().replace('.000Z', 'Z');
}

function rowCells(r: Row): string[] {
  const f = r.result?.fragment;
  const cells = f && f.end > f.begin ? [fragmentContentPath(f), f.begin.toString(), f.end.toString(), f.backing_store || '(none)', modTimeText(f)] : ['', '', '', '', ''];
  let result: string;
  if (r.error !== undefined) result = `failed: ${r.error}`;
  else if (r.suspended) result = 'fully suspended (nothing to flush)';
  else if (r.result?.rolled) result = f?.backing_store ? 'flushed' : 'closed (the journal has no store)';
  else result = '(empty spool)';
  return [r.journal, ...cells, result];
}

/** One JSON object per journal; 64-bit numbers exact. */
function rowJson(r: Row): string {
  const str = JSON.stringify;
  const parts = [`"journal":${str(r.journal)}`];
  if (r.error !== undefined) parts.push(`"result":"failed"`, `"error":${str(r.error)}`);
  else if (r.suspended) parts.push(`"result":"suspended"`);
  else parts.push(`"result":${r.result!.rolled ? '"flushed"' : '"empty"'}`, `"write_head":${r.result!.writeHead}`);
  const f = r.result?.fragment;
  if (f && f.end > f.begin) {
    parts.push(
      `"fragment":{"name":${str(fragmentContentPath(f))},"begin":${f.begin},"end":${f.end},"backing_store":${str(f.backing_store)},"mod_time":${f.mod_time}}`,
    );
  }
  return `{${parts.join(',')}}`;
}
