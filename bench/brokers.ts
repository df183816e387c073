// Broker benchmark: replicated (R=3) append throughput and read throughput of our brokers
// (bin/gazette.js) against the reference Go brokers, each on a cluster of its own of one etcd
// and three brokers on this machine, with the same client (this process, grpc-js) for both.
//
//   npm run build && BENCH_SIZE_MB=64 node dist/bench/brokers.js
//
// append  BENCH_JOURNALS journals (replication 3, codec NONE, file:// store), one appender per
//         journal in parallel, each Append RPC carrying BENCH_APPEND_KB of content in 64 KiB
//         messages, to the journal's primary, until BENCH_SIZE_MB are acknowledged in all
// read    every journal read back from offset 0 (non-blocking) through its primary, in
//         parallel; byte counts and sha256 are checked against what was appended
// For each phase: MB/s (10^6 bytes/s), the brokers' CPU seconds (user + sys, all three, from
// /proc/<pid>/stat), for appends also the seconds their threads waited for a CPU, and, per
// implementation, the largest peak RSS of its brokers (VmHWM).
// Ratios are ours / Go (above 1.0: ours is faster).
//
// Environment: BENCH_SIZE_MB (default 256), BENCH_JOURNALS (default 4), BENCH_APPEND_KB
// (default 1024), BENCH_RUNS (default 1: runs per implementation; per phase the fastest run
// counts, with that run's CPU seconds).
// Profiling our brokers: GAZCTL_TEST_BROKER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" gives
// each of them those Node options; they are then stopped by signal (not killed) at the end of a
// run so Node writes the profiles (summarise them with dist/bench/cpuprofile.js).
// Exit code: 0 when both implementations ran and verified, 1 otherwise.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';

import { AppendRequest, JournalClient, ReadRequest, Status, type AppendResponse, type ReadResponse } from '../src/lib/protocol/gen/broker/protocol.js';
import { goBroker, grpcTarget, runGoGazctl, startCluster, tsBroker, waitForJournalsAssigned, type BrokerImpl, type Cluster } from '../src/testing/index.js';
import { BenchResults } from './results.js';
import { fmt, procCpuSeconds, table } from './util.js';

function intEnv(name: string, dflt: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min) {
    console.error(`bench: ${name}=${raw}: expected an integer >= ${min}`);
    process.exit(2);
  }
  return v;
}

const SIZE = intEnv('BENCH_SIZE_MB', 256, 1) * 1024 * 1024;
const JOURNALS = intEnv('BENCH_JOURNALS', 4, 1);
const APPEND = intEnv('BENCH_APPEND_KB', 1024, 1) * 1024;
const RUNS = intEnv('BENCH_RUNS', 1, 1);
const MSG = 64 * 1024;

function vmHwmKiB(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Seconds the brokers' threads spent on a CPU and waiting in the run queue for one (the first two
 * fields of /proc/<pid>/task/<tid>/schedstat), summed over every thread of the three brokers. On
 * a busy machine the wait, not the CPU time, is what sets an append's pace.
 */
function brokersSched(c: Cluster): { run: number; wait: number } {
  let run = 0;
  let wait = 0;
  for (const b of c.brokers) {
    if (b.pid === undefined) continue;
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${b.pid}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      try {
        const f = readFileSync(`/proc/${b.pid}/task/${t}/schedstat`, 'utf8').split(' ');
        run += Number(f[0]) / 1e9;
        wait += Number(f[1]) / 1e9;
      } catch {
        /* the thread is gone */
      }
    }
  }
  return { run, wait };
}

function brokersCpu(c: Cluster): number {
  return c.brokers.reduce((s, b) => s + (procCpuSeconds(b.pid) ?? 0), 0);
}

function append(client: JournalClient, journal: string, data: Buffer): Promise<AppendResponse> {
  return new Promise((resolve, reject) => {
    const call = client.append({ deadline: Date.now() + 60_000 }, (err, res) => (err ? reject(err) : resolve(res)));
    call.write(AppendRequest.fromPartial({ journal }));
    for (let off = 0; off < data.length; off += MSG) call.write(AppendRequest.fromPartial({ content: data.subarray(off, off + MSG) }));
    call.write(AppendRequest.fromPartial({}));
    call.end();
  });
}

function readAll(client: JournalClient, journal: string): Promise<{ bytes: number; sha: string }> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    let bytes = 0;
    let next = 0n;
    const call = client.read(ReadRequest.fromPartial({ journal, offset: 0n, block: false }), { deadline: Date.now() + 600_000 });
    call.on('data', (r: ReadResponse) => {
      if (r.content.length === 0) return;
      if (r.offset !== next) {
        call.cancel();
        reject(new Error(`${journal}: content at ${r.offset}, expected ${next}`));
        return;
      }
      hash.update(r.content);
      bytes += r.content.length;
      next += BigInt(r.content.length);
    });
    call.on('error', reject);
    call.on('end', () => resolve({ bytes, sha: hash.digest('hex') }));
  });
}

interface Figures {
  impl: string;
  appendMBs: number;
  appendCpu: number;
  /** Seconds the brokers' threads waited for a CPU during the appends. */
  appendWait: number;
  readMBs: number;
  readCpu: number;
  peakMiB: number;
}

/**
 * Lets our brokers write their --cpu-prof profiles: SIGINT starts a broker's exit, a second one
 * makes it exit at once (through process exit, which writes the profile), then waits up to 10 s
 * for each to be gone. The cluster's stop() kills them, which would write nothing.
 */
async function stopForProfiles(c: Cluster): Promise<void> {
  const pids = c.brokers.map((b) => b.pid).filter((p): p is number => p !== undefined);
  const signal = (): void => {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGINT');
      } catch {
        /* already gone */
      }
    }
  };
  signal();
  await new Promise((r) => setTimeout(r, 300));
  signal();
  const deadline = Date.now() + 10_000;
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  while (Date.now() < deadline && pids.some(alive)) await new Promise((r) => setTimeout(r, 100));
}

async function runOne(impl: BrokerImpl): Promise<Figures> {
  const cluster = await startCluster({ brokers: 3, impl });
  const clients = new Map<string, JournalClient>();
  try {
    const names = Array.from({ length: JOURNALS }, (_, i) => `bench/brokers/j${i}`);
    const specs = `name: bench/brokers/\nreplication: 3\nfragment:\n  length: 67108864\n  compression_codec: NONE\n  stores:\n  - file:///\n  refresh_interval: 1m\n  flush_interval: 24h\nchildren:\n${names.map((n) => `- name: ${n}`).join('\n')}\n`;
    const r = await runGoGazctl(['journals', 'apply'], { brokerAddress: cluster.brokerAddress, input: specs });
    if (r.code !== 0) throw new Error(`apply: ${r.stderr}`);
    const listed = await waitForJournalsAssigned(cluster, names, 60_000);
    const primaryOf = (n: string): JournalClient => {
      const route = listed.get(n)!.route!;
      const ep = route.endpoints[route.primary]!;
      let c = clients.get(ep);
      if (!c) {
        c = new JournalClient(grpcTarget(ep), credentials.createInsecure(), { 'grpc.max_receive_message_length': 64 << 20 });
        clients.set(ep, c);
      }
      return c;
    };
    // Distinct content per append (a counter in the first bytes), hashed per journal as sent.
    const block = Buffer.alloc(APPEND);
    for (let i = 0; i < block.length; i++) block[i] = 97 + (i % 26);
    const perJournal = Math.ceil(SIZE / JOURNALS / APPEND);
    const sent = new Map(names.map((n) => [n, createHash('sha256')]));
    const cpu0 = brokersCpu(cluster);
    const sched0 = brokersSched(cluster);
    const t0 = performance.now();
    await Promise.all(
      names.map(async (n, ji) => {
        const client = primaryOf(n);
        for (let k = 0; k < perJournal; k++) {
          const data = Buffer.from(block);
          data.write(`${ji}:${k}:`.padEnd(24, '.'), 0, 'latin1');
          const res = await append(client, n, data);
          if (res.status !== Status.OK) throw new Error(`${n}: append ${k}: ${Status[res.status]}`);
          sent.get(n)!.update(data);
        }
      }),
    );
    const appendS = (performance.now() - t0) / 1000;
    const appendCpu = brokersCpu(cluster) - cpu0;
    const sched1 = brokersSched(cluster);
    const appendWait = sched1.wait - sched0.wait;
    const total = perJournal * APPEND * JOURNALS;

    const cpu1 = brokersCpu(cluster);
    const t1 = performance.now();
    const got = await Promise.all(names.map((n) => readAll(primaryOf(n), n)));
    const readS = (performance.now() - t1) / 1000;
    const readCpu = brokersCpu(cluster) - cpu1;
    for (const [i, n] of names.entries()) {
      const want = sent.get(n)!.digest('hex');
      if (got[i]!.bytes !== perJournal * APPEND || got[i]!.sha !== want) throw new Error(`${n}: read ${got[i]!.bytes} bytes, sha ${got[i]!.sha}; appended ${perJournal * APPEND}, sha ${want}`);
    }
    const peakKiB = Math.max(...cluster.brokers.map((b) => vmHwmKiB(b.pid) ?? 0));
    return { impl: impl.name, appendMBs: total / 1e6 / appendS, appendCpu, appendWait, readMBs: total / 1e6 / readS, readCpu, peakMiB: peakKiB / 1024 };
  } finally {
    for (const c of clients.values()) c.close();
    if (impl === tsBroker && /--cpu-prof\b/.test(process.env.GAZCTL_TEST_BROKER_NODE_ARGS ?? '')) await stopForProfiles(cluster);
    await cluster.stop();
  }
}

let ok = true;
const best = new Map<string, Figures>();
// What this run prints also goes to bench/results/brokers.md (bench/results.ts).
const resultsFiles = new BenchResults();
resultsFiles.section('brokers');
console.log(`broker benchmark: ${SIZE / 1024 / 1024} MiB over ${JOURNALS} journals at replication 3, ${APPEND / 1024} KiB per append, ${RUNS} run(s) per implementation`);
for (let run = 0; run < RUNS; run++) {
  // Alternate which implementation goes first.
  for (const impl of run % 2 ? [tsBroker, goBroker] : [goBroker, tsBroker]) {
    try {
      const f = await runOne(impl);
      console.log(`  run ${run + 1} ${f.impl}: append ${fmt(f.appendMBs)} MB/s (${fmt(f.appendCpu, 2)} CPU s, ${fmt(f.appendWait, 2)} s waiting for a CPU), read ${fmt(f.readMBs)} MB/s (${fmt(f.readCpu, 2)} CPU s), peak RSS ${fmt(f.peakMiB, 0)} MiB`);
      const b = best.get(f.impl);
      // Per phase, the fastest run counts, with its own CPU figure; peak RSS is the largest seen.
      best.set(
        f.impl,
        b
          ? {
              impl: f.impl,
              ...(f.appendMBs > b.appendMBs ? { appendMBs: f.appendMBs, appendCpu: f.appendCpu, appendWait: f.appendWait } : { appendMBs: b.appendMBs, appendCpu: b.appendCpu, appendWait: b.appendWait }),
              ...(f.readMBs > b.readMBs ? { readMBs: f.readMBs, readCpu: f.readCpu } : { readMBs: b.readMBs, readCpu: b.readCpu }),
              peakMiB: Math.max(b.peakMiB, f.peakMiB),
            }
          : f,
      );
    } catch (e) {
      ok = false;
      console.error(`bench: ${impl.name} brokers: ${(e as Error).message}`);
    }
  }
}
const go = best.get('go');
const ts = best.get('ts');
const rows = [['', 'append MB/s', 'append CPU s', 'read MB/s', 'read CPU s', 'peak RSS MiB (max broker)']];
for (const f of [go, ts]) if (f) rows.push([f.impl === 'go' ? 'Go brokers' : 'our brokers', fmt(f.appendMBs), fmt(f.appendCpu, 2), fmt(f.readMBs), fmt(f.readCpu, 2), fmt(f.peakMiB, 0)]);
if (go && ts) rows.push(['ours / Go', fmt(ts.appendMBs / go.appendMBs, 2), fmt(ts.appendCpu / go.appendCpu, 2), fmt(ts.readMBs / go.readMBs, 2), fmt(ts.readCpu / go.readCpu, 2), fmt(ts.peakMiB / go.peakMiB, 2)]);
console.log('\n' + table(rows));
if (go && ts) console.log(`\nratios (targets >= 1.0): appends ${fmt(ts.appendMBs / go.appendMBs, 2)} of Go, reads ${fmt(ts.readMBs / go.readMBs, 2)} of Go`);
resultsFiles.section();
const cpu0 = cpus()[0];
const machine = `machine: ${cpus().length} CPU(s) (nproc), ${cpu0?.model ?? 'unknown'}; node ${process.version}; ${process.platform} ${process.arch}`;
const repo = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
if ((process.env.BENCH_RESULTS_DIR || '') !== 'none') {
  resultsFiles.write(process.env.BENCH_RESULTS_DIR || join(repo, 'bench', 'results'), {
    machine,
    repo,
    failures: ok ? [] : ['a run failed (see its error above)'],
    command: 'node dist/bench/brokers.js',
  });
}
process.exit(ok && go && ts ? 0 : 1);
