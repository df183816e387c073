// The consumer runtime against the reference Go consumer, the same sum application on the same
// brokers (`BENCH_ONLY=consumer`):
//
//   throughput  one consumer process (ours: bin/gazette-sum.js; Go: sum-consumer) serving 1 and 8
//               shards with no standby. The shards' sources are filled first (BENCH_CONSUMER_RECORDS
//               NDJSON records in all, split evenly over the shards, one source journal each), then
//               the shards are applied; the clock runs from the Apply to every shard having read
//               through its source's head (Stat with read_through): assigning the shards and
//               recovering their empty logs, then consuming the backlog. Reported: records per second, the consumer's CPU seconds over
//               that span (/proc), its peak RSS (VmHWM), and the ratio ours / Go (target >= 1.0).
//   failover    two consumers, 8 shards with one hot standby; kill -9 of the member holding the most
//               primaries; the time until every shard is PRIMARY again. Both kinds run with a 5 s
//               etcd lease (the harness's), which bounds what a failover can take.
//
// Each run gets a fresh cluster (etcd + 1 broker, Go unless GAZCTL_TEST_BROKER=ts), and runs
// alternate which implementation goes first. The machine is shared and noisy: read ratios, not
// absolute figures.
//
// Environment: BENCH_CONSUMER_RECORDS (default 1000000), BENCH_CONSUMER_RUNS (default 2).

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

import { JournalClient, ShardClient, appendOnce } from '../src/lib/index.js';
import {
  applySumAppShards,
  createSumAppJournals,
  goConsumer,
  shardPrimary,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  tsConsumer,
  waitForShardsPrimary,
  type ConsumerImpl,
} from '../src/testing/index.js';
import { fmt, median, procCpuSeconds, table } from './util.js';

export interface ConsumerBenchOptions {
  records: number;
  runs: number;
  fail: (what: string) => void;
}

interface ThroughputRun {
  impl: string;
  shards: number;
  records: number;
  ms: number;
  cpuS: number | undefined;
  peakRssMiB: number | undefined;
}

interface FailoverRun {
  impl: string;
  ms: number;
  moved: number;
}

function peakRssMiB(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** NDJSON records of the sum app, about 30 bytes each, appended in 1 MiB chunks. */
async function fill(journals: JournalClient, journal: string, n: number): Promise<bigint> {
  let head = 0n;
  let i = 0;
  while (i < n) {
    const lines: string[] = [];
    for (let bytes = 0; i < n && bytes < 1 << 20; i++) {
      const line = `{"key":"k${i % 97}","value":${(i % 2001) - 1000}}`;
      lines.push(line);
      bytes += line.length + 1;
    }
    head = (await appendOnce(journals, journal, [Buffer.from(lines.join('\n') + '\n')], { timeoutMs: 120_000 })).commit!.end;
  }
  return head;
}

async function throughput(impl: ConsumerImpl, shards: number, records: number): Promise<ThroughputRun> {
  const cluster = await startCluster({ brokers: 1 });
  try {
    const group = await startConsumers(cluster, { count: 1, impl, etcdPrefix: '/gazette/consumers/bench' });
    try {
      const layout = sumAppLayout({ name: 'bench', shards });
      await createSumAppJournals(cluster, layout, { fragmentLength: 64n << 20n });
      const journals = new JournalClient({ address: cluster.brokerAddress });
      const heads = new Map<string, bigint>();
      try {
        await Promise.all(layout.shards.map(async (s) => heads.set(s.sources[0]!, await fill(journals, s.sources[0]!, Math.floor(records / shards)))));
      } finally {
        journals.close();
      }
      // The clock starts at Apply: a shard starts reading as soon as it is primary, before a
      // poller could see it PRIMARY (a first version timed from there and missed most of the work).
      // So the span includes assigning the shards and recovering their empty logs, alike for both.
      const pid = group.consumers[0]!.pid;
      const cpu0 = procCpuSeconds(pid);
      const t0 = performance.now();
      await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 0 }));
      const sc = new ShardClient({ address: group.address });
      try {
        await Promise.all(layout.shards.map((s) => sc.stat(s.id, { readThrough: { [s.sources[0]!]: heads.get(s.sources[0]!)! }, timeoutMs: 600_000 })));
      } finally {
        sc.close();
      }
      const ms = performance.now() - t0;
      const cpu1 = procCpuSeconds(pid);
      return {
        impl: impl.name,
        shards,
        records: Math.floor(records / shards) * shards,
        ms,
        cpuS: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
        peakRssMiB: peakRssMiB(pid),
      };
    } finally {
      await group.stop();
    }
  } finally {
    await cluster.stop();
  }
}

async function failover(impl: ConsumerImpl): Promise<FailoverRun> {
  const cluster = await startCluster({ brokers: 1 });
  try {
    const group = await startConsumers(cluster, { count: 2, impl, etcdPrefix: '/gazette/consumers/bench' });
    try {
      const layout = sumAppLayout({ name: 'bench', shards: 8 });
      await createSumAppJournals(cluster, layout);
      await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
      const ids = layout.shards.map((s) => s.id);
      const listed = await waitForShardsPrimary(group.address, ids, 120_000, { standbys: true });
      const counts = new Map<string, number>();
      for (const s of listed.values()) counts.set(shardPrimary(s)!, (counts.get(shardPrimary(s)!) ?? 0) + 1);
      const [victim, moved] = [...counts].sort((a, b) => b[1] - a[1])[0]!;
      const t0 = performance.now();
      await group.killConsumer(group.indexOf(victim));
      await waitForShardsPrimary(group.address, ids, 120_000, { exclude: [victim] });
      return { impl: impl.name, ms: performance.now() - t0, moved };
    } finally {
      await group.stop();
    }
  } finally {
    await cluster.stop();
  }
}

export async function benchConsumer(o: ConsumerBenchOptions): Promise<void> {
  const impls = [tsConsumer, goConsumer];
  const tp: ThroughputRun[] = [];
  const fo: FailoverRun[] = [];
  for (let run = 0; run < o.runs; run++) {
    const order = run % 2 === 0 ? impls : [...impls].reverse();
    for (const shards of [1, 8]) {
      for (const impl of order) {
        try {
          const r = await throughput(impl, shards, o.records);
          tp.push(r);
          console.log(`consumer ${impl.name}, ${shards} shard(s): ${r.records} records in ${fmt(r.ms / 1000, 2)} s = ${fmt(r.records / (r.ms / 1000), 0)} msg/s, CPU ${fmt(r.cpuS, 2)} s, peak RSS ${fmt(r.peakRssMiB, 0)} MiB`);
        } catch (e) {
          o.fail(`consumer throughput ${impl.name} ${shards} shard(s): ${(e as Error).message}`);
        }
      }
    }
    for (const impl of order) {
      try {
        const r = await failover(impl);
        fo.push(r);
        console.log(`consumer ${impl.name} failover of ${r.moved} primaries: ${fmt(r.ms / 1000, 2)} s`);
      } catch (e) {
        o.fail(`consumer failover ${impl.name}: ${(e as Error).message}`);
      }
    }
  }
  const rows: string[][] = [['consumer (sum app)', 'ours msg/s', 'Go msg/s', 'ratio ours/Go', 'CPU s ours/Go', 'peak RSS MiB ours/Go', 'target']];
  for (const shards of [1, 8]) {
    const of = (impl: string) => tp.filter((r) => r.impl === impl && r.shards === shards);
    const rate = (impl: string) => median(of(impl).map((r) => r.records / (r.ms / 1000)));
    const cpu = (impl: string) => median(of(impl).map((r) => r.cpuS ?? NaN));
    const rss = (impl: string) => median(of(impl).map((r) => r.peakRssMiB ?? NaN));
    const ratio = rate('ts') / rate('go');
    rows.push([
      `${shards} shard(s), median`,
      fmt(rate('ts'), 0),
      fmt(rate('go'), 0),
      fmt(ratio, 2),
      `${fmt(cpu('ts'), 2)} / ${fmt(cpu('go'), 2)}`,
      `${fmt(rss('ts'), 0)} / ${fmt(rss('go'), 0)}`,
      Number.isFinite(ratio) ? (ratio >= 1 ? '>= 1.0 ok' : '>= 1.0 MISSED') : '-',
    ]);
  }
  const fmed = (impl: string) => median(fo.filter((r) => r.impl === impl).map((r) => r.ms / 1000));
  rows.push(['failover (kill -9 to PRIMARY), median s', fmt(fmed('ts'), 2), fmt(fmed('go'), 2), fmt(fmed('go') / fmed('ts'), 2), '', '', 'lease 5 s']);
  console.log(`\n== consumer summary (ratio above 1.0: ours is faster)\n${table(rows)}`);
}
