import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { formatOption, renderTable } from '../../cli/render.js';
import { booleanOption, listOption, oclifFlags, options, type OptionValues, type OptionSet } from '../../cli/options.js';
import { journalListResponseToJson } from '../../lib/protocol/protojson.js';
import { encodeJournalTreeBytes, journalTreeFromListing } from '../../lib/journalspace/journalspace.js';
import { labelValues } from '../../lib/protocol/labels.js';
import { JournalSpec_Suspend_Level, type ListResponse } from '../../lib/protocol/gen/broker/protocol.js';

const OPTIONS = options({
  selector: selector(false),
  format: formatOption(['table', 'yaml', 'json']),
  'label-columns': listOption({ char: 'L', description: 'Add a column with the values of this label (repeatable).', ini: { field: 'Labels' } }),
  primary: booleanOption({ char: 'p', description: 'Show the primary broker of each journal.', ini: { field: 'Primary' } }),
  replicas: booleanOption({ char: 'r', description: 'Show the replica brokers of each journal.', ini: { field: 'Replicas' } }),
  rf: booleanOption({ description: 'Show the replication factor.', ini: { field: 'RF' } }),
  stores: booleanOption({ description: 'Show the first fragment store.', ini: { field: 'Stores' } }),
  watch: booleanOption({ description: 'Print the listing again after every change, until interrupted.', ini: { field: 'Watch' } }),
});
type ListOptions = OptionValues<typeof OPTIONS>;

export default class JournalsList extends GazctlCommand {
  static override summary = 'List journals with their routes and settings.';
  static override description = `Lists the journals matching a label selector. The table shows names and, on request, replication, primary, replicas, first store and label columns. -o yaml prints the journal hierarchy that "journals apply" and "journals edit" accept (with revisions, so re-applying it is a no-op and a concurrent change is refused). -o json prints the whole List response as proto3 JSON.

With --watch the listing is printed again after every change, until interrupted.`;
  static override examples = [
    { description: 'All journals with their primary and replicas', command: '<%= config.bin %> journals list -p -r' },
    { description: 'Journals under a prefix, as YAML for editing', command: '<%= config.bin %> journals list -l name:prefix=acme/ -o yaml > acme.yaml' },
    { description: 'Show a label as a column', command: '<%= config.bin %> journals list -L content-type --rf --stores' },
    { description: 'Keep watching', command: '<%= config.bin %> journals list -l app=billing --watch' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);
  static override optionSet(): OptionSet {
    return OPTIONS;
  }

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const { selector } = flags;
    const svc = this.serviceOptions('broker');
    const client = this.journalClient(svc);
    try {
      if (!flags.watch) {
        const resp = await client.list(selector);
        // The listing is not used after rendering: the YAML tree may take its specs over.
        process.stdout.write(this.render(resp, flags, true));
        return;
      }
      const ac = new AbortController();
      const stop = () => ac.abort();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      try {
        for await (const snapshot of client.watchJournals(selector, { signal: ac.signal })) {
          const text = this.render(snapshot, flags);
          // Watch output is one document per snapshot; JSON documents are newline-delimited.
          process.stdout.write(typeof text === 'string' && flags.format === 'json' ? text + '\n' : text);
        }
      } catch (err) {
        if (!ac.signal.aborted) throw err;
      }
    } finally {
      client.close();
    }
  }

  /** The listing as the output shows it: text, or (YAML) its UTF-8 bytes, written as they are. */
  private render(resp: ListResponse, flags: ListOptions, lastUse = false): string | Uint8Array {
    if (flags.format === 'json') return journalListResponseToJson(resp);
    if (flags.format === 'yaml') return encodeJournalTreeBytes(journalTreeFromListing(resp.journals, { adoptSpecs: lastUse }));
    const headers = ['Name'];
    if (flags.rf) headers.push('RF');
    if (flags.primary) headers.push('Primary');
    if (flags.replicas) headers.push('Replicas');
    if (flags.stores) headers.push('Stores');
    const labelCols = flags['label-columns'];
    headers.push(...labelCols);
    const rows = resp.journals.map((j) => {
      const spec = j.spec!;
      const route = j.route ?? { members: [], primary: -1, endpoints: [] };
      const row = [spec.name];
      if (flags.rf) row.push(String(spec.replication));
      if (flags.primary) {
        let p = route.primary >= 0 && route.primary < route.members.length ? route.members[route.primary]!.suffix : '<none>';
        if ((spec.suspend?.level ?? JournalSpec_Suspend_Level.NONE) !== JournalSpec_Suspend_Level.NONE) p += ' <S>';
        row.push(p);
      }
      if (flags.replicas) row.push(route.members.filter((_, i) => i !== route.primary).map((m) => m.suffix).join(','));
      if (flags.stores) row.push(spec.fragment?.stores[0] ?? '<none>');
      for (const l of labelCols) {
        const vs = labelValues(spec.labels, l);
        row.push(vs.length ? vs.join(',') : '<none>');
      }
      return row;
    });
    return renderTable(headers, rows);
  }
}
