// Benchmark of fragment planning at scale: a synthetic store listing of many journals (with
// forks of every kind) is parsed, grouped, planned for fork chains and for retention, and the
// wall time of each phase and the process's peak memory are printed. A program, not a test.
//
//   node dist/bench/forks.js
//   BENCH_OBJECTS=200000 BENCH_JOURNALS=1000 node dist/bench/forks.js
//
// Environment:
//   BENCH_OBJECTS   fragment objects in the listing (default 1000000)
//   BENCH_JOURNALS  journals they are spread over (default 5000)
//   BENCH_UNCACHED  1: parse each name with fragmentObjectFromListing (journal validated per
//                   object) instead of a FragmentObjectParser per journal
// Targets: under 10 s and under 1 GiB peak RSS for the default size. Exit code 0 when the run
// finished (the figures are reported, not judged), 1 on a bad setting.

import { performance } from 'node:perf_hooks';

import { planForksAll, type JournalForks } from '../src/lib/fragment/forks.js';
import { FragmentObjectParser, fragmentObjectFromListing, groupByJournal, type FragmentObject } from '../src/lib/fragment/objects.js';
import { planRetentionAll } from '../src/lib/fragment/retention.js';

function intEnv(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  if (!/^[1-9]\d*$/.test(v)) {
    console.error(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
    process.exit(1);
  }
  return Number(v);
}

const TOTAL = intEnv('BENCH_OBJECTS', 1_000_000);
const JOURNALS = intEnv('BENCH_JOURNALS', 5000);
/** BENCH_UNCACHED=1 parses every name with the full check (journal name included), for comparison. */
const UNCACHED = process.env.BENCH_UNCACHED === '1';
const STORES = ['s3://archive-primary/gazette/', 'gs://archive-replica/gazette/'];
const NOW_S = 1_700_000_000;
const HOUR_NS = 3_600_000_000_000n;

// Deterministic pseudo-random numbers (mulberry32), so runs are comparable.
let seed = 0x9e3779b9;
function rand(): number {
  seed |= 0;
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

const hex16 = (n: number): string => n.toString(16).padStart(16, '0');
let sumCounter = 0;
const nextSum = (): string => (++sumCounter).toString(16).padStart(40, '0');

interface Entry {
  journal: string;
  store: string;
  rel: string;
  size: number;
  mod: number;
}

/**
 * One journal's listing: a chain of fragments (some stored in both stores, some under a postfix),
 * then forks: superseded shorter copies, divergent rewrites, fragments straddling two chain
 * members, and for some journals an older run separated by missing offsets, or a tie.
 */
function synthJournal(journal: string, count: number, out: Entry[]): void {
  const start = out.length;
  const push = (begin: number, end: number, sum: string, store: string, postfix: string, mod: number): void => {
    const name = `${hex16(begin)}-${hex16(end)}-${sum}.gz`;
    out.push({ journal, store, rel: postfix ? `${postfix}/${name}` : name, size: Math.max(1, (end - begin) >> 2), mod });
  };
  const len = 1 << 20;
  let offset = rand() < 0.1 ? 7 * len : 0; // some journals have an older run below a hole
  if (offset > 0) {
    for (let i = 0; i < 3 && out.length - start < count; i++) push(i * len, (i + 1) * len, nextSum(), STORES[0]!, '', NOW_S - 900 * 3600);
  }
  const tie = rand() < 0.01;
  while (out.length - start < count) {
    const end = offset + len - Math.floor(rand() * 1000);
    const sum = nextSum();
    const mod = NOW_S - Math.floor(rand() * 1000) * 3600;
    const postfix = rand() < 0.3 ? `date=2024-01-${String(1 + Math.floor(rand() * 28)).padStart(2, '0')}` : '';
    push(offset, end, sum, STORES[0]!, postfix, mod);
    const r = rand();
    if (r < 0.25) push(offset, end, sum, STORES[1]!, postfix, mod + 5); // copy in the second store
    else if (r < 0.35) push(offset, offset + ((end - offset) >> 1), nextSum(), STORES[0]!, '', mod - 60); // superseded
    else if (r < 0.4) push(offset + 100, end - 100, nextSum(), STORES[1]!, '', mod); // divergent rewrite
    else if (r < 0.45 && offset > 0) push(offset - 500, offset + 500, nextSum(), STORES[0]!, '', mod); // straddle
    else if (tie && r < 0.5) push(offset, end, nextSum(), STORES[1]!, '', mod); // same range, other sum
    offset = end;
  }
  out.length = Math.min(out.length, start + count);
}

function mib(bytes: number): string {
  return (bytes / (1 << 20)).toFixed(0);
}

function main(): void {
  // Listings arrive page by page; each journal's entries are parsed as soon as they exist and
  // only the parsed objects are kept, as a real scan would do.
  let synthMs = 0;
  let synthCpu = 0;
  const cpu0 = process.cpuUsage();
  // CPU time per phase too: on a shared machine wall times swing with the load, CPU time less.
  const cpuNow = (): number => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  };
  const c1 = cpuNow();
  const t1 = performance.now();
  const objects: FragmentObject[] = [];
  const per = Math.floor(TOTAL / JOURNALS);
  const entries: Entry[] = [];
  for (let j = 0; j < JOURNALS; j++) {
    const n = j === JOURNALS - 1 ? TOTAL - objects.length : per;
    const s0 = performance.now();
    const sc0 = cpuNow();
    entries.length = 0;
    synthJournal(`bench/tenant-${j % 97}/journal-${String(j).padStart(6, '0')}`, n, entries);
    synthMs += performance.now() - s0;
    synthCpu += cpuNow() - sc0;
    if (UNCACHED) {
      for (const e of entries) objects.push(fragmentObjectFromListing(e.journal, e.store, e.rel, e.size, e.mod));
    } else {
      // One parser per journal, as a listing walks one journal at a time: the journal name is
      // validated once rather than once per object.
      const parser = new FragmentObjectParser(entries[0]!.journal);
      for (const e of entries) objects.push(parser.parse(e.store, e.rel, e.size, e.mod));
    }
  }
  entries.length = 0;
  const t2 = performance.now();
  const c2 = cpuNow();
  const byJournal = groupByJournal(objects);
  const writeHeads = new Map<string, bigint>();
  let n = 0;
  for (const [j, os] of byJournal) {
    // Most journals' heads sit at or past their newest fragment; a few lag behind it.
    let end = 0n;
    for (const o of os) if (o.end > end) end = o.end;
    writeHeads.set(j, n++ % 200 === 0 ? end - 1n : end + 4096n);
  }
  const t3 = performance.now();
  const c3 = cpuNow();
  const forks: JournalForks[] = planForksAll(byJournal, writeHeads);
  const t4 = performance.now();
  const c4 = cpuNow();
  const retention = planRetentionAll(
    [...byJournal].map(([journal, os]) => ({ journal, objects: os, retention: 720n * HOUR_NS })),
    NOW_S * 1000,
  );
  const t5 = performance.now();
  const c5 = cpuNow();
  const cpu = process.cpuUsage(cpu0);

  const kinds = { 'dead-end': 0, gap: 0, ambiguous: 0 };
  let members = 0;
  let deletable = 0;
  let ambiguousJournals = 0;
  for (const r of forks) {
    members += r.members.length;
    deletable += r.deletable.length;
    if (r.ambiguous !== undefined) ambiguousJournals++;
    for (const f of r.forks) kinds[f.kind]++;
  }
  const peakRss = process.resourceUsage().maxRSS * 1024;

  console.log(`objects ${objects.length}, journals ${byJournal.size}`);
  console.log(
    `chains: ${members} distinct chain fragments; forks: ${kinds['dead-end']} dead-end, ${kinds.gap} gap, ` +
      `${kinds.ambiguous} ambiguous (${ambiguousJournals} ambiguous journals); ${deletable} deletable objects`,
  );
  console.log(`retention 720h: ${retention.count} expired objects, ${mib(retention.bytes)} MiB`);
  for (const s of retention.byStore) console.log(`  ${s.store}: ${s.count} objects, ${mib(s.bytes)} MiB`);
  const ms = (a: number, b: number): string => `${((b - a) / 1000).toFixed(2)} s`;
  console.log(`synthesize listing   ${(synthMs / 1000).toFixed(2)} s (not counted)`);
  const cs = (a: number, b: number): string => `${((b - a) / 1000).toFixed(2)} s CPU`;
  console.log(`parse listing        ${((t2 - t1 - synthMs) / 1000).toFixed(2)} s, ${((c2 - c1 - synthCpu) / 1000).toFixed(2)} s CPU (${UNCACHED ? 'journal name validated per object' : 'journal name validated once per journal'})`);
  console.log(`group by journal     ${ms(t2, t3)}, ${cs(c2, c3)}`);
  console.log(`fork chains          ${ms(t3, t4)}, ${cs(c3, c4)}`);
  console.log(`retention            ${ms(t4, t5)}, ${cs(c4, c5)}`);
  console.log(`planning wall time   ${((t5 - t1 - synthMs) / 1000).toFixed(2)} s (parse + group + forks + retention; target < 10 s), ${((c5 - c1 - synthCpu) / 1000).toFixed(2)} s CPU`);
  console.log(`CPU time             ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s (user + sys over the same span, synthesis included)`);
  console.log(`peak RSS             ${mib(peakRss)} MiB (whole process, listing included; target < 1024 MiB)`);
}

main();
