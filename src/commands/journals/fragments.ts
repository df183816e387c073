import { GazctlCommand, journalsBaseFlags, UsageError } from '../../cli/base.js';
import { selector } from '../../cli/flags.js';
import { formatOption, humanizeBytes, humanizeTime, renderTable } from '../../cli/render.js';
import { booleanOption, durationOption, oclifFlags, optionalStringOption, options, timeOption, type OptionSet } from '../../cli/options.js';
import { Progress } from '../../cli/progress.js';
import { verifyFragment, type VerifyOutcome } from '../../lib/client/fragment-verify.js';
import { GazctlError } from '../../lib/protocol/errors.js';
import { fragmentContentPath, sumToHex } from '../../lib/protocol/fragment.js';
import type { FragmentStore } from '../../lib/stores/index.js';
import { StoreSet } from '../../cli/fragments-plan.js';
import { CompressionCodec, JournalSpec_Suspend_Level, type Fragment, type FragmentsResponse__Fragment } from '../../lib/protocol/gen/broker/protocol.js';
import { mapLimit } from '../../lib/concurrency.js';

const OPTIONS = options({
  selector: selector(false),
  format: formatOption(['table', 'json']),
  from: timeOption({ description: 'Only fragments persisted at or after this time (unix seconds, RFC 3339, or a duration ago such as 24h).', ini: { field: 'FromUnix' } }),
  to: timeOption({ description: 'Only fragments persisted at or before this time (unix seconds, RFC 3339, or a duration ago such as 24h).', ini: { field: 'ToUnix' } }),
  'url-ttl': durationOption({ description: 'Include signed fragment URLs valid for this long (Go duration, e.g. 1h).', default: '0s', showDefault: true, ini: { field: 'SigTTL' } }),
  verify: booleanOption({ description: 'Read every listed persisted fragment from its store and check its length and SHA-1 sum; exit 1 if any fails.', ini: null }),
  totals: booleanOption({ description: 'End with totals: fragments and bytes, persisted and spooled (a line under the table; a {"totals": ...} line with -o json).', ini: null }),
  'file-root': optionalStringOption({ description: 'Local directory rooting file:// fragment stores, for --verify.', ini: { field: 'FileRoot' } }),
});

/** Objects verified at once. */
const VERIFY_CONCURRENCY = 8;
/** URL validity asked of brokers for --verify without --url-ttl. */
const VERIFY_URL_TTL_MS = 15 * 60_000;

export default class JournalsFragments extends GazctlCommand {
  static override summary = 'List the fragments of journals.';
  static override description = `Lists the fragments of every journal matching the selector (all journals when it is empty), as the brokers index them: per offset range the largest fragment, in offset order. Fully suspended journals are skipped.

--from and --to bound the store modification time (unix seconds, RFC 3339 times, or durations ago such as 24h); with --to, fragments not yet persisted are left out. --url-ttl adds signed URLs valid that long; for an s3:// fragment the broker did not sign, gazctl signs one itself with its own AWS credentials.

--totals ends the output with totals: fragments and bytes, persisted and spooled (not yet persisted). Without it the table is exactly upstream's.

--verify reads every listed persisted fragment from its store (through a broker-signed URL, or with gazctl's own access: --file-root for file:// stores, AWS credentials for s3://), decompresses it, and checks that it holds end - begin bytes whose SHA-1 is the sum in its name. Every mismatch and every unreadable object is reported; the exit status is 1 if there is any.

-o json prints one JSON object per fragment and line, with 64-bit numbers exact; --verify adds one {"verify_failed": ...} line per bad object and --totals a final {"totals": ...} line.`;
  static override examples = [
    { description: 'Fragments of one journal', command: '<%= config.bin %> journals fragments -l name=acme/events' },
    { description: "Yesterday's persisted fragments as JSON", command: '<%= config.bin %> journals fragments -l app=billing --from $(date -d yesterday +%s) --to $(date +%s) -o json' },
    { description: 'Check the stored fragments of the last day', command: '<%= config.bin %> journals fragments -l app=billing --from 24h --verify' },
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
    const ttl = flags['url-ttl'];
    if (flags.to > 0 && flags.from > flags.to) throw new UsageError(`--from (${flags.from}) is after --to (${flags.to})`);
    const svc = this.serviceOptions('broker');
    const client = this.journalClient(svc);
    const ttlMs = ttl > 0n ? Number(ttl / 1_000_000n) : undefined;
    const stores = new StoreSet(flags['file-root']);
    const storeFor = (url: string): FragmentStore | undefined => {
      const s = stores.get(url);
      return s instanceof Error ? undefined : s;
    };
    let all: FragmentsResponse__Fragment[];
    try {
      const listing = await client.list(selector);
      const journals = listing.journals.filter((j) => j.spec?.suspend?.level !== JournalSpec_Suspend_Level.FULL).map((j) => j.spec!.name);
      const results = await mapLimit(journals, 16, (journal) =>
        client.listFragments(journal, {
          beginModTime: BigInt(flags.from),
          endModTime: BigInt(flags.to),
          // --verify reads through the brokers' signed URLs where they have some.
          signatureTTLms: ttlMs ?? (flags.verify ? VERIFY_URL_TTL_MS : undefined),
        }),
      );
      all = results.flat();
    } finally {
      client.close();
    }
    // Signed URLs the brokers left out, for s3:// stores: sign them here.
    const urls = all.map((f) => f.signed_url);
    if (ttlMs !== undefined) {
      await mapLimit(all.map((f, i) => [f, i] as const), 16, async ([f, i]) => {
        const s = f.spec!;
        if (f.signed_url || s.mod_time === 0n || !s.backing_store.toLowerCase().startsWith('s3:')) return;
        const store = storeFor(s.backing_store);
        if (!store) return;
        try {
          urls[i] = await store.signGet(fragmentContentPath(s), ttlMs);
        } catch (e) {
          throw new GazctlError(`cannot sign a URL for ${s.journal} [${s.begin}, ${s.end}) in ${s.backing_store}: ${(e as Error).message}`, { cause: e });
        }
      });
    }
    const shown = all.map((f, i) => (ttlMs !== undefined ? { ...f, signed_url: urls[i]! } : { ...f, signed_url: '' }));

    let failed: VerifyOutcome[] = [];
    let verified = 0;
    if (flags.verify) {
      const persisted = all.map((f, i) => ({ f, url: urls[i] })).filter(({ f }) => f.spec!.mod_time !== 0n);
      const total = persisted.reduce((n, { f }) => n + Number(f.spec!.end - f.spec!.begin), 0);
      const progress = new Progress({ label: 'verified', total: persisted.length, totalBytes: total });
      const outcomes = await mapLimit(persisted, VERIFY_CONCURRENCY, async ({ f, url }) => {
        const spec = f.spec!;
        const o = await verifyFragment(spec, { url: url || undefined, store: storeFor(spec.backing_store), fileRoot: flags['file-root'] });
        progress.tick(1, Number(spec.end - spec.begin));
        return o;
      });
      progress.finish();
      verified = outcomes.length;
      failed = outcomes.filter((o) => !o.ok);
    }

    const t = totalsOf(all);
    if (flags.format === 'json') {
      let text = shown.map(fragmentJson).map((l) => l + '\n').join('');
      for (const o of failed) text += verifyJson(o) + '\n';
      if (flags.totals) text += totalsJson(t, flags.verify ? { verified, failed: failed.length } : undefined) + '\n';
      process.stdout.write(text);
    } else {
      const headers = ['Journal', 'Offset', 'Length', 'Persisted', 'SHA1', 'Compression'];
      if (ttl > 0n) headers.push('URL');
      const now = Date.now() / 1000;
      const rows = shown.map((f) => {
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
      let text = renderTable(headers, rows);
      if (flags.totals) {
        text +=
          `Total: ${t.count} fragments, ${humanizeBytes(t.bytes)}: ` +
          `${t.persisted.count} persisted (${humanizeBytes(t.persisted.bytes)}), ${t.spooled.count} spooled (${humanizeBytes(t.spooled.bytes)})\n`;
      }
      if (flags.verify) {
        for (const o of failed) {
          const s = o.fragment;
          text += `FAILED ${o.ok ? '' : o.problem}: ${s.journal} [${s.begin}, ${s.end}) ${s.backing_store} ${fragmentContentPath(s)}: ${o.ok ? '' : o.reason}\n`;
        }
        text += `Verified: ${verified} persisted fragments, ${failed.length} failed\n`;
      }
      process.stdout.write(text);
    }
    if (failed.length > 0) {
      throw new GazctlError(`--verify: ${failed.length} of ${verified} persisted fragments failed verification`);
    }
  }
}

export interface FragmentTotals {
  count: number;
  bytes: bigint;
  persisted: { count: number; bytes: bigint };
  spooled: { count: number; bytes: bigint };
}

/** Count and content bytes of `fragments`, persisted (mod time set) and spooled apart. */
export function totalsOf(fragments: FragmentsResponse__Fragment[]): FragmentTotals {
  const t: FragmentTotals = { count: 0, bytes: 0n, persisted: { count: 0, bytes: 0n }, spooled: { count: 0, bytes: 0n } };
  for (const f of fragments) {
    const s = f.spec!;
    const n = s.end - s.begin;
    t.count++;
    t.bytes += n;
    const part = s.mod_time === 0n ? t.spooled : t.persisted;
    part.count++;
    part.bytes += n;
  }
  return t;
}

function totalsJson(t: FragmentTotals, verify?: { verified: number; failed: number }): string {
  const v = verify ? `,"verified":${verify.verified},"failed":${verify.failed}` : '';
  return (
    `{"totals":{"fragments":${t.count},"bytes":${t.bytes},` +
    `"persisted":{"fragments":${t.persisted.count},"bytes":${t.persisted.bytes}},` +
    `"spooled":{"fragments":${t.spooled.count},"bytes":${t.spooled.bytes}}${v}}}`
  );
}

function verifyJson(o: VerifyOutcome): string {
  const s = o.fragment;
  const str = JSON.stringify;
  return (
    `{"verify_failed":{"journal":${str(s.journal)},"begin":${s.begin},"end":${s.end},"backing_store":${str(s.backing_store)},` +
    `"path":${str(fragmentContentPath(s))},"problem":${str(o.ok ? '' : o.problem)},"reason":${str(o.ok ? '' : o.reason)}}}`
  );
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

