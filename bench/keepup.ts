// Does a consumer keep up with a steady trickle of small appends? (issue #29 follow-up)
//
//   node dist/bench/keepup.js          # after `npx tsc -p tsconfig.json`
//
// One cluster (etcd, KEEPUP_BROKERS brokers of KEEPUP_BROKER_IMPL), KEEPUP_CONSUMERS sum-app
// consumers of KEEPUP_IMPL (ts: bin/gazette-sum.js, go: sum-consumer), KEEPUP_SHARDS shards with
// one source journal each and one hot standby, journals of replication KEEPUP_REPLICATION (the
// net-split test's set-up by default). One appender per source appends RECORDS (5) NDJSON records
// per append, one append at a time, paced at KEEPUP_RATE appends a second (it falls below that
// rate only when an append takes longer than its slot). Every KEEPUP_SAMPLE_MS it prints, per
// shard, the lag (the source's acknowledged head minus the shard's read-through from Stat, in
// appends), and over the interval: appends acknowledged per second, transactions per second and
// messages per transaction (from the consumers' gazette_shard_* counters at /metrics or
// /debug/metrics), and CPU of the consumers and brokers (/proc). Nothing is asserted: it measures.
//
// Environment (defaults): KEEPUP_IMPL (ts), KEEPUP_BROKER_IMPL (ts), KEEPUP_BROKERS (3),
// KEEPUP_CONSUMERS (2), KEEPUP_SHARDS (4), KEEPUP_REPLICATION (3), KEEPUP_RATE (8),
// KEEPUP_SECONDS (40), KEEPUP_SAMPLE_MS (5000), KEEPUP_TOXI (unset; 1: every connection through a
// toxiproxy link, as test/integration/net-splits.test.ts sets them up).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JournalClient, ShardClient, appendOnce } from '../src/lib/index.js';
import {
  applySumAppShards,
  createSumAppJournals,
  goBroker,
  goConsumer,
  startCluster,
  startConsumers,
  startToxiproxy,
  sumAppLayout,
  sumAppShardSpecs,
  tsBroker,
  tsConsumer,
  waitForShardsPrimary,
} from '../src/testing/index.js';
import { procCpuSeconds } from './util.js';

const env = (name: string, dflt: string) => process.env[name] ?? dflt;
const num = (name: string, dflt: number) => {
  const v = Number(env(name, String(dflt)));
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);
  return v;
};

const IMPL = env('KEEPUP_IMPL', 'ts');
const BROKER_IMPL = env('KEEPUP_BROKER_IMPL', 'ts');
const BROKERS = num('KEEPUP_BROKERS', 3);
const CONSUMERS = num('KEEPUP_CONSUMERS', 2);
const SHARDS = num('KEEPUP_SHARDS', 4);
const REPLICATION = num('KEEPUP_REPLICATION', 3);
const RATE = num('KEEPUP_RATE', 8);
const SECONDS = num('KEEPUP_SECONDS', 40);
const SAMPLE_MS = num('KEEPUP_SAMPLE_MS', 5000);
const TOXI = process.env.KEEPUP_TOXI === '1';
const RECORDS = 5;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Sum of every sample of `name` in a Prometheus text exposition. */
function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function scrape(endpoint: string): Promise<string> {
  for (const path of ['/metrics', '/debug/metrics']) {
    const res = await fetch(endpoint + path).catch(() => undefined);
    if (res?.ok) return res.text();
  }
  return '';
}

async function main(): Promise<void> {
  const consumerImpl = IMPL === 'go' ? goConsumer : tsConsumer;
  const brokerImpl = BROKER_IMPL === 'go' ? goBroker : tsBroker;
  console.log(`keepup: consumers ${CONSUMERS} x ${consumerImpl.name}, brokers ${BROKERS} x ${brokerImpl.name}, ${SHARDS} shards, replication ${REPLICATION}, ${RATE} appends/s per source of ${RECORDS} records, ${SECONDS} s`);
  // KEEPUP_TOXI=1: the net-split test's links, with no toxic (src/testing/toxiproxy.ts): brokers
  // dial etcd and are dialled through one link each, consumers dial broker 0 through their own.
  const toxiDir = TOXI ? await mkdtemp(join(tmpdir(), 'keepup-toxi-')) : undefined;
  const toxi = toxiDir ? await startToxiproxy({ logDir: toxiDir }) : undefined;
  const cluster = await startCluster({
    brokers: BROKERS,
    impl: brokerImpl,
    ...(toxi
      ? {
          brokerLinks: async (i: number, direct: { etcd: string; broker: string }) => ({
            etcd: (await toxi.link(`etcd-broker-${i}`, direct.etcd)).endpoint,
            advertise: (await toxi.link(`broker-${i}`, direct.broker)).endpoint,
          }),
        }
      : {}),
  });
  const links: string[] = [];
  if (toxi) for (let i = 0; i < CONSUMERS; i++) links.push((await toxi.link(`consumer-${i}-brokers`, cluster.brokers[BROKERS - 1]!.endpoint)).endpoint);
  const group = await startConsumers(cluster, { count: CONSUMERS, impl: consumerImpl, ...(toxi ? { brokerAddress: (i: number) => links[i]! } : {}) });
  const client = new JournalClient({ address: cluster.brokerAddress });
  const shards = new ShardClient({ address: group.address });
  let stopping = false;
  try {
    const layout = sumAppLayout({ name: 'keepup', shards: SHARDS });
    await createSumAppJournals(cluster, layout, { replication: REPLICATION });
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, layout.shards.map((s) => s.id), 60_000, { standbys: true });

    const heads = new Map<string, bigint>();
    let acked = 0;
    let bytesPerAppend = 0;
    const loops = layout.shards.map(async (s) => {
      const journal = s.sources[0]!;
      const t0 = Date.now();
      let n = 0;
      for (let k = 0; !stopping; k++) {
        const lines: string[] = [];
        for (let i = 0; i < RECORDS; i++) lines.push(JSON.stringify({ key: journal, value: ++n, seq: n }));
        const bytes = Buffer.from(lines.join('\n') + '\n');
        bytesPerAppend = bytes.length;
        const r = await appendOnce(client, journal, [bytes], { timeoutMs: 20_000 });
        heads.set(journal, r.commit!.end);
        acked++;
        const wait = t0 + ((k + 1) * 1000) / RATE - Date.now();
        if (wait > 0) await sleep(wait);
      }
    });

    const pids = () => ({ consumers: group.consumers.map((c) => c.pid), brokers: cluster.brokers.map((b) => b.pid) });
    const cpu = (ps: Array<number | undefined>) => ps.reduce<number>((a, p) => a + (procCpuSeconds(p) ?? 0), 0);
    const counters = async () => {
      let txns = 0;
      let msgs = 0;
      for (const c of group.consumers) {
        const text = await scrape(c.endpoint);
        txns += metricSum(text, 'gazette_shard_transactions_total');
        msgs += metricSum(text, 'gazette_shard_read_messages_total');
      }
      return { txns, msgs };
    };

    let last = { at: Date.now(), acked, ...(await counters()), cc: cpu(pids().consumers), bc: cpu(pids().brokers) };
    const start = last.at;
    const rows: string[] = [];
    while (Date.now() - start < SECONDS * 1000) {
      await sleep(SAMPLE_MS);
      const now = { at: Date.now(), acked, ...(await counters()), cc: cpu(pids().consumers), bc: cpu(pids().brokers) };
      const dt = (now.at - last.at) / 1000;
      const lags: string[] = [];
      for (const s of layout.shards) {
        const j = s.sources[0]!;
        const head = heads.get(j) ?? 0n;
        const st = await shards.stat(s.id).catch(() => undefined);
        const rt = st?.read_through[j] ?? 0n;
        lags.push(bytesPerAppend ? ((Number(head - rt) / bytesPerAppend) | 0).toString() : '?');
      }
      const txns = now.txns - last.txns;
      const row =
        `t=${((now.at - start) / 1000).toFixed(0)}s appends/s=${((now.acked - last.acked) / dt).toFixed(1)} txn/s=${(txns / dt).toFixed(1)} ` +
        `msgs/txn=${txns ? ((now.msgs - last.msgs) / txns).toFixed(1) : '-'} lag(appends)=[${lags.join(' ')}] ` +
        `cpu consumers=${(((now.cc - last.cc) / dt) * 100).toFixed(0)}% brokers=${(((now.bc - last.bc) / dt) * 100).toFixed(0)}%`;
      console.log(row);
      rows.push(row);
      last = now;
    }
    stopping = true;
    await Promise.all(loops);
    // Drain: how long until every shard read through the acknowledged heads.
    const drainStart = Date.now();
    for (const s of layout.shards) {
      const j = s.sources[0]!;
      await shards.stat(s.id, { readThrough: { [j]: heads.get(j) ?? 0n }, timeoutMs: 120_000 });
    }
    console.log(`drained: every shard read through its source's head ${((Date.now() - drainStart) / 1000).toFixed(1)} s after the appenders stopped`);
  } finally {
    stopping = true;
    client.close();
    shards.close();
    await group.stop();
    await cluster.stop();
    await toxi?.stop();
    if (toxiDir) await rm(toxiDir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
