// Benchmarks: our gazctl against the reference Go gazctl, side by side on the same real cluster.
//
//   npm run bench                      # setup + build, then this program (full size: 1 GiB)
//   BENCH_SIZE_MB=64 node dist/bench/run.js   # quick run on a built tree
//
// What it measures (each tool runs as a fresh process, exactly as an operator would run it):
//   read    `journals read -l name=<j>` of a BENCH_SIZE_MB journal, stdout to /dev/null
//   append  `journals append -l name=<j> --framing lines -i <file>` of BENCH_SIZE_MB of ~100-byte
//           lines, each tool and run into its own journal on a cluster started for that run (and
//           removed after it); every appended journal is read back (Go gazctl) and its byte
//           count and sha256 compared with the input file
//   cold    `journals list --help`: ours (`bin/gazctl`), Go gazctl, and `node -e 0` (floor),
//           all three spawned the same way with the same environment and working directory;
//           measured twice: with the environment as given, and without NODE_EXTRA_CA_CERTS
//           (when set, every Node process parses that CA bundle before running any JavaScript,
//           some 40 ms here, which inflates the floor; bin/gazctl defers it to the first TLS
//           context, see src/cli/deferred-ca.ts)
//   list    `journals list` of BENCH_LIST_JOURNALS journals as a table and with -o yaml (the
//           outputs of both tools are compared byte for byte)
//   apply   `journals apply --max-txn-size BENCH_TXN_SIZE` of BENCH_APPLY_JOURNALS new journals
//           from a spec file on stdin, ours twice (with its default --parallel, and with
//           --parallel 1: one transaction at a time, as Go gazctl sends them) and Go's,
//           interleaved; before every run the journals are deleted (Go gazctl, untimed), so
//           each run creates all of them; each run also shows how long the broker spent
//           handling the Apply calls, summed over the calls (from its /debug/metrics): for a
//           run that sends one at a time, the part of its wall time no client can save
//   direct  a direct read (route cache + --file-root) of a BENCH_SIZE_MB journal of persisted
//           NONE and GZIP fragments, on a cluster of its own: see bench/direct.ts
//   codecs  our persister's SNAPPY, ZSTANDARD and GZIP codecs against the Go broker's on the
//           same BENCH_CODEC_MB of content: ratio, compress and decompress speed, in memory:
//           see bench/codecs.ts
//   shards-list  `shards list` of BENCH_SHARDS disabled shards, table and -o yaml, against one
//           reference Go consumer, on a cluster of its own: see bench/shards.ts
//   prune-plan   `shards prune-log --dry-run` (Go: `shards prune --dry-run`) of one shard whose
//           recovery log has BENCH_PRUNE_FRAGMENTS fragments: see bench/shards.ts
//           (BENCH_ONLY=shards runs both; their ratios are Go time / our time)
//   consumer     the consumer runtime: msgs/s of the sum app at 1 and 8 shards, ours (gazette-sum)
//           against the reference Go sum-consumer on the same brokers, CPU and peak RSS beside
//           them, and failover time (kill -9 to PRIMARY again): see bench/consumer.ts
//           (BENCH_CONSUMER_RECORDS, BENCH_CONSUMER_RUNS)
//   peak RSS of `journals read` and `journals append` comes with the read and append runs
//           (GNU time), summed up per tool in the summary
//
// The cluster is one etcd and one broker from src/testing (the reference Go broker unless
// GAZCTL_TEST_BROKER says otherwise), journals with replication 1, codec NONE, 64 MiB fragments
// and a file:// store, so the figures measure the clients rather than replication.
//
// Environment:
//   BENCH_SIZE_MB     data size in MiB (default 1024; a positive integer)
//   BENCH_RUNS        timed runs per tool for read and append (default 3)
//   BENCH_COLD_RUNS   timed runs per command for cold start (default 15)
//   BENCH_ONLY        comma list of read, append, cold, list, apply, direct, codecs, shards-list,
//                     prune-plan, shards (= shards-list,prune-plan), consumer (default all)
//   BENCH_CODEC_MB    content size of `codecs` in MiB (default 64)
//   BENCH_SHARDS      shards listed by shards-list (default 10000)
//   BENCH_PRUNE_FRAGMENTS  fragments of prune-plan's recovery log (default 100000)
//   BENCH_SHARDS_RUNS timed runs per tool (and format) of shards-list and prune-plan (default 5)
//   BENCH_LIST_JOURNALS   journals listed by `list` (default 20000)
//   BENCH_APPLY_JOURNALS  journals created by `apply` (default 10000)
//   BENCH_TXN_SIZE    --max-txn-size of `apply` (default 100)
//   BENCH_SCALE_RUNS  timed runs per tool (and format) for list and apply (default 3)
//   BENCH_LINE_BYTES  average input line length (default 100)
//   BENCH_RESULTS_DIR where to write one results file per benchmark run (default bench/results;
//                     `none`: no files)
//   BENCH_DIRECT_VARIANTS  more ways to run ours in the direct benchmark's rounds, e.g.
//                     `zlib:GAZCTL_NATIVE_INFLATE=0;before:bin=/tmp/old/bin/gazctl`
// MB/s figures are 10^6 bytes per second; sizes are MiB. Runs alternate which tool goes first, and
// before each timed read or append the machine settles (sync, then the broker idle: bench/util.ts).
// Exit code: 0 when every measurement ran and verified, 1 otherwise (figures are still printed).

import { spawnSync } from 'node:child_process';
import { cpus, tmpdir } from 'node:os';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

import {
  peerBinary,
  registerExitCleanup,
  runGoGazctl,
  scrubEnv,
  startCluster,
  waitForJournalsAssigned,
  type Cluster,
} from '../src/testing/index.js';
import {
  fmt,
  haveGnuTime,
  median,
  percentile,
  procCpuSeconds,
  settle,
  runTimed,
  table,
  timeSpawn,
  writeLinesFile,
  type RunOptions,
  type RunResult,
} from './util.js';
import { benchCodecs } from './codecs.js';
import { benchConsumer } from './consumer.js';
import { benchDirect, parseVariants } from './direct.js';
import { BenchResults } from './results.js';
import { benchShards, printShardsSummary, whichOurs, type ShardsPart, type ShardsResult } from './shards.js';

// ---- configuration -------------------------------------------------------------------------------

function intEnv(name: string, dflt: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) {
    console.error(`${name}=${raw}: expected an integer >= ${min}`);
    process.exit(2);
  }
  return v;
}

const SIZE_MB = intEnv('BENCH_SIZE_MB', 1024, 1);
/** What each benchmark printed, for its results file (bench/results.ts). */
const resultsFiles = new BenchResults();
const DIRECT_VARIANTS = (() => {
  try {
    return parseVariants(process.env.BENCH_DIRECT_VARIANTS);
  } catch (e) {
    console.error((e as Error).message);
    process.exit(2);
  }
})();
const SIZE = SIZE_MB * 1024 * 1024;
const RUNS = intEnv('BENCH_RUNS', 3, 1);
const COLD_RUNS = intEnv('BENCH_COLD_RUNS', 15, 1);
const LINE_BYTES = intEnv('BENCH_LINE_BYTES', 100, 24);
const LIST_JOURNALS = intEnv('BENCH_LIST_JOURNALS', 20_000, 1);
const APPLY_JOURNALS = intEnv('BENCH_APPLY_JOURNALS', 10_000, 1);
const TXN_SIZE = intEnv('BENCH_TXN_SIZE', 100, 1);
const SCALE_RUNS = intEnv('BENCH_SCALE_RUNS', 3, 1);
const SHARDS = intEnv('BENCH_SHARDS', 10_000, 1);
const PRUNE_FRAGMENTS = intEnv('BENCH_PRUNE_FRAGMENTS', 100_000, 1);
const SHARDS_RUNS = intEnv('BENCH_SHARDS_RUNS', 5, 1);
const CODEC_MB = intEnv('BENCH_CODEC_MB', 64, 1);
const KNOWN = ['read', 'append', 'cold', 'list', 'apply', 'direct', 'codecs', 'shards-list', 'prune-plan', 'consumer'];
const ONLY = new Set(
  (process.env.BENCH_ONLY || KNOWN.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .flatMap((s) => (s === 'shards' ? ['shards-list', 'prune-plan'] : [s])),
);
for (const o of ONLY) {
  if (!KNOWN.includes(o)) {
    console.error(`BENCH_ONLY: unknown benchmark ${o} (known: ${KNOWN.join(', ')}, shards)`);
    process.exit(2);
  }
}
const SHARDS_PARTS = new Set((['shards-list', 'prune-plan'] as const).filter((p) => ONLY.has(p))) as Set<ShardsPart>;

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
// The command npm installs as `gazctl`: the launcher, which runs bin/run.js on Node.
const OUR_BIN = join(REPO, 'bin', 'gazctl');
const GO_BIN = peerBinary('gazctl');
/** Per throughput run: generous, so a slow client still finishes (and is reported as slow). */
const RUN_TIMEOUT_MS = 120_000 + SIZE_MB * 300;

type Tool = 'ours' | 'go';
const TOOLS: Tool[] = ['ours', 'go'];
const LABEL: Record<Tool, string> = { ours: 'ours (TS)', go: 'Go gazctl' };

function command(tool: Tool, args: string[]): [string, string[]] {
  return tool === 'ours' ? [OUR_BIN, args] : [GO_BIN, args];
}

/** Which tool goes first in run `r`: alternate, so neither always gets the warmer cache. */
function order(r: number): Tool[] {
  return r % 2 === 0 ? ['ours', 'go'] : ['go', 'ours'];
}

const failures: string[] = [];
function fail(msg: string): void {
  failures.push(msg);
  console.log(`  !! ${msg}`);
}

function describeFailure(what: string, r: RunResult): string {
  const why = r.timedOut ? 'timed out' : r.signal ? `killed by ${r.signal}` : `exit ${r.code}`;
  const err = r.stderr.trim().split('\n').slice(-5).join('\n     ');
  return `${what}: ${why}${err ? `\n     ${err}` : ''}`;
}

/** The broker's recent warnings and errors about `journal`, to explain a failed run. */
function brokerLogExcerpt(cluster: Cluster, journal: string): string {
  const log = cluster.brokers[0]?.logFile;
  if (!log) return '';
  try {
    const lines = readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l.includes(journal) && /level=(warn|error)/.test(l))
      .slice(-5);
    return lines.length ? `\n     broker log:\n       ${lines.join('\n       ')}` : '';
  } catch {
    return '';
  }
}

/**
 * Append RPCs of `journal` the broker aborted (e.g. "client stream didn't sustain the minimum
 * append data rate"). Go gazctl retries these without a word on its first attempt, so the broker
 * log is the only place a retried run shows.
 */
function brokerAppendAborts(cluster: Cluster, journal: string): number | undefined {
  const log = cluster.brokers[0]?.logFile;
  if (!log) return undefined;
  try {
    const needle = `journal:\\"${journal}\\"`;
    return readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l.includes('Append RPC failed') && l.includes(needle)).length;
  } catch {
    return undefined;
  }
}

const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

// ---- results -----------------------------------------------------------------------------------------

interface ThroughputRun {
  mbps: number;
  wallMs: number;
  cpuS?: number;
  maxRssMiB?: number;
  brokerCpuS?: number;
  /** Append RPCs the broker aborted during the run (append only). */
  brokerAborts?: number;
  /** Warning lines the tool printed (e.g. Go gazctl's "failed to append (will retry)"). */
  warnings: string[];
}
const results: Record<'read' | 'append', Record<Tool, ThroughputRun[]>> = {
  read: { ours: [], go: [] },
  append: { ours: [], go: [] },
};
type ColdKey = 'ours' | 'go' | 'floor';
/** Cold-start times by environment label ("as given", "no NODE_EXTRA_CA_CERTS"). */
const cold = new Map<string, Record<ColdKey, number[]>>();
/** list/apply runs: wall ms, CPU s and peak RSS by benchmark label and tool. */
const scale = new Map<string, Record<Tool, ThroughputRun[]>>();
/** shards-list and prune-plan runs. */
let shardsResults: ShardsResult[] = [];

// ---- cold start ------------------------------------------------------------------------------------

async function benchColdStart(env: NodeJS.ProcessEnv, cwd: string): Promise<void> {
  const envs: [string, NodeJS.ProcessEnv][] = [['as given', env]];
  if (env['NODE_EXTRA_CA_CERTS'] !== undefined) {
    const { NODE_EXTRA_CA_CERTS: _, ...rest } = env;
    envs.push(['no NODE_EXTRA_CA_CERTS', rest]);
  }
  const cmds: Record<ColdKey, [string, string[]]> = {
    ours: command('ours', ['journals', 'list', '--help']),
    go: command('go', ['journals', 'list', '--help']),
    floor: [process.execPath, ['-e', '0']],
  };
  // Check once that each really prints the help (Go gazctl exits 1 after --help, like go-flags).
  for (const k of ['ours', 'go'] as const) {
    const r = spawnSync(cmds[k][0], cmds[k][1], { env, cwd, encoding: 'utf8', timeout: 30_000 });
    if (!/selector/i.test(`${r.stdout}${r.stderr}`)) fail(`cold start: ${LABEL[k]} printed no help (exit ${r.status}): ${r.stderr.trim().slice(0, 300)}`);
  }
  const keys = ['floor', 'ours', 'go'] as const;
  for (const [label, e] of envs) {
    console.log(`\n== cold start (${label}): journals list --help (${COLD_RUNS} runs each, interleaved, after 2 warm-ups)`);
    const times: Record<ColdKey, number[]> = { ours: [], go: [], floor: [] };
    cold.set(label, times);
    for (let i = -2; i < COLD_RUNS; i++) {
      const rot = [...keys.slice(((i % 3) + 3) % 3), ...keys.slice(0, ((i % 3) + 3) % 3)];
      for (const k of rot) {
        const { ms } = await timeSpawn(cmds[k][0], cmds[k][1], e, cwd);
        if (i >= 0) times[k].push(ms);
      }
    }
    for (const k of keys) {
      const xs = times[k];
      console.log(`  ${k.padEnd(5)}  median ${fmt(median(xs), 0)} ms  p90 ${fmt(percentile(xs, 90), 0)} ms  min ${fmt(Math.min(...xs), 0)} ms`);
    }
  }
}

// ---- cluster set-up ----------------------------------------------------------------------------------

function specsYaml(names: string[], app = 'gazctl-bench', root = 'bench/'): string {
  return `name: ${root}
replication: 1
labels:
- name: app
  value: ${app}
fragment:
  length: 67108864
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 5m
children:
${[...names].sort().map((n) => `- name: ${n}`).join('\n')}
`;
}

async function applyJournals(cluster: Cluster, names: string[]): Promise<void> {
  const r = await runGoGazctl(['journals', 'apply'], { brokerAddress: cluster.brokerAddress, input: specsYaml(names), timeoutMs: 30_000 });
  if (r.code !== 0) throw new Error(`journals apply failed (exit ${r.code}):\n${r.stderr}`);
  await waitForJournalsAssigned(cluster, names, 30_000);
}

/** Reads `journal` with Go gazctl and checks its size and sha256 against the input file. */
async function verifyJournal(journal: string, env: NodeJS.ProcessEnv, cwd: string, input: { sha256: string }, who: Tool = 'go'): Promise<boolean> {
  const [cmd, args] = command(who, ['journals', 'read', '-l', `name=${journal}`]);
  const r = await runTimed(cmd, args, { env, cwd, stdout: 'hash', timeoutMs: RUN_TIMEOUT_MS });
  if (r.code !== 0) {
    fail(describeFailure(`verify ${journal}: ${LABEL[who]} read`, r));
    return false;
  }
  const ok = r.out!.bytes === SIZE && r.out!.sha256 === input.sha256;
  const line = `verify ${journal} (read back by ${LABEL[who]}): ${r.out!.bytes} bytes, sha256 ${r.out!.sha256.slice(0, 12)}…`;
  if (ok) console.log(`  ${line} = input`);
  else fail(`${line}; expected ${SIZE} bytes, sha256 ${input.sha256.slice(0, 12)}…`);
  return ok;
}

// ---- append ------------------------------------------------------------------------------------------

async function benchAppend(baseEnv: NodeJS.ProcessEnv, cwd: string, file: string, input: { sha256: string }): Promise<void> {
  console.log(`\n== append: ${SIZE_MB} MiB of lines, --framing lines, ${RUNS} run(s) per tool, each into a fresh journal on a fresh cluster`);
  // Every run gets a cluster of its own, started for it and removed (with its files) after it:
  // a broker that has already taken a few GiB spends measurably more CPU on the next ones
  // (mostly kernel time), which would favour whichever tool happened to run first.
  for (let r = 0; r < RUNS; r++) {
    for (const tool of order(r)) {
      const journal = `bench/append-${tool}-${r}`;
      const cluster = await startCluster({ brokers: 1 });
      try {
        await applyJournals(cluster, [journal]);
        const env = { ...baseEnv, BROKER_ADDRESS: cluster.brokerAddress };
        const brokerPid = cluster.brokers[0]?.pid;
        const [cmd, args] = command(tool, ['journals', 'append', '-l', `name=${journal}`, '--framing', 'lines', '-i', file]);
        const { res, run } = await timedThroughput(cmd, args, { env, cwd, stdout: 'ignore' }, brokerPid);
        if (res.code !== 0) {
          fail(describeFailure(`append ${LABEL[tool]} run ${r + 1}`, res) + brokerLogExcerpt(cluster, journal));
          continue;
        }
        run.brokerAborts = brokerAppendAborts(cluster, journal);
        printRun('append', tool, r, run);
        // The figures count only if every byte landed, in order.
        if (await verifyJournal(journal, env, cwd, input)) results.append[tool].push(run);
      } finally {
        await cluster.stop().catch((e: unknown) => console.error(`stopping the append cluster: ${(e as Error).message}`));
      }
    }
  }
}

/**
 * One timed run of a read or append: the machine settles first (see settle), and the broker's
 * CPU time over the run comes with the figures.
 */
async function timedThroughput(
  cmd: string,
  args: string[],
  o: Pick<RunOptions, 'env' | 'cwd' | 'stdout'>,
  brokerPid: number | undefined,
): Promise<{ res: RunResult; run: ThroughputRun }> {
  await settle(brokerPid);
  const b0 = procCpuSeconds(brokerPid);
  const res = await runTimed(cmd, args, { ...o, timeoutMs: RUN_TIMEOUT_MS, statsFile: join(o.cwd, 'time.txt') });
  const b1 = procCpuSeconds(brokerPid);
  return { res, run: throughputRun(res, b0, b1) };
}

function throughputRun(res: RunResult, b0: number | undefined, b1: number | undefined): ThroughputRun {
  return {
    mbps: mbps(SIZE, res.wallMs),
    wallMs: res.wallMs,
    cpuS: res.cpu ? res.cpu.user + res.cpu.sys : undefined,
    maxRssMiB: res.cpu ? res.cpu.maxRssKiB / 1024 : undefined,
    brokerCpuS: b0 !== undefined && b1 !== undefined ? b1 - b0 : undefined,
    warnings: res.stderr.split('\n').filter((l) => /level=(warn|error)|\bwarn(ing)?\b|retry/i.test(l)),
  };
}

function printRun(what: string, tool: Tool, r: number, run: ThroughputRun): void {
  const extra = [
    run.cpuS !== undefined ? `client CPU ${fmt(run.cpuS, 2)} s` : undefined,
    run.maxRssMiB !== undefined ? `peak RSS ${fmt(run.maxRssMiB, 0)} MiB` : undefined,
    run.brokerCpuS !== undefined ? `broker CPU ${fmt(run.brokerCpuS, 2)} s` : undefined,
    run.brokerAborts ? `broker aborted ${run.brokerAborts} append RPC(s), retried by the tool` : undefined,
    run.warnings.length ? `${run.warnings.length} warning line(s) on stderr` : undefined,
  ].filter(Boolean);
  console.log(
    `  ${what} ${LABEL[tool].padEnd(9)} run ${r + 1}: ${fmt(run.wallMs / 1000, 2)} s  ${fmt(run.mbps)} MB/s${extra.length ? `  (${extra.join(', ')})` : ''}`,
  );
  for (const w of run.warnings.slice(0, 3)) console.log(`      ${w.slice(0, 240)}`);
}

// ---- read ----------------------------------------------------------------------------------------------

async function benchRead(cluster: Cluster, env: NodeJS.ProcessEnv, cwd: string, journal: string, input: { sha256: string }): Promise<void> {
  console.log(`\n== read: ${SIZE_MB} MiB journal ${journal} to /dev/null, ${RUNS} run(s) per tool`);
  const brokerPid = cluster.brokers[0]?.pid;
  // One untimed pass first: it warms the page cache for both tools, and checks our reader's
  // output byte for byte (the journal was verified with Go gazctl).
  await verifyJournal(journal, env, cwd, input, 'ours');
  for (let r = 0; r < RUNS; r++) {
    for (const tool of order(r)) {
      const offsetsOut = join(cwd, `offsets-${tool}-${r}.json`);
      const [cmd, args] = command(tool, ['journals', 'read', '-l', `name=${journal}`, '--offsets-out', offsetsOut]);
      const { res, run } = await timedThroughput(cmd, args, { env, cwd, stdout: 'devnull' }, brokerPid);
      if (res.code !== 0) {
        fail(describeFailure(`read ${LABEL[tool]} run ${r + 1}`, res) + brokerLogExcerpt(cluster, journal));
        continue;
      }
      // The output went to /dev/null: check the offset each tool says it reached.
      let reached: number | undefined;
      try {
        reached = Number((JSON.parse(readFileSync(offsetsOut, 'utf8')) as Record<string, number>)[journal]);
      } catch {
        /* reported below */
      }
      if (reached !== SIZE) {
        fail(`read ${LABEL[tool]} run ${r + 1}: --offsets-out says offset ${reached}, expected ${SIZE}`);
        continue;
      }
      results.read[tool].push(run);
      printRun('read', tool, r, run);
    }
  }
}

// ---- list and apply at scale -------------------------------------------------------------------

/** `n` journal names under `root`, spread over 20 directories (so the YAML has a hierarchy). */
function scaleNames(root: string, n: number): string[] {
  const names: string[] = [];
  for (let i = 0; i < n; i++) names.push(`${root}part-${String(i % 20).padStart(2, '0')}/journal-${String(i).padStart(6, '0')}`);
  return names.sort();
}

/** Applies a spec file with Go gazctl in batches (untimed set-up). */
async function goApplyFile(cluster: Cluster, yaml: string): Promise<void> {
  const r = await runGoGazctl(['journals', 'apply', '--max-txn-size', String(TXN_SIZE)], {
    brokerAddress: cluster.brokerAddress,
    input: yaml,
    timeoutMs: 600_000,
  });
  if (r.code !== 0) throw new Error(`journals apply failed (exit ${r.code}):\n${r.stderr.slice(-2000)}`);
}

/** Journals matching `selector`, counted from Go gazctl's YAML listing (terminals carry a revision). */
async function goCount(cluster: Cluster, selector: string): Promise<{ count: number; yaml: string }> {
  const r = await runGoGazctl(['journals', 'list', '-l', selector, '-o', 'yaml'], { brokerAddress: cluster.brokerAddress, timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`journals list failed (exit ${r.code}):\n${r.stderr.slice(-2000)}`);
  const yaml = r.stdout.toString('utf8');
  return { count: (yaml.match(/^ *revision: /gm) ?? []).length, yaml };
}

function scaleRuns(label: string): Record<Tool, ThroughputRun[]> {
  let rec = scale.get(label);
  if (!rec) scale.set(label, (rec = { ours: [], go: [] }));
  return rec;
}

async function benchList(cluster: Cluster, env: NodeJS.ProcessEnv, cwd: string): Promise<void> {
  const app = 'gazctl-bench-list';
  const names = scaleNames('bench/list/', LIST_JOURNALS);
  const a0 = performance.now();
  await goApplyFile(cluster, specsYaml(names, app, 'bench/list/'));
  console.log(`\n== list: ${LIST_JOURNALS} journals (applied by Go gazctl in ${fmt((performance.now() - a0) / 1000, 1)} s), table and -o yaml, ${SCALE_RUNS} run(s) per tool`);
  for (const format of ['table', 'yaml'] as const) {
    const label = `list ${LIST_JOURNALS} ${format}`;
    const rec = scaleRuns(label);
    for (let r = 0; r < SCALE_RUNS; r++) {
      const sums: Partial<Record<Tool, string>> = {};
      for (const tool of order(r)) {
        const [cmd, args] = command(tool, ['journals', 'list', '-l', `app=${app}`, '-o', format]);
        const res = await runTimed(cmd, args, { env, cwd, stdout: 'hash', timeoutMs: 300_000, statsFile: join(cwd, 'time.txt') });
        if (res.code !== 0) {
          fail(describeFailure(`${label} ${LABEL[tool]} run ${r + 1}`, res));
          continue;
        }
        sums[tool] = `${res.out!.bytes}:${res.out!.sha256}`;
        const run = throughputRun(res, undefined, undefined);
        rec[tool].push(run);
        console.log(`  ${label} ${LABEL[tool].padEnd(9)} run ${r + 1}: ${fmt(res.wallMs / 1000, 3)} s  (${res.out!.bytes} bytes, CPU ${fmt(run.cpuS, 2)} s, peak RSS ${fmt(run.maxRssMiB, 0)} MiB)`);
      }
      if (sums.ours && sums.go && sums.ours !== sums.go) fail(`${label} run ${r + 1}: outputs differ (ours ${sums.ours.slice(0, 24)}…, Go ${sums.go.slice(0, 24)}…)`);
    }
  }
  // Leave the cluster as small as it was for the benchmarks after this one.
  const { yaml } = await goCount(cluster, `app=${app}`);
  await goApplyFile(cluster, `delete: true\n${yaml}`);
}

/**
 * Seconds the broker has spent handling Apply RPCs so far (its gRPC handling-time histogram on
 * /debug/metrics), or undefined when it does not export one. The difference across a run is the
 * part of the run's wall time that no client can save.
 */
async function brokerApplySeconds(cluster: Cluster): Promise<number | undefined> {
  try {
    const res = await fetch(`${cluster.brokerAddress}/debug/metrics`, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) return undefined;
    const m = /^grpc_server_handling_seconds_sum\{[^}]*grpc_method="Apply"[^}]*\} ([0-9.e+-]+)$/m.exec(await res.text());
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

async function benchApply(cluster: Cluster, env: NodeJS.ProcessEnv, cwd: string): Promise<void> {
  const app = 'gazctl-bench-apply';
  const selector = `app=${app}`;
  const names = scaleNames('bench/apply/', APPLY_JOURNALS);
  const specs = join(cwd, 'apply-specs.yaml');
  writeFileSync(specs, specsYaml(names, app, 'bench/apply/'));
  console.log(
    `\n== apply: ${APPLY_JOURNALS} new journals, --max-txn-size ${TXN_SIZE}, ${SCALE_RUNS} run(s) per variant (ours with the default --parallel, ours --parallel 1, Go), interleaved, journals deleted before each run`,
  );
  const label = `apply ${APPLY_JOURNALS} /${TXN_SIZE}`;
  const rec = scaleRuns(label);
  // Ours one transaction at a time (as upstream sends them), beside the same Go runs.
  const seqLabel = `${label} --parallel 1`;
  const seq = scaleRuns(seqLabel);
  type Variant = { tool: Tool; name: string; extra: string[]; into: ThroughputRun[][] };
  const variants: Variant[] = [
    { tool: 'ours', name: LABEL.ours, extra: [], into: [rec.ours] },
    { tool: 'ours', name: `${LABEL.ours} --parallel 1`, extra: ['--parallel', '1'], into: [seq.ours] },
    { tool: 'go', name: LABEL.go, extra: [], into: [rec.go, seq.go] },
  ];
  for (let r = 0; r < SCALE_RUNS; r++) {
    // A different variant goes first in each run, so none always gets the warmer cache.
    const turn = [...variants.slice(r % variants.length), ...variants.slice(0, r % variants.length)];
    for (const v of turn) {
      // Reset: delete what the previous run created (untimed).
      const before = await goCount(cluster, selector);
      if (before.count > 0) await goApplyFile(cluster, `delete: true\n${before.yaml}`);
      const [cmd, args] = command(v.tool, ['journals', 'apply', '--max-txn-size', String(TXN_SIZE), ...v.extra]);
      const server0 = await brokerApplySeconds(cluster);
      const res = await runTimed(cmd, args, { env, cwd, stdout: 'ignore', stdinFile: specs, timeoutMs: 600_000, statsFile: join(cwd, 'time.txt') });
      const server1 = await brokerApplySeconds(cluster);
      const server = server0 !== undefined && server1 !== undefined ? server1 - server0 : undefined;
      if (res.code !== 0) {
        fail(describeFailure(`${label} ${v.name} run ${r + 1}`, res));
        continue;
      }
      const after = await goCount(cluster, selector);
      if (after.count !== APPLY_JOURNALS) {
        fail(`${label} ${v.name} run ${r + 1}: ${after.count} journals exist afterwards, expected ${APPLY_JOURNALS}`);
        continue;
      }
      const run = throughputRun(res, undefined, undefined);
      for (const xs of v.into) xs.push(run);
      // With transactions in flight at once the broker's handling times overlap, so their sum
      // may exceed the wall time.
      const split = server === undefined ? '' : `; broker handling ${fmt(server, 3)} s summed over the calls`;
      console.log(`  ${label} ${v.name.padEnd(23)} run ${r + 1}: ${fmt(res.wallMs / 1000, 3)} s  (CPU ${fmt(run.cpuS, 2)} s, peak RSS ${fmt(run.maxRssMiB, 0)} MiB${split})`);
    }
  }
  const left = await goCount(cluster, selector);
  if (left.count > 0) await goApplyFile(cluster, `delete: true\n${left.yaml}`);
}

// ---- report ------------------------------------------------------------------------------------------

function report(machine: string, elapsedS: number): void {
  resultsFiles.section(...['read', 'append'].filter((n) => ONLY.has(n)));
  console.log(`\n== summary (${SIZE_MB} MiB, ${RUNS} run(s) per tool; MB/s = 10^6 B/s; ratio = ours / Go)`);
  console.log(machine);
  const rows: string[][] = [
    ['', 'ours best', 'ours median', 'Go best', 'Go median', 'ratio best', 'ratio median', 'client CPU s ours/Go', 'broker CPU s ours/Go', 'target'],
  ];
  for (const what of ['read', 'append'] as const) {
    const o = results[what].ours.map((r) => r.mbps);
    const g = results[what].go.map((r) => r.mbps);
    if (o.length === 0 && g.length === 0) continue;
    const ob = o.length ? Math.max(...o) : NaN;
    const gb = g.length ? Math.max(...g) : NaN;
    const om = median(o);
    const gm = median(g);
    const cpu = (t: Tool) => median(results[what][t].map((r) => r.cpuS ?? NaN));
    const bcpu = (t: Tool) => median(results[what][t].map((r) => r.brokerCpuS ?? NaN));
    const ratio = om / gm;
    rows.push([
      `${what} MB/s`,
      fmt(ob),
      fmt(om),
      fmt(gb),
      fmt(gm),
      fmt(ob / gb, 2),
      fmt(ratio, 2),
      `${fmt(cpu('ours'), 2)} / ${fmt(cpu('go'), 2)}`,
      `${fmt(bcpu('ours'), 2)} / ${fmt(bcpu('go'), 2)}`,
      Number.isFinite(ratio) ? (ratio >= 1 ? '>= 1.0 ok' : '>= 1.0 MISSED') : '-',
    ]);
  }
  if (rows.length > 1) console.log(table(rows));

  const rss = (what: 'read' | 'append', t: Tool) => median(results[what][t].map((r) => r.maxRssMiB ?? NaN));
  const rssRows: string[][] = [['peak RSS (MiB, median)', 'ours', 'Go', 'ratio ours/Go']];
  for (const what of ['read', 'append'] as const) {
    if (results[what].ours.length === 0 && results[what].go.length === 0) continue;
    rssRows.push([`journals ${what} ${SIZE_MB} MiB`, fmt(rss(what, 'ours'), 0), fmt(rss(what, 'go'), 0), fmt(rss(what, 'ours') / rss(what, 'go'), 2)]);
  }
  if (rssRows.length > 1) console.log('\n' + table(rssRows));

  resultsFiles.section(...['list', 'apply'].filter((n) => ONLY.has(n)));
  if (scale.size) {
    const rowsS: string[][] = [['at scale', 'ours median s', 'Go median s', 'ratio ours/Go', 'CPU s ours/Go', 'peak RSS MiB ours/Go']];
    for (const [label, rec] of scale) {
      const wall = (t: Tool) => median(rec[t].map((r) => r.wallMs / 1000));
      const cpu = (t: Tool) => median(rec[t].map((r) => r.cpuS ?? NaN));
      const mem = (t: Tool) => median(rec[t].map((r) => r.maxRssMiB ?? NaN));
      rowsS.push([
        label,
        fmt(wall('ours'), 3),
        fmt(wall('go'), 3),
        fmt(wall('ours') / wall('go'), 2),
        `${fmt(cpu('ours'), 2)} / ${fmt(cpu('go'), 2)}`,
        `${fmt(mem('ours'), 0)} / ${fmt(mem('go'), 0)}`,
      ]);
    }
    console.log('\n' + table(rowsS));
  }
  resultsFiles.section(...SHARDS_PARTS);
  printShardsSummary(shardsResults);
  resultsFiles.section('cold');

  for (const [label, times] of cold) {
    const rowsC: string[][] = [[`cold start (${label}): journals list --help`, 'median s', 'p90 s', 'min s']];
    const line = (name: string, xs: number[]) => [name, fmt(median(xs) / 1000, 3), fmt(percentile(xs, 90) / 1000, 3), fmt(Math.min(...xs) / 1000, 3)];
    rowsC.push(line('node -e 0 (floor)', times.floor));
    rowsC.push(line('ours (bin/gazctl)', times.ours));
    rowsC.push(line('Go gazctl', times.go));
    console.log('');
    console.log(table(rowsC));
    const om = median(times.ours);
    console.log(
      `ratios: ours/Go ${fmt(om / median(times.go), 1)}x, ours/floor ${fmt(om / median(times.floor), 2)}x, ` +
        `ours - floor ${fmt((om - median(times.floor)) / 1000, 3)} s; target median < 0.3 s: ${om < 300 ? 'ok' : 'MISSED'}`,
    );
  }
  resultsFiles.section();
  console.log(`\nbench took ${fmt(elapsedS, 0)} s${failures.length ? `; ${failures.length} failure(s):\n  - ${failures.join('\n  - ')}` : ''}`);
}

// ---- main ----------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const t0 = performance.now();
  const cpu = cpus();
  const machine =
    `machine: ${cpu.length} CPU(s) (nproc), ${cpu[0]?.model ?? 'unknown'}; node ${process.version}; ${process.platform} ${process.arch}; ` +
    `Go gazctl ${GO_BIN}; cpu/rss via ${haveGnuTime() ? '/usr/bin/time' : '(unavailable)'}`;
  console.log(`gazctl benchmarks: ours (${OUR_BIN}) vs Go gazctl`);
  console.log(machine);
  console.log(`ours runs ${whichOurs(REPO, process.env)}`);

  const work = mkdtempSync(join(tmpdir(), 'gazctl-bench-'));
  const unregister = registerExitCleanup(() => rmSync(work, { recursive: true, force: true }));
  // Children get a clean environment: no developer BROKER_/CONSUMER_/LOG_ settings or node flags.
  const baseEnv = scrubEnv(process.env, ['BROKER_', 'CONSUMER_', 'LOG_', 'ZONE', 'NODE_OPTIONS', 'GAZ_']);
  let cluster: Cluster | undefined;
  try {
    if (ONLY.has('cold')) await resultsFiles.during('cold', () => benchColdStart(baseEnv, work));
    if (ONLY.has('direct')) {
      await resultsFiles.during('direct', () =>
        benchDirect({ sizeMb: SIZE_MB, runs: RUNS, lineBytes: LINE_BYTES, command, env: baseEnv, work, timeoutMs: RUN_TIMEOUT_MS, fail, variants: DIRECT_VARIANTS }),
      );
    }
    if (ONLY.has('codecs')) await resultsFiles.during('codecs', () => benchCodecs({ sizeMb: CODEC_MB, runs: RUNS, work, fail }));
    if (ONLY.has('consumer')) {
      await resultsFiles.during('consumer', () =>
        benchConsumer({ records: Number(process.env.BENCH_CONSUMER_RECORDS || 1_000_000), runs: Number(process.env.BENCH_CONSUMER_RUNS || 2), fail }),
      );
    }
    if (SHARDS_PARTS.size) {
      shardsResults = await benchShards({ parts: SHARDS_PARTS, runs: SHARDS_RUNS, shards: SHARDS, fragments: PRUNE_FRAGMENTS, command, env: baseEnv, work, fail });
    }

    if (ONLY.has('read') || ONLY.has('append') || ONLY.has('list') || ONLY.has('apply')) {
      const file = join(work, 'lines.txt');
      let input = { sha256: '', lines: 0 };
      if (ONLY.has('read') || ONLY.has('append')) {
        const g0 = performance.now();
        input = writeLinesFile(file, SIZE, LINE_BYTES);
        console.log(
          `\ninput: ${file}, ${statSync(file).size} bytes, ${input.lines} lines (avg ${fmt(SIZE / input.lines, 1)} B), ` +
            `written in ${fmt((performance.now() - g0) / 1000, 1)} s`,
        );
      }

      const c0 = performance.now();
      cluster = await startCluster({ brokers: 1 });
      console.log(
        `cluster: etcd + 1 ${cluster.impl.name} broker at ${cluster.brokerAddress} (started in ${fmt((performance.now() - c0) / 1000, 1)} s); ` +
          `replication 1, codec NONE, fragment length 64 MiB, file:// store`,
      );
      const env = { ...baseEnv, BROKER_ADDRESS: cluster.brokerAddress };

      if (ONLY.has('list')) await resultsFiles.during('list', () => benchList(cluster!, env, work));
      if (ONLY.has('apply')) await resultsFiles.during('apply', () => benchApply(cluster!, env, work));

      if (ONLY.has('append')) await resultsFiles.during('append', () => benchAppend(baseEnv, work, file, input));
      if (ONLY.has('read')) {
        // A journal filled with Go gazctl (untimed) and checked against the input.
        const readJournal = 'bench/read';
        await applyJournals(cluster, [readJournal]);
        const f0 = performance.now();
        const r = await runGoGazctl(['journals', 'append', '-l', `name=${readJournal}`, '--framing', 'lines', '-i', file], {
          brokerAddress: cluster.brokerAddress,
          timeoutMs: RUN_TIMEOUT_MS,
        });
        if (r.code !== 0) throw new Error(`filling ${readJournal} failed (exit ${r.code}):\n${r.stderr}`);
        console.log(`\nfilled ${readJournal} with Go gazctl in ${fmt((performance.now() - f0) / 1000, 1)} s`);
        if (!(await verifyJournal(readJournal, env, work, input))) throw new Error(`${readJournal} does not hold the input`);
        await resultsFiles.during('read', () => benchRead(cluster!, env, work, readJournal, input));
      }
    }
  } catch (err) {
    fail(`benchmark aborted: ${(err as Error).stack ?? String(err)}`);
  } finally {
    await cluster?.stop().catch((e: unknown) => console.error(`stopping the cluster: ${(e as Error).message}`));
    rmSync(work, { recursive: true, force: true });
    unregister();
  }
  report(`machine: nproc ${cpus().length}, node ${process.version}`, (performance.now() - t0) / 1000);
  // One results file per benchmark that ran (BENCH_RESULTS_DIR=none: none written).
  const resultsDir = process.env.BENCH_RESULTS_DIR || join(REPO, 'bench', 'results');
  if (resultsDir !== 'none') {
    const written = resultsFiles.write(resultsDir, { machine, repo: REPO, failures, command: 'npm run bench' });
    if (written.length) console.log(`results: ${written.map((p) => relative(REPO, p)).join(', ')}`);
  }
  process.exitCode = failures.length ? 1 : 0;
}

await main();
