// Benchmark `direct` (BENCH_ONLY=direct): a direct read of a journal of persisted fragments, half
// NONE and half GZIP, straight from its store (a file:// store, then, when the test S3 server is
// built, an s3:// store on it whose URLs the broker signs): ours (several fragments fetched and
// decompressed at once) against the reference Go gazctl (one fragment at a time), both run as
//
//   journals read -l name=<j> --broker.cache.size 256 [--file-root <root>] --offsets-out <f>
//
// with stdout to /dev/null. The journal lives on its own cluster (one etcd, one Go broker), with
// 16 MiB fragments so that a run has many of them; it is filled with Go gazctl (the NONE half,
// then the spec switched to GZIP, then the GZIP half, then one short line so the last big
// fragment rolls and persists), and before timing, each tool's output is checked byte for byte
// (size and sha256) in an untimed pass.
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { JournalClient } from '../src/lib/client/index.js';
import { nativeInflate, nativeInflateMissing } from '../src/lib/client/direct/native-inflate.js';
import { nanosToDuration } from '../src/lib/protocol/duration.js';
import { CompressionCodec, JournalSpec } from '../src/lib/protocol/gen/broker/protocol.js';
import { haveS3Server, pollUntil, startCluster, startS3, waitForJournalsAssigned, type Cluster } from '../src/testing/index.js';
import { fmt, median, procCpuSeconds, runTimed, table, writeLinesFile } from './util.js';

export interface DirectBenchOptions {
  sizeMb: number;
  runs: number;
  lineBytes: number;
  /** How to run each tool: [command, args]. */
  command: (tool: 'ours' | 'go', args: string[]) => [string, string[]];
  env: NodeJS.ProcessEnv;
  work: string;
  timeoutMs: number;
  /** Reports a failure (the figures are printed anyway). */
  fail: (msg: string) => void;
  /**
   * More ways to run ours, timed in the same rounds (interleaved with the two tools): to compare
   * builds or switches on one cluster, under the same load. Parsed from BENCH_DIRECT_VARIANTS by
   * parseVariants.
   */
  variants?: DirectVariant[];
}

/** Ours run another way: another executable (`bin`) and/or extra environment variables. */
export interface DirectVariant {
  label: string;
  bin?: string;
  env: Record<string, string>;
}

/**
 * BENCH_DIRECT_VARIANTS: `label:KEY=V,KEY=V;label2:bin=/path/to/gazctl,KEY=V` (`bin=` names
 * another build's bin/gazctl). Throws on a malformed entry.
 */
export function parseVariants(spec: string | undefined): DirectVariant[] {
  if (!spec?.trim()) return [];
  return spec.split(';').map((entry) => {
    const m = /^\s*([^:=;]+):(.*)$/.exec(entry);
    if (!m) throw new Error(`BENCH_DIRECT_VARIANTS: expected label:KEY=V,... in ${JSON.stringify(entry)}`);
    const v: DirectVariant = { label: m[1]!.trim(), env: {} };
    for (const kv of m[2]!.split(',').filter((x) => x.trim())) {
      const eq = kv.indexOf('=');
      if (eq <= 0) throw new Error(`BENCH_DIRECT_VARIANTS: expected KEY=V in ${JSON.stringify(kv)}`);
      const k = kv.slice(0, eq).trim();
      const val = kv.slice(eq + 1).trim();
      if (k === 'bin') v.bin = val;
      else v.env[k] = val;
    }
    return v;
  });
}

const JOURNAL = 'bench/direct';
// The test S3 server's SDK must not look for instance credentials.
process.env.AWS_EC2_METADATA_DISABLED = 'true';
const FRAGMENT_LENGTH = 7n << 20n;
/** Appends are this big: past the fragment length, so each append ends its fragment. */
const APPEND_BYTES = 8 << 20;
const TAIL = 'tail\n';
const LABEL = { ours: 'ours (TS)', go: 'Go gazctl' } as const;

function spec(codec: CompressionCodec, store: string): JournalSpec {
  return JournalSpec.fromPartial({
    name: JOURNAL,
    replication: 1,
    labels: { labels: [{ name: 'app', value: 'gazctl-bench-direct' }] },
    fragment: { length: FRAGMENT_LENGTH, compression_codec: codec, stores: [store], refresh_interval: nanosToDuration(5_000_000_000n) },
  });
}

async function hashFiles(files: string[]): Promise<string> {
  const h = createHash('sha256');
  for (const f of files) for await (const b of createReadStream(f)) h.update(b as Buffer);
  return h.digest('hex');
}

/** Appends `file` in APPEND_BYTES pieces (each becomes one fragment: the spool rolls past its length). */
async function fill(client: JournalClient, file: string): Promise<void> {
  let pending: Buffer[] = [];
  let n = 0;
  const flush = async () => {
    if (n === 0) return;
    const a = client.append(JOURNAL);
    for (const b of pending) await a.write(b);
    await a.commit();
    pending = [];
    n = 0;
  };
  for await (const b of createReadStream(file, { highWaterMark: 1 << 20 })) {
    pending.push(b as Buffer);
    n += (b as Buffer).length;
    if (n >= APPEND_BYTES) await flush();
  }
  await flush();
}

export async function benchDirect(o: DirectBenchOptions): Promise<void> {
  const noneMb = Math.max(1, Math.floor(o.sizeMb / 2));
  const gzipMb = Math.max(1, o.sizeMb - noneMb);
  const noneFile = join(o.work, 'direct-none.txt');
  const gzipFile = join(o.work, 'direct-gzip.txt');
  writeLinesFile(noneFile, noneMb << 20, o.lineBytes);
  writeLinesFile(gzipFile, gzipMb << 20, o.lineBytes);
  // The tail line only rolls the last GZIP fragment so it is persisted; the broker restart below
  // drops it (it is never persisted), so the journal holds exactly the two files.
  const size = statSync(noneFile).size + statSync(gzipFile).size;
  const sha256 = await hashFiles([noneFile, gzipFile]);
  const native = nativeInflate();
  console.log(
    native
      ? `\n(direct: ours inflates GZIP fragments with libdeflate ${native.libdeflate}, the native inflate; GAZCTL_NATIVE_INFLATE=0 measures zlib's)`
      : `\n(direct: ours inflates GZIP fragments with zlib: ${nativeInflateMissing()})`,
  );
  const kinds: StoreKind[] = haveS3Server() ? ['file', 's3'] : ['file'];
  if (kinds.length === 1) console.log('\n(direct: no S3 server built, so the s3:// case is left out; see scripts/install-peers.sh)');
  for (const kind of kinds) await benchDirectOn(kind, o, { noneFile, gzipFile, noneMb, gzipMb, size, sha256 });
}

type StoreKind = 'file' | 's3';

async function benchDirectOn(
  kind: StoreKind,
  o: DirectBenchOptions,
  d: { noneFile: string; gzipFile: string; noneMb: number; gzipMb: number; size: number; sha256: string },
): Promise<void> {
  const { noneFile, gzipFile, noneMb, gzipMb, size, sha256 } = d;
  console.log(
    `\n== direct (${kind}://): ${noneMb + gzipMb} MiB journal of persisted NONE (${noneMb} MiB) and GZIP (${gzipMb} MiB) fragments, ` +
      `read from its ${kind === 'file' ? 'file:// store (--file-root)' : 's3:// store on the test S3 server (broker-signed URLs)'}, ${o.runs} run(s) per tool`,
  );
  const c0 = performance.now();
  const s3 = kind === 's3' ? await startS3({ bucket: 'bench' }) : undefined;
  const cluster = await startCluster({
    brokers: 1,
    brokerEnv: s3 ? { AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey, AWS_REGION: s3.credentials.region } : undefined,
  }).catch(async (e: unknown) => {
    await s3?.stop();
    throw e;
  });
  const store = s3 ? s3.storeUrl('direct/') : 'file:///';
  let client = new JournalClient({ address: cluster.brokerAddress });
  type Run = { mbps: number; wallS: number; cpuS?: number; rssMiB?: number; serverCpuS?: number };
  const results: Record<'ours' | 'go', Run[]> = { ours: [], go: [] };
  const variantRuns = new Map<string, Run[]>();
  try {
    await client.apply([{ expect_mod_revision: 0n, upsert: spec(CompressionCodec.NONE, store), delete: '' }]);
    await waitForJournalsAssigned(cluster, [JOURNAL], 30_000);
    const f0 = performance.now();
    await fill(client, noneFile);
    const sel = { include: { labels: [{ name: 'name', value: JOURNAL, prefix: false }] }, exclude: { labels: [] } };
    const rev = (await client.list(sel)).journals[0]!.mod_revision;
    await client.apply([{ expect_mod_revision: rev, upsert: spec(CompressionCodec.GZIP, store), delete: '' }]);
    await pollUntil('the GZIP spec to reach the broker', async () => (await client.list(sel)).journals[0]!.spec!.fragment!.compression_codec === CompressionCodec.GZIP, {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    await fill(client, gzipFile);
    const tailFile = join(o.work, 'direct-tail.txt');
    writeFileSync(tailFile, TAIL);
    await fill(client, tailFile);
    let persisted = 0;
    let codecs = new Set<string>();
    /** Until the listing has every fragment up to `end` persisted (`spool`: and one more, unpersisted). */
    let state = '';
    const wait = (end: bigint, spool: boolean) =>
      pollUntil(
        'every rolled fragment to be persisted',
        async () => {
          const fs = (await client.listFragments(JOURNAL)).map((f) => f.spec!);
          const done = fs.filter((f) => f.mod_time !== 0n);
          persisted = done.length;
          codecs = new Set(done.map((f) => CompressionCodec[f.compression_codec]!));
          const rest = fs.slice(done.length);
          state = `${fs.length} fragments listed, ${done.length} persisted, ending at ${done.at(-1)?.end}; want ${end}`;
          return done.at(-1)?.end === end && done.every((f, i) => i === 0 || f.begin === done[i - 1]!.end) && rest.length === (spool ? 1 : 0);
        },
        { timeoutMs: 180_000, intervalMs: 500, describe: () => state },
      );
    await wait(BigInt(size), true);
    // A broker serves fragments it still holds locally itself, handing out no URL: restart it, so
    // that the persisted fragments are known only from its store and every read of them is direct.
    await cluster.restartBroker(0);
    client.close();
    client = new JournalClient({ address: cluster.brokerAddress });
    await waitForJournalsAssigned(cluster, [JOURNAL], 30_000);
    await wait(BigInt(size), false);
    console.log(
      `  cluster up in ${fmt((f0 - c0) / 1000, 1)} s; filled and persisted in ${fmt((performance.now() - f0) / 1000, 1)} s: ` +
        `${persisted} persisted fragments (${[...codecs].join(', ')}), ${size} bytes, served from the store after a broker restart`,
    );

    const args = (offsetsOut: string) => [
      'journals',
      'read',
      '-l',
      `name=${JOURNAL}`,
      '--broker.cache.size',
      '256',
      ...(kind === 'file' ? ['--file-root', cluster.fileRoot] : []),
      '--offsets-out',
      offsetsOut,
    ];
    const env = { ...o.env, BROKER_ADDRESS: cluster.brokerAddress };
    // Untimed: each tool's output, byte for byte (also warms the page cache).
    for (const tool of ['ours', 'go'] as const) {
      const [cmd, a] = o.command(tool, args(join(o.work, `direct-verify-${tool}.json`)));
      const r = await runTimed(cmd, a, { env, cwd: o.work, stdout: 'hash', timeoutMs: o.timeoutMs });
      const ok = r.code === 0 && r.out!.bytes === size && r.out!.sha256 === sha256;
      const line = `verify (direct read by ${LABEL[tool]}): exit ${r.code}, ${r.out?.bytes} bytes, sha256 ${r.out?.sha256.slice(0, 12)}…`;
      if (ok) console.log(`  ${line} = input`);
      else o.fail(`${line}; expected ${size} bytes, sha256 ${sha256.slice(0, 12)}…${r.stderr ? `\n     ${r.stderr.trim().split('\n').slice(-3).join('\n     ')}` : ''}`);
    }
    const variants = o.variants ?? [];
    for (const v of variants) variantRuns.set(v.label, []);
    // Each round runs every variant once; the order rotates so none always runs first.
    type Slot = { tool: 'ours' | 'go'; variant?: DirectVariant };
    const slots: Slot[] = [{ tool: 'ours' }, { tool: 'go' }, ...variants.map((variant) => ({ tool: 'ours' as const, variant }))];
    for (let r = 0; r < o.runs; r++) {
      const turn = slots.length === 2 ? (r % 2 === 0 ? slots : [...slots].reverse()) : [...slots.slice(r % slots.length), ...slots.slice(0, r % slots.length)];
      for (const { tool, variant } of turn) {
        const name = variant ? `${LABEL.ours} [${variant.label}]` : LABEL[tool];
        const offsetsOut = join(o.work, `direct-offsets-${tool}-${variant?.label.replace(/\W+/g, '_') ?? ''}-${r}.json`);
        let [cmd, a] = o.command(tool, args(offsetsOut));
        if (variant?.bin) cmd = variant.bin;
        const runEnv = variant ? { ...env, ...variant.env } : env;
        // The test S3 server shares the machine's cores: its CPU time over the run is printed too.
        const s0 = procCpuSeconds(s3?.process.pid);
        const res = await runTimed(cmd, a, { env: runEnv, cwd: o.work, stdout: 'devnull', timeoutMs: o.timeoutMs, statsFile: join(o.work, 'direct-time.txt') });
        const s1 = procCpuSeconds(s3?.process.pid);
        let reached: number | undefined;
        try {
          reached = Number((JSON.parse(readFileSync(offsetsOut, 'utf8')) as Record<string, number>)[JOURNAL]);
        } catch {
          /* reported below */
        }
        if (res.code !== 0 || reached !== size) {
          o.fail(`direct ${name} run ${r + 1}: exit ${res.code}, offset reached ${reached}, expected ${size}${res.stderr ? `: ${res.stderr.trim().split('\n').at(-1)}` : ''}`);
          continue;
        }
        const run = {
          mbps: size / 1e6 / (res.wallMs / 1000),
          wallS: res.wallMs / 1000,
          cpuS: res.cpu ? res.cpu.user + res.cpu.sys : undefined,
          rssMiB: res.cpu ? res.cpu.maxRssKiB / 1024 : undefined,
          serverCpuS: s0 !== undefined && s1 !== undefined ? s1 - s0 : undefined,
        };
        if (variant) variantRuns.get(variant.label)!.push(run);
        else results[tool].push(run);
        console.log(
          `  direct ${name.padEnd(9)} run ${r + 1}: ${fmt(run.wallS, 2)} s  ${fmt(run.mbps)} MB/s` +
            (run.cpuS !== undefined ? `  (client CPU ${fmt(run.cpuS, 2)} s, peak RSS ${fmt(run.rssMiB, 0)} MiB)` : '') +
            (run.serverCpuS !== undefined ? `  S3 server CPU ${fmt(run.serverCpuS, 2)} s` : ''),
        );
      }
    }
  } finally {
    client.close();
    await cluster.stop();
    await s3?.stop();
  }
  const o_ = results.ours.map((r) => r.mbps);
  const g_ = results.go.map((r) => r.mbps);
  const ratio = median(o_) / median(g_);
  const cpu = (t: 'ours' | 'go') => median(results[t].map((r) => r.cpuS ?? NaN));
  const rss = (t: 'ours' | 'go') => median(results[t].map((r) => r.rssMiB ?? NaN));
  const server = (t: 'ours' | 'go') => median(results[t].map((r) => r.serverCpuS ?? NaN));
  console.log(`\n== direct summary, ${kind}:// store (${noneMb + gzipMb} MiB, MB/s = 10^6 B/s, ratio = ours / Go)`);
  console.log(
    table([
      ['', 'ours best', 'ours median', 'Go best', 'Go median', 'ratio best', 'ratio median', 'client CPU s ours/Go', 'peak RSS MiB ours/Go', ...(kind === 's3' ? ['S3 server CPU s ours/Go'] : []), 'target'],
      [
        'direct read MB/s',
        fmt(Math.max(...o_)),
        fmt(median(o_)),
        fmt(Math.max(...g_)),
        fmt(median(g_)),
        fmt(Math.max(...o_) / Math.max(...g_), 2),
        fmt(ratio, 2),
        `${fmt(cpu('ours'), 2)} / ${fmt(cpu('go'), 2)}`,
        `${fmt(rss('ours'), 0)} / ${fmt(rss('go'), 0)}`,
        ...(kind === 's3' ? [`${fmt(server('ours'), 2)} / ${fmt(server('go'), 2)}`] : []),
        Number.isFinite(ratio) ? (ratio >= 2 ? '>= 2.0 ok' : '>= 2.0 MISSED') : '-',
      ],
    ]),
  );
  if (variantRuns.size > 0) {
    const base = results.ours;
    const med = (xs: Run[], f: (r: Run) => number | undefined) => median(xs.map((r) => f(r) ?? NaN));
    const rows: string[][] = [['ours, run as', 'wall s median', 'client CPU s median', 'peak RSS MiB', 'wall / default', 'CPU / default']];
    for (const [label, xs] of [['default', base] as const, ...variantRuns]) {
      rows.push([
        label,
        fmt(med(xs, (r) => r.wallS), 3),
        fmt(med(xs, (r) => r.cpuS), 3),
        fmt(med(xs, (r) => r.rssMiB), 0),
        fmt(med(xs, (r) => r.wallS) / med(base, (r) => r.wallS), 3),
        fmt(med(xs, (r) => r.cpuS) / med(base, (r) => r.cpuS), 3),
      ]);
    }
    console.log(`\n== direct variants, ${kind}:// store (interleaved in the same rounds)`);
    console.log(table(rows));
  }
}
