import { GazctlCommand, journalsBaseFlags } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { formatOption, humanizeBytes, humanizeTime, renderTable } from '../../cli/render.js';
import { durationOption, intOption, oclifFlags, options } from '../../cli/options.js';
import { sumToHex } from '../../lib/protocol/fragment.js';
import { CompressionCodec, JournalSpec_Suspend_Level, type Fragment, type FragmentsResponse__Fragment } from '../../lib/protocol/gen/broker/protocol.js';

const OPTIONS = options({
  selector: selector(false),
  format: formatOption(['table', 'json']),
  from: intOption({ description: 'Only fragments persisted at or after this time (unix seconds).', default: 0, min: 0, ini: { field: 'FromUnix' } }),
  to: intOption({ description: 'Only fragments persisted at or before this time (unix seconds).', default: 0, min: 0, ini: { field: 'ToUnix' } }),
  'url-ttl': durationOption({ description: 'Include signed fragment URLs valid for this long (Go duration, e.g. 1h).', default: '0s', showDefault: true, ini: { field: 'SigTTL' } }),
});

export default class JournalsFragments extends GazctlCommand {
  static override summary = 'List the fragments of journals.';
  static override description = `Lists the fragments of every journal matching the selector (all journals when it is empty), as the brokers index them: per offset range the largest fragment, in offset order. Fully suspended journals are skipped.

--from and --to (unix seconds) bound the store modification time; with --to, fragments not yet persisted are left out. --url-ttl adds signed URLs valid that long.

-o json prints one JSON object per fragment and line, with 64-bit numbers exact.`;
  static override examples = [
    { description: 'Fragments of one journal', command: '<%= config.bin %> journals fragments -l name=acme/events' },
    { description: "Yesterday's persisted fragments as JSON", command: '<%= config.bin %> journals fragments -l app=billing --from $(date -d yesterday +%s) --to $(date +%s) -o json' },
  ];
  static override group = 'journals' as const;
  static override baseFlags = journalsBaseFlags;
  static override flags = oclifFlags(OPTIONS);

  async run(): Promise<void> {
    const flags = await this.resolve(OPTIONS);
    const { selector } = flags;
    const ttl = flags['url-ttl'];
    const svc = this.serviceOptions('broker');
    const client = this.journalClient(svc);
    try {
      const listing = await client.list(selector);
      const journals = listing.journals.filter((j) => j.spec?.suspend?.level !== JournalSpec_Suspend_Level.FULL).map((j) => j.spec!.name);
      const results = await mapLimit(journals, 16, (journal) =>
        client.listFragments(journal, {
          beginModTime: BigInt(flags.from),
          endModTime: BigInt(flags.to),
          signatureTTLms: ttl > 0n ? Number(ttl / 1_000_000n) : undefined,
        }),
      );
      const all = results.flat();
      if (flags.format === 'json') {
        process.stdout.write(all.map(fragmentJson).map((l) => l + '\n').join(''));
        return;
      }
      const headers = ['Journal', 'Offset', 'Length', 'Persisted', 'SHA1', 'Compression'];
      if (ttl > 0n) headers.push('URL');
      const now = Date.now() / 1000;
      const rows = all.map((f) => {
        const s = f.spec!;
        const row = [
          s.journal,
          s.begin.toString(),
          humanizeBytes(s.end - s.begin),
          s.mod_time === 0n ? '' : humanizeTime(Number(s.mod_time), now),
          sumToHex(s.sum!).slice(0, 12) + '...',
          CompressionCodec[s.compression_codec] ?? String(s.compression_codec),
        ];
        if (ttl > 0n) row.push(f.signed_url);
        return row;
      });
      process.stdout.write(renderTable(headers, rows));
    } finally {
      client.close();
    }
  }
}

/** Plain JSON of one fragment, zero fields omitted (spec and sum always), 64-bit numbers exact. */
export function fragmentJson(f: FragmentsResponse__Fragment): string {
  const s: Fragment = f.spec!;
  const parts: string[] = [];
  const num = (k: string, v: bigint | number) => {
    if (v !== 0n && v !== 0) parts.push(`${JSON.stringify(k)}:${v.toString()}`);
  };
  const str = (k: string, v: string) => {
    if (v) parts.push(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
  };
  str('journal', s.journal);
  num('begin', s.begin);
  num('end', s.end);
  const sum = s.sum ?? { part1: 0n, part2: 0n, part3: 0 };
  const sumParts: string[] = [];
  if (sum.part1) sumParts.push(`"part1":${sum.part1}`);
  if (sum.part2) sumParts.push(`"part2":${sum.part2}`);
  if (sum.part3) sumParts.push(`"part3":${sum.part3}`);
  parts.push(`"sum":{${sumParts.join(',')}}`);
  num('compression_codec', s.compression_codec);
  str('backing_store', s.backing_store);
  num('mod_time', s.mod_time);
  str('path_postfix', s.path_postfix);
  const top = [`"spec":{${parts.join(',')}}`];
  if (f.signed_url) top.push(`"signed_url":${JSON.stringify(f.signed_url)}`);
  return `{${top.join(',')}}`;
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
