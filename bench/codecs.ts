// Benchmark `codecs` (BENCH_ONLY=codecs): our persister's SNAPPY, ZSTANDARD and GZIP codecs
// against the Go broker's, on the same content, in memory (no store, no cluster):
//
//   ours    compressor(codec) fed the content in 1 MiB writes (what the persister streams from a
//           spool), then decodeFragmentStream() of the result in 1 MiB reads (the read path of
//           journals read and of our broker); both with the native packages and, for snappy and
//           zstd, with the portable fallbacks (setPortableCodecs)
//   Go      scripts/peers/codec-bench: go.gazette.dev/core/broker/codecs, written in 1 MiB
//           batches into one compressor per fragment as the Go broker's spool does, then read
//           back with its codec reader
//   ours reading Go's output: decodeFragmentStream() of the Go bytes (what our gazctl does with
//           fragments a Go broker persisted), and for zstd libzstd's whole-buffer decoder
//           (@mongodb-js/zstd) beside our streaming one (fzstd), for reference
//
// The content is BENCH_CODEC_MB MiB of JSON event lines with pseudo-random fields (ids, times,
// amounts; deterministic), one fragment. Every decode is checked against the content's sha256.
// Runs alternate ours and Go; the figures are medians of BENCH_RUNS runs. MB/s is 10^6 bytes of
// content per second of CPU time (user + system, every thread of the process: libuv's pool for
// our zstd, the Go runtime's threads for Go), which a machine shared with other work disturbs
// far less than wall time; wall-time MB/s is printed beside it. Ratio is stored / content size.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import { codecBackends, compressor, decodeFragmentStream, setPortableCodecs } from '../src/lib/codecs/index.js';
import { CompressionCodec } from '../src/lib/protocol/gen/broker/protocol.js';
import { peersBinDir } from '../src/testing/index.js';
import { fmt, median, table } from './util.js';

export interface CodecsBenchOptions {
  sizeMb: number;
  runs: number;
  work: string;
  /** Reports a failure (the figures are printed anyway). */
  fail: (msg: string) => void;
}

const PIECE = 1 << 20;
const CODECS = [CompressionCodec.SNAPPY, CompressionCodec.ZSTANDARD, CompressionCodec.GZIP];

/** `bytes` of newline-separated JSON events, the same for every run and machine. */
export function eventsContent(bytes: number): Buffer {
  const out = Buffer.allocUnsafe(bytes);
  let seed = 0x2545f491;
  const rand = (n: number) => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  const kinds = ['page_view', 'click', 'add_to_cart', 'checkout', 'login', 'logout', 'search'];
  const countries = ['US', 'DE', 'FR', 'BR', 'IN', 'JP', 'GB', 'CA'];
  const t0 = Date.UTC(2026, 0, 1);
  let at = 0;
  for (let i = 0; at < bytes; i++) {
    const uuid = `${(rand(0x7fffffff) >>> 0).toString(16).padStart(8, '0')}-${rand(0xffff).toString(16).padStart(4, '0')}-11f0-8${rand(0xfff).toString(16).padStart(3, '0')}-02a7${rand(0xffffff).toString(16).padStart(8, '0')}`;
    const line =
      `{"_meta":{"uuid":"${uuid}"},"ts":"${new Date(t0 + i * 37 + rand(1000)).toISOString()}","user":"user-${rand(50_000)}",` +
      `"session":"${rand(0x7fffffff).toString(36)}","event":"${kinds[rand(kinds.length)]}","country":"${countries[rand(countries.length)]}",` +
      `"amount":${rand(100_000) / 100},"items":${rand(12)},"path":"/shop/item/${rand(5000)}"}\n`;
    at += out.write(line, at, 'latin1');
  }
  return out;
}

/** Wall and CPU milliseconds of `fn`. */
async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; cpu: number; value: T }> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { ms, cpu: (c.user + c.system) / 1000, value };
}

async function compressOurs(codec: CompressionCodec, content: Buffer): Promise<{ ms: number; cpu: number; stored: Buffer }> {
  const pieces: Buffer[] = [];
  for (let i = 0; i < content.length; i += PIECE) pieces.push(content.subarray(i, i + PIECE));
  const out: Buffer[] = [];
  const r = await timed(() => pipeline(Readable.from(pieces), compressor(codec), new Writable({ write: (c: Buffer, _e, cb) => (out.push(c), cb()) })));
  return { ms: r.ms, cpu: r.cpu, stored: Buffer.concat(out) };
}

/** Decodes `stored` in 1 MiB reads; the sha256 is taken of the collected output after the clock stops. */
async function decodeOurs(codec: CompressionCodec, stored: Buffer): Promise<{ ms: number; cpu: number; sha: string }> {
  const pieces: Buffer[] = [];
  for (let i = 0; i < stored.length; i += PIECE) pieces.push(stored.subarray(i, i + PIECE));
  const out: Buffer[] = [];
  const r = await timed(async () => {
    for await (const c of decodeFragmentStream(Readable.from(pieces), codec, false)) out.push(c as Buffer);
  });
  const h = createHash('sha256');
  for (const b of out) h.update(b);
  return { ms: r.ms, cpu: r.cpu, sha: h.digest('hex') };
}

interface GoRun {
  compressed: number;
  compressMs: number[];
  decompressMs: number[];
  compressCpuMs: number[];
  decompressCpuMs: number[];
}

function runGo(bin: string, codec: CompressionCodec, input: string, out: string): GoRun {
  const r = spawnSync(bin, ['-in', input, '-codec', CompressionCodec[codec]!, '-runs', '1', '-out', out], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`codec-bench ${CompressionCodec[codec]} failed (${r.status}): ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as GoRun;
}

interface Row {
  label: string;
  ratio?: number;
  compress: number[];
  decompress: number[];
  compressCpu: number[];
  decompressCpu: number[];
}

const row = (label: string): Row => ({ label, compress: [], decompress: [], compressCpu: [], decompressCpu: [] });

export async function benchCodecs(o: CodecsBenchOptions): Promise<void> {
  const bin = join(peersBinDir(), 'codec-bench');
  if (!existsSync(bin)) {
    o.fail(`codecs: ${bin} is missing (scripts/install-peers.sh builds it)`);
    return;
  }
  const size = o.sizeMb * 1024 * 1024;
  const content = eventsContent(size);
  const want = createHash('sha256').update(content).digest('hex');
  const input = join(o.work, 'codecs-content.jsonl');
  writeFileSync(input, content);
  const mbs = (ms: number) => size / 1e6 / (ms / 1000);
  const zstdNative = createRequire(import.meta.url)('@mongodb-js/zstd') as { decompress(b: Buffer): Promise<Buffer> };
  const backends = codecBackends();

  console.log(`\ncodecs: ${o.sizeMb} MiB of JSON events as one fragment, ${o.runs} runs (ours and Go alternate); ours: ${JSON.stringify(backends)}`);
  const rows: Row[] = [];
  for (const codec of CODECS) {
    const name = CompressionCodec[codec]!;
    const ours = row(`${name} ours${codec === CompressionCodec.GZIP ? ' (zlib)' : ' (native)'}`);
    const portable = row(`${name} ours (portable fallback)`);
    const go = row(`${name} Go broker`);
    const cross = row(`${name} ours reading Go's`);
    const wholeZstd = row(`${name} Go's, libzstd whole-buffer decode`);
    const goOut = join(o.work, `codecs-go.${name}`);
    for (let run = 0; run < o.runs; run++) {
      const goFirst = run % 2 === 1;
      const doGo = () => {
        const g = runGo(bin, codec, input, goOut);
        go.ratio = g.compressed / size;
        go.compress.push(...g.compressMs);
        go.decompress.push(...g.decompressMs);
        go.compressCpu.push(...g.compressCpuMs);
        go.decompressCpu.push(...g.decompressCpuMs);
      };
      if (goFirst) doGo();
      const c = await compressOurs(codec, content);
      ours.ratio = c.stored.length / size;
      ours.compress.push(c.ms);
      ours.compressCpu.push(c.cpu);
      const d = await decodeOurs(codec, c.stored);
      if (d.sha !== want) o.fail(`codecs: ${name}: our output decodes to other bytes`);
      ours.decompress.push(d.ms);
      ours.decompressCpu.push(d.cpu);
      if (!goFirst) doGo();
      const goBytes = readFileSync(goOut);
      const x = await decodeOurs(codec, goBytes);
      if (x.sha !== want) o.fail(`codecs: ${name}: the Go output decodes (ours) to other bytes`);
      cross.decompress.push(x.ms);
      cross.decompressCpu.push(x.cpu);
      if (codec === CompressionCodec.ZSTANDARD) {
        const w = await timed(() => zstdNative.decompress(goBytes));
        wholeZstd.decompress.push(w.ms);
        wholeZstd.decompressCpu.push(w.cpu);
        if (createHash('sha256').update(w.value).digest('hex') !== want) o.fail(`codecs: ${name}: libzstd decodes the Go output to other bytes`);
      }
      if (codec !== CompressionCodec.GZIP) {
        setPortableCodecs(true);
        try {
          const p = await compressOurs(codec, content);
          portable.ratio = p.stored.length / size;
          portable.compress.push(p.ms);
          portable.compressCpu.push(p.cpu);
          const pd = await decodeOurs(codec, p.stored);
          if (pd.sha !== want) o.fail(`codecs: ${name}: the portable output decodes to other bytes`);
          portable.decompress.push(pd.ms);
          portable.decompressCpu.push(pd.cpu);
        } finally {
          setPortableCodecs(false);
        }
      }
    }
    rows.push(ours);
    if (codec !== CompressionCodec.GZIP) rows.push(portable);
    rows.push(go, cross);
    if (codec === CompressionCodec.ZSTANDARD) rows.push(wholeZstd);
  }
  const out: string[][] = [['codec and implementation', 'ratio', 'compress MB/s cpu', 'wall', 'decompress MB/s cpu', 'wall']];
  const cell = (xs: number[]) => (xs.length ? fmt(mbs(median(xs)), 0) : '');
  for (const r of rows) {
    out.push([r.label, r.ratio === undefined ? '' : fmt(r.ratio, 4), cell(r.compressCpu), cell(r.compress), cell(r.decompressCpu), cell(r.decompress)]);
  }
  console.log(table(out));
}
