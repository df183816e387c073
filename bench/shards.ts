// Benchmarks `shards-list` and `prune-plan` (BENCH_ONLY=shards-list, prune-plan, or `shards` for
// both): the shards commands of ours against the reference Go gazctl, on a cluster of their own
// (one etcd, one Go broker) with one reference Go consumer (sum-consumer, src/testing/consumers.ts).
//
//   shards-list  `shards list -l app=<app>` of BENCH_SHARDS shards (default 10000), as a table and
//                with `-o yaml`. The specs are applied through our ShardClient.apply in batches of
//                100; every shard is disabled, so the consumer assigns none of them and the
//                listing is the consumer's view of etcd (its keyspace), which is all `shards list`
//                shows for a shard without assignments (status IDLE).
//   prune-plan   `shards prune-log -l id=<shard> --dry-run` (ours) against `shards prune -l
//                id=<shard> --dry-run` (Go) of one disabled shard whose recovery log holds
//                BENCH_PRUNE_FRAGMENTS fragments (default 100000): small files written straight
//                into the file:// store under their fragment names before the journal exists, so
//                the broker's first index refresh lists them all. The shard's FSMHints (primary
//                and two backups, Go encoding/json, as a consumer writes them) are put into etcd
//                and cover only the last few fragments, so nearly every fragment is prunable: the
//                run is the planning (hints, the store health check, the listing of every
//                fragment page by page, the overlap test), with nothing deleted.
//
// Before timing, each benchmark runs both tools once (untimed) and compares what they print: for
// shards-list the table and the YAML byte for byte, for prune-plan how many fragments each plan
// would delete (Go: its "finished pruning log" line at --log.level=info; ours: its plan's summary). A difference prints a warning (it is a sanity check of
// the set-up, not a test). The timed runs then alternate which tool goes first. Ratios are Go
// time / our time: above 1.0 ours is faster.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { JournalClient } from '../src/lib/client/journal-client.js';
import { ShardClient } from '../src/lib/client/shard-client.js';
import { nanosToDuration } from '../src/lib/protocol/duration.js';
import { CompressionCodec, JournalSpec } from '../src/lib/protocol/gen/broker/protocol.js';
import { ShardSpec } from '../src/lib/protocol/gen/consumer/protocol.js';
import { fragmentContentName, sumFromDigest } from '../src/lib/protocol/fragment.js';
import { label, labelSet } from '../src/lib/protocol/labels.js';
import { pollUntil, putKey, startCluster, startConsumers, waitForJournalsAssigned, type Cluster, type ConsumerGroup } from '../src/testing/index.js';
import { fmt, median, runTimed, table, type RunResult } from './util.js';

export type ShardsPart = 'shards-list' | 'prune-plan';
type Tool = 'ours' | 'go';

export interface ShardsBenchOptions {
  parts: ReadonlySet<ShardsPart>;
  /** Timed runs per tool (and format). */
  runs: number;
  /** Shards listed by shards-list. */
  shards: number;
  /** Fragments of the recovery log of prune-plan. */
  fragments: number;
  /** How to run each tool: [command, args]. */
  command: (tool: Tool, args: string[]) => [string, string[]];
  env: NodeJS.ProcessEnv;
  work: string;
  /** Reports a failure (the figures are printed anyway). */
  fail: (msg: string) => void;
}

/** One timed run of one tool. */
export interface ShardsRun {
  wallMs: number;
  cpuS?: number;
  maxRssMiB?: number;
}

/** The runs of one benchmark, by tool. */
export interface ShardsResult {
  label: string;
  runs: Record<Tool, ShardsRun[]>;
}

const LABEL: Record<Tool, string> = { ours: 'ours (TS)', go: 'Go gazctl' };
export const LIST_APP = 'gazctl-bench-shards';
export const PRUNE_APP = 'gazctl-bench-prune';
export const PRUNE_SHARD = 'bench-prune-shard';
const RECOVERY_PREFIX = 'bench/recovery';
const HINT_PREFIX = '/gazette/hints/bench';
/** Bytes of each synthetic fragment of the recovery log. */
const FRAGMENT_BYTES = 64;
/** Fragments at the log's tail covered by the primary hints; the backups reach 2x and 3x as far. */
const TAIL_FRAGMENTS = 10;
const RUN_TIMEOUT_MS = 300_000;

function order(r: number): Tool[] {
  return r % 2 === 0 ? ['ours', 'go'] : ['go', 'ours'];
}

function describeFailure(what: string, r: RunResult): string {
  const why = r.timedOut ? 'timed out' : r.signal ? `killed by ${r.signal}` : `exit ${r.code}`;
  const err = r.stderr.trim().split('\n').slice(-5).join('\n     ');
  return `${what}: ${why}${err ? `\n     ${err}` : ''}`;
}

/**
 * Which code `ours` runs, as bin/run.cjs decides: the bundle of `npm run build` when it is at
 * least as new as the tsc output, else the tsc output.
 */
export function whichOurs(repo: string, env: NodeJS.ProcessEnv): string {
  if (env['GAZCTL_NO_BUNDLE'] === '1') return 'the tsc output in dist/ (GAZCTL_NO_BUNDLE=1)';
  const bundle = statSync(join(repo, 'dist', 'bundle', 'commands.cjs'), { throwIfNoEntry: false });
  if (!bundle) return 'the tsc output in dist/ (no bundle: run npm run build for it)';
  const tsc = statSync(join(repo, 'dist', '.tsbuildinfo'), { throwIfNoEntry: false });
  if (tsc && tsc.mtimeMs > bundle.mtimeMs) return 'the tsc output in dist/ (the bundle in dist/bundle is older than the last tsc build)';
  return `the bundle in dist/bundle (built ${bundle.mtime.toISOString()})`;
}

// ---- set-up ------------------------------------------------------------------------------------

export function listShardSpecs(n: number): ShardSpec[] {
  const specs: ShardSpec[] = [];
  for (let i = 0; i < n; i++) {
    const part = String(i % 20).padStart(2, '0');
    specs.push(
      ShardSpec.fromPartial({
        id: `bench/part-${part}/shard-${String(i).padStart(6, '0')}`,
        sources: [{ journal: `bench/input/part-${part}`, min_offset: 0n }],
        recovery_log_prefix: RECOVERY_PREFIX,
        hint_prefix: HINT_PREFIX,
        hint_backups: 2,
        max_txn_duration: nanosToDuration(1_000_000_000n),
        disable: true,
        // Every tenth shard differs in one field, so the YAML has both a common part and
        // per-shard fields.
        hot_standbys: i % 10 === 0 ? 1 : 0,
        labels: labelSet(label('app', LIST_APP), label('part', part)),
      }),
    );
  }
  return specs;
}

export async function applyShards(group: ConsumerGroup, specs: ShardSpec[]): Promise<void> {
  const client = new ShardClient({ address: group.address });
  try {
    await client.apply(
      specs.map((upsert) => ({ expect_mod_revision: 0n, upsert, delete: '', primary_hints: undefined })),
      { maxTxnSize: 100, parallel: 4 },
    );
  } finally {
    client.close();
  }
}

/** Polls the consumer's listing until `n` shards match `app=<app>`. */
export async function waitForShards(group: ConsumerGroup, app: string, n: number): Promise<void> {
  const client = new ShardClient({ address: group.address });
  let seen = 0;
  try {
    await pollUntil(
      `the consumer to list ${n} shards of ${app}`,
      async () => {
        const r = await client.list({ include: labelSet(label('app', app)), exclude: labelSet() });
        seen = r.shards.length;
        return seen === n;
      },
      { timeoutMs: 60_000, intervalMs: 250, describe: () => `${seen} listed` },
    );
  } finally {
    client.close();
  }
}

/** Go's encoding/json of one FSMHints whose one live file spans [first, last) of `log`. */
function hintsJson(log: string, fnode: number, first: number, last: number): string {
  // Field names and order as Go's encoding/json writes the generated struct (omitempty on
  // scalars; live_nodes and properties always, nil properties as null).
  const segment = { author: 0x5eed, first_seq_no: fnode, first_offset: first, first_checksum: 0x1234abcd, last_seq_no: fnode + 50, last_offset: last };
  return JSON.stringify({ log, live_nodes: [{ fnode, segments: [segment] }], properties: null });
}

interface PruneSetUp {
  log: string;
  /** Fragments the plan should find prunable (below the oldest hinted first_offset). */
  prunable: number;
}

/**
 * Writes `n` fragments of FRAGMENT_BYTES each into `<fileRoot>/<log>/`, creates the recovery log
 * (after the files, so the broker's first refresh of its index lists them all), the disabled
 * shard, and its hints, then waits until the broker lists every fragment.
 */
export async function setUpPrune(cluster: Cluster, group: ConsumerGroup, n: number): Promise<PruneSetUp> {
  const log = `${RECOVERY_PREFIX}/${PRUNE_SHARD}`;
  const dir = join(cluster.fileRoot, log);
  mkdirSync(dir, { recursive: true });
  const w0 = performance.now();
  const body = Buffer.alloc(FRAGMENT_BYTES, 0x2e);
  body[FRAGMENT_BYTES - 1] = 10;
  for (let i = 0; i < n; i++) {
    const begin = BigInt(i * FRAGMENT_BYTES);
    body.write(String(i).padStart(12, '0'), 0, 'latin1');
    const sum = sumFromDigest(createHash('sha1').update(body).digest());
    const name = fragmentContentName({
      journal: log,
      begin,
      end: begin + BigInt(FRAGMENT_BYTES),
      sum,
      compression_codec: CompressionCodec.NONE,
      backing_store: '',
      mod_time: 0n,
      path_postfix: '',
    });
    writeFileSync(join(dir, name), body);
  }
  const writeS = (performance.now() - w0) / 1000;

  const a0 = performance.now();
  const jc = new JournalClient({ address: cluster.brokerAddress });
  try {
    await jc.apply([
      {
        expect_mod_revision: 0n,
        delete: '',
        upsert: JournalSpec.fromPartial({
          name: log,
          replication: 1,
          labels: labelSet(label('app', PRUNE_APP), label('content-type', 'application/x-gazette-recoverylog')),
          fragment: {
            length: 1n << 20n,
            compression_codec: CompressionCodec.NONE,
            stores: ['file:///'],
            refresh_interval: nanosToDuration(300_000_000_000n),
          },
        }),
      },
    ]);
    await waitForJournalsAssigned(cluster, [log], 30_000);
    let listed = 0;
    await pollUntil(
      `the broker to index ${n} fragments of ${log}`,
      async () => {
        listed = (await jc.listFragments(log)).length;
        return listed >= n;
      },
      { timeoutMs: 120_000, intervalMs: 500, describe: () => `${listed} listed` },
    );
  } finally {
    jc.close();
  }
  const indexS = (performance.now() - a0) / 1000;

  await applyShards(group, [
    ShardSpec.fromPartial({
      id: PRUNE_SHARD,
      sources: [{ journal: 'bench/input/prune', min_offset: 0n }],
      recovery_log_prefix: RECOVERY_PREFIX,
      hint_prefix: HINT_PREFIX,
      hint_backups: 2,
      max_txn_duration: nanosToDuration(1_000_000_000n),
      // No consumer plays this synthetic log back.
      disable: true,
      labels: labelSet(label('app', PRUNE_APP)),
    }),
  ]);
  await waitForShards(group, PRUNE_APP, 1);
  // Primary hints cover the last TAIL_FRAGMENTS fragments, backup.0 twice and backup.1 three
  // times as many; the oldest sets what is kept.
  const end = n * FRAGMENT_BYTES;
  const at = (k: number) => Math.max(0, n - k * TAIL_FRAGMENTS) * FRAGMENT_BYTES;
  const etcd = cluster.etcd.endpoint;
  await putKey(etcd, `${HINT_PREFIX}/${PRUNE_SHARD}.primary`, hintsJson(log, 3000, at(1), end));
  await putKey(etcd, `${HINT_PREFIX}/${PRUNE_SHARD}.backup.0`, hintsJson(log, 2000, at(2), at(1) + FRAGMENT_BYTES));
  await putKey(etcd, `${HINT_PREFIX}/${PRUNE_SHARD}.backup.1`, hintsJson(log, 1000, at(3), at(2) + FRAGMENT_BYTES));
  console.log(
    `  set-up: ${n} fragment files of ${FRAGMENT_BYTES} B written in ${fmt(writeS, 1)} s, recovery log ${log} created and ` +
      `its fragments indexed by the broker in ${fmt(indexS, 1)} s; hints (primary, backup.0, backup.1) cover offsets from ${at(3)} on`,
  );
  return { log, prunable: Math.max(0, n - 3 * TAIL_FRAGMENTS) };
}

// ---- timed runs --------------------------------------------------------------------------------

async function timedRun(o: ShardsBenchOptions, tool: Tool, args: string[], stdout: 'hash' | 'ignore'): Promise<RunResult> {
  const [cmd, argv] = o.command(tool, args);
  return runTimed(cmd, argv, { env: o.env, cwd: o.work, stdout, timeoutMs: RUN_TIMEOUT_MS, statsFile: join(o.work, 'shards-time.txt') });
}

/** The interleaved timed runs of one benchmark. */
async function timeBoth(o: ShardsBenchOptions, label: string, args: Record<Tool, string[]>): Promise<ShardsResult> {
  const result: ShardsResult = { label, runs: { ours: [], go: [] } };
  for (let r = 0; r < o.runs; r++) {
    for (const tool of order(r)) {
      const res = await timedRun(o, tool, args[tool], 'hash');
      if (res.code !== 0) {
        o.fail(describeFailure(`${label} ${LABEL[tool]} run ${r + 1}`, res));
        continue;
      }
      const run: ShardsRun = {
        wallMs: res.wallMs,
        cpuS: res.cpu ? res.cpu.user + res.cpu.sys : undefined,
        maxRssMiB: res.cpu ? res.cpu.maxRssKiB / 1024 : undefined,
      };
      result.runs[tool].push(run);
      console.log(
        `  ${label} ${LABEL[tool].padEnd(9)} run ${r + 1}: ${fmt(res.wallMs / 1000, 3)} s  ` +
          `(${res.out!.bytes} bytes out, CPU ${fmt(run.cpuS, 2)} s, peak RSS ${fmt(run.maxRssMiB, 0)} MiB)`,
      );
    }
  }
  return result;
}

/** Runs both tools once, untimed, and warns when their stdout differs. */
async function compareOutputs(o: ShardsBenchOptions, what: string, args: Record<Tool, string[]>): Promise<void> {
  const out: Partial<Record<Tool, { bytes: number; sha256: string }>> = {};
  for (const tool of ['ours', 'go'] as const) {
    const res = await timedRun(o, tool, args[tool], 'hash');
    if (res.code !== 0) {
      o.fail(describeFailure(`${what}: untimed check run of ${LABEL[tool]}`, res));
      return;
    }
    out[tool] = res.out!;
  }
  const same = out.ours!.sha256 === out.go!.sha256 && out.ours!.bytes === out.go!.bytes;
  console.log(
    same
      ? `  check: ${what}: both tools print the same ${out.go!.bytes} bytes (sha256 ${out.go!.sha256.slice(0, 12)}…)`
      : `  WARNING: ${what}: the outputs differ (ours ${out.ours!.bytes} bytes, sha256 ${out.ours!.sha256.slice(0, 12)}…; ` +
          `Go ${out.go!.bytes} bytes, sha256 ${out.go!.sha256.slice(0, 12)}…): the figures compare different work`,
  );
}

/** The counters of the last "finished pruning log" line of a log on stderr (text or JSON format). */
function pruneCounters(stderr: string): Record<string, string> | undefined {
  const lines = stderr.split('\n').filter((l) => l.includes('finished pruning log') && !l.includes('for all shards'));
  const line = lines[lines.length - 1];
  if (!line) return undefined;
  const out: Record<string, string> = {};
  for (const m of line.matchAll(/"?(fragmentsTotal|fragmentsPruned|fragmentsKept|bytesTotal|bytesPruned|bytesKept|skippedJournals)"?[=:]"?(\d+)/g)) {
    out[m[1]!] = m[2]!;
  }
  return out;
}

// ---- the benchmarks ----------------------------------------------------------------------------

async function benchList(o: ShardsBenchOptions, group: ConsumerGroup): Promise<ShardsResult[]> {
  const a0 = performance.now();
  await applyShards(group, listShardSpecs(o.shards));
  await waitForShards(group, LIST_APP, o.shards);
  console.log(
    `\n== shards-list: ${o.shards} shards (disabled; applied through our ShardClient in batches of 100 and listed by the consumer in ` +
      `${fmt((performance.now() - a0) / 1000, 1)} s), table and -o yaml, ${o.runs} run(s) per tool, interleaved`,
  );
  const results: ShardsResult[] = [];
  for (const format of ['table', 'yaml'] as const) {
    const args = ['shards', 'list', '-l', `app=${LIST_APP}`, ...(format === 'yaml' ? ['-o', 'yaml'] : [])];
    await compareOutputs(o, `shards list${format === 'yaml' ? ' -o yaml' : ''}`, { ours: args, go: args });
    results.push(await timeBoth(o, `shards list ${o.shards} ${format}`, { ours: args, go: args }));
  }
  return results;
}

async function benchPrune(o: ShardsBenchOptions, cluster: Cluster, group: ConsumerGroup): Promise<ShardsResult[]> {
  console.log(`\n== prune-plan: dry-run prune of one shard whose recovery log has ${o.fragments} fragments, ${o.runs} run(s) per tool, interleaved`);
  const setup = await setUpPrune(cluster, group, o.fragments);
  const sel = ['-l', `id=${PRUNE_SHARD}`, '--dry-run'];
  const args: Record<Tool, string[]> = { ours: ['shards', 'prune-log', ...sel], go: ['shards', 'prune', ...sel] };
  // Untimed: both tools once, for what their plans would delete: Go's "finished pruning log"
  // counters at --log.level=info, our plan's summary line on stdout.
  const check = (tool: Tool) => {
    const [cmd, argv] = o.command(tool, [...args[tool], ...(tool === 'go' ? ['--log.level=info'] : [])]);
    return spawnSync(cmd, argv, { env: o.env, cwd: o.work, encoding: 'utf8', maxBuffer: 256 << 20, timeout: RUN_TIMEOUT_MS });
  };
  const pruned: Partial<Record<Tool, number>> = {};
  for (const tool of ['ours', 'go'] as const) {
    const r = check(tool);
    if (r.status !== 0) {
      o.fail(`prune-plan: untimed check run of ${LABEL[tool]}: exit ${r.status ?? r.signal}\n     ${String(r.stderr).trim().split('\n').slice(-5).join('\n     ')}`);
      return [];
    }
    const n = tool === 'go' ? pruneCounters(r.stderr)?.['fragmentsPruned'] : /delete (\d+) fragment/.exec(r.stdout)?.[1];
    if (n !== undefined) pruned[tool] = Number(n);
  }
  const show = (t: Tool) => (pruned[t] === undefined ? 'unknown (no summary found in its output)' : `${pruned[t]} fragments`);
  if (pruned.ours === setup.prunable && pruned.go === setup.prunable) {
    console.log(`  check: both plans prune ${setup.prunable} of ${o.fragments} fragments`);
  } else {
    console.log(`  WARNING: expected ${setup.prunable} prunable fragments; ours would prune ${show('ours')}, Go ${show('go')}`);
  }
  return [await timeBoth(o, `prune plan ${o.fragments} fragments`, args)];
}

/** Runs the selected shards benchmarks on a cluster and consumer of their own. */
export async function benchShards(o: ShardsBenchOptions): Promise<ShardsResult[]> {
  const c0 = performance.now();
  const cluster = await startCluster({ brokers: 1 });
  let group: ConsumerGroup | undefined;
  const results: ShardsResult[] = [];
  try {
    group = await startConsumers(cluster, { count: 1, etcdPrefix: '/gazette/consumers/bench' });
    console.log(
      `\n(shards: etcd + 1 ${cluster.impl.name} broker at ${cluster.brokerAddress} + 1 ${group.impl.name} consumer (sum-consumer) at ${group.address}, ` +
        `started in ${fmt((performance.now() - c0) / 1000, 1)} s)`,
    );
    const env = { ...o.env, BROKER_ADDRESS: cluster.brokerAddress, CONSUMER_ADDRESS: group.address };
    const oo = { ...o, env };
    if (o.parts.has('shards-list')) results.push(...(await benchList(oo, group)));
    if (o.parts.has('prune-plan')) results.push(...(await benchPrune(oo, cluster, group)));
  } finally {
    await group?.stop().catch((e: unknown) => console.error(`stopping the consumer: ${(e as Error).message}`));
    await cluster.stop().catch((e: unknown) => console.error(`stopping the shards cluster: ${(e as Error).message}`));
  }
  printShardsSummary(results);
  return results;
}

/** The summary table: best and median per tool, ratios Go / ours (above 1.0: ours is faster). */
export function printShardsSummary(results: ShardsResult[]): void {
  if (results.length === 0) return;
  const rows: string[][] = [
    ['shards (wall s)', 'ours best', 'ours median', 'Go best', 'Go median', 'ratio best', 'ratio median', 'CPU s ours/Go', 'peak RSS MiB ours/Go', 'target'],
  ];
  for (const r of results) {
    const wall = (t: Tool) => r.runs[t].map((x) => x.wallMs / 1000);
    const best = (t: Tool) => (wall(t).length ? Math.min(...wall(t)) : NaN);
    const med = (t: Tool) => median(wall(t));
    const cpu = (t: Tool) => median(r.runs[t].map((x) => x.cpuS ?? NaN));
    const rss = (t: Tool) => median(r.runs[t].map((x) => x.maxRssMiB ?? NaN));
    const ratio = med('go') / med('ours');
    rows.push([
      r.label,
      fmt(best('ours'), 3),
      fmt(med('ours'), 3),
      fmt(best('go'), 3),
      fmt(med('go'), 3),
      fmt(best('go') / best('ours'), 2),
      fmt(ratio, 2),
      `${fmt(cpu('ours'), 2)} / ${fmt(cpu('go'), 2)}`,
      `${fmt(rss('ours'), 0)} / ${fmt(rss('go'), 0)}`,
      Number.isFinite(ratio) ? (ratio >= 1 ? '>= 1.0 ok' : '>= 1.0 MISSED') : '-',
    ]);
  }
  console.log(`\n== shards summary (ratio = Go time / our time: above 1.0 ours is faster)\n${table(rows)}`);
}
