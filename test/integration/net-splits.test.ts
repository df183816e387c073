// Issue #29: net-splits heal by themselves. One cluster of our own processes (3 TypeScript
// brokers, 2 TypeScript sum-app consumers, one etcd), cut where a partition cuts:
//
//   * broker i -> etcd: its --etcd.address is its own toxiproxy link to etcd
//     (src/testing/toxiproxy.ts);
//   * broker 1 <-> everyone but etcd: broker 1 runs in a network namespace of its own
//     (src/testing/netns.ts), joined to the host by a veth pair; brokers 0 and 2 listen on the
//     host end's address, broker 1 on the namespace end's, and its etcd link listens on the host
//     end's. The cut drops every packet crossing the pair, both ways, but those of its etcd link;
//   * consumer i -> brokers: its --broker.address is its own toxiproxy link to broker 2 (with no
//     route cache, the default, a consumer dials nothing else of the brokers);
//   * etcd as a whole: stopped, and started again on the same data directory.
//
// A cut black-holes both directions (nothing is refused or reset: a toxiproxy link holds the
// bytes and delivers them when it heals, the namespace's cut drops packets and TCP retransmits
// them after the heal, as after a real partition). Under load (appenders writing numbered records to the
// sum app's sources all along), four partitions of 30 s, one after another: broker 0 from etcd,
// broker 1 from its peers (and from every other process but etcd, both ways), consumer 0 from its brokers, etcd
// down. For each: `gazctl health` exits 1 during the cut (each run within its --timeout), exits 0
// with --exit-when-healthy after it, no process was restarted (same pids, all alive), no shard is
// FAILED and every shard has a primary again, every source takes appends again and every
// recovery log takes an (empty) append. At the end: every acknowledged append is in its journal
// exactly at its acknowledged offsets and no record is there twice, and `gazctl shards recover`
// (Go gazctl) of every shard gives exactly the totals and offsets of its sources' content.
// See docs/net-splits.md. NS_DEBUG=1 runs brokers and consumers at --log.level=debug (with
// GAZCTL_TEST_KEEP_TEMP=1 to keep their logs).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';

import { JournalClient, ShardClient, appendOnce } from '../../src/lib/index.js';
import { ReplicaStatus_Code } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  delay,
  pollUntil,
  readJsonFileState,
  runGoGazctlShards,
  shardReplicaCodes,
  startCluster,
  startConsumers,
  probeTcp,
  startNetns,
  startToxiproxy,
  sumAppLayout,
  sumAppShardSpecs,
  tsBroker,
  tsConsumer,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type Netns,
  type SumAppLayout,
  type ToxiLink,
  type Toxiproxy,
} from '../../src/testing/index.js';
import { describeResult, runGazctl, type GazctlResult } from '../helpers/cli.js';

/** How long each partition lasts (issue #29). */
const SPLIT_MS = 30_000;
const APP = 'ns';
const RECORDS_PER_APPEND = 5;

interface Ack {
  journal: string;
  first: number;
  last: number;
  begin: bigint;
  end: bigint;
  bytes: Buffer;
  /** When the append was started (Date.now()). */
  startedAt: number;
}

/** Appenders writing numbered NDJSON records to each source, one loop per journal. */
class Load {
  readonly acks: Ack[] = [];
  readonly failed: Array<{ journal: string; first: number; last: number; err: string }> = [];
  private stopping = false;
  private readonly loops: Promise<void>[] = [];

  constructor(
    private readonly client: JournalClient,
    readonly journals: string[],
  ) {}

  start(): void {
    for (const j of this.journals) this.loops.push(this.loop(j));
  }

  private async loop(journal: string): Promise<void> {
    const key = journal.split('/').pop()!;
    let n = 0;
    while (!this.stopping) {
      const first = n + 1;
      const lines: string[] = [];
      for (let k = 0; k < RECORDS_PER_APPEND; k++) {
        n++;
        lines.push(JSON.stringify({ key, value: n, seq: n }));
      }
      const bytes = Buffer.from(lines.join('\n') + '\n');
      const startedAt = Date.now();
      try {
        // Retries what cannot have committed; an append hung in a cut is given up after 20 s
        // and is then ambiguous: it may or may not be in the journal.
        const r = await appendOnce(this.client, journal, [bytes], { timeoutMs: 20_000, signal: AbortSignal.timeout(20_000) });
        this.acks.push({ journal, first, last: n, begin: r.commit!.begin, end: r.commit!.end, bytes, startedAt });
      } catch (e) {
        this.failed.push({ journal, first, last: n, err: (e as Error).message.split('\n')[0]! });
        await delay(250);
      }
      // ~3 appends a second per source: well within what the consumers commit (one append's
      // records per transaction here), so that reading through after a heal measures recovery,
      // not a backlog.
      await delay(300);
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }
}

describe('net-splits heal by themselves (#29): our brokers and consumers, under load', { timeout: 420_000 }, () => {
  let toxi: Toxiproxy | undefined;
  let toxiDir: string | undefined;
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let layout: SumAppLayout;
  let load: Load | undefined;
  let client: JournalClient | undefined;
  const etcdLinks: ToxiLink[] = [];
  /** Broker 1's network namespace. */
  let netns: Netns | undefined;
  const consumerLinks: ToxiLink[] = [];
  let pids: number[] = [];

  const processes = () => [...cluster!.brokers, ...group!.consumers];
  const shardIds = () => layout.shards.map((s) => s.id);
  const sources = () => layout.shards.flatMap((s) => s.sources);
  // gazctl health asks broker 2 and consumer 1 (never cut themselves), and etcd directly.
  const healthEnv = () => ({
    BROKER_ADDRESS: cluster!.brokers[2]!.endpoint,
    CONSUMER_ADDRESS: group!.consumers[1]!.endpoint,
    ETCD_ADDRESS: cluster!.etcd.endpoint,
  });
  const health = (args: string[], timeoutMs: number): Promise<GazctlResult> =>
    runGazctl(['health', '-l', `app=${APP}`, '-o', 'json', ...args], { env: healthEnv(), timeoutMs });
  const problems = (r: GazctlResult): string => {
    try {
      const doc = JSON.parse(r.stdout.toString()) as { problems: Array<{ line: string }> };
      return doc.problems.map((p) => p.line).join('\n');
    } catch {
      return r.stdout.toString() + r.stderr;
    }
  };

  before(async () => {
    toxiDir = await mkdtemp(join(tmpdir(), 'gazctl-toxiproxy-'));
    toxi = await startToxiproxy({ logDir: toxiDir });
    netns = await startNetns({ logDir: toxiDir });
    const ns = netns;
    cluster = await startCluster({
      brokers: 3,
      impl: tsBroker,
      ordered: true, // broker 0 allocates: the first cut takes the allocator away from etcd
      brokerArgs: process.env.NS_DEBUG ? ['--log.level=debug'] : undefined,
      brokerLinks: async (i, direct) => {
        // Broker 1 in its namespace dials its etcd link and the other brokers on the host end's
        // address; everyone on the host dials it at the namespace end's.
        const isolated = i === 1;
        etcdLinks[i] = await toxi!.link(`etcd-broker-${i}`, direct.etcd, isolated ? { host: ns.hostAddress } : {});
        return isolated
          ? { etcd: etcdLinks[i]!.endpoint, host: ns.address, wrap: ns.wrap }
          : { etcd: etcdLinks[i]!.endpoint, host: ns.hostAddress };
      },
    });
    for (let i = 0; i < 2; i++) consumerLinks[i] = await toxi.link(`consumer-${i}-brokers`, cluster.brokers[2]!.endpoint);
    group = await startConsumers(cluster, { count: 2, impl: tsConsumer, brokerAddress: (i) => consumerLinks[i]!.endpoint, extraArgs: process.env.NS_DEBUG ? ['--log.level=debug'] : undefined });
    layout = sumAppLayout({ name: APP, shards: 4 });
    // Replication 3 on 3 brokers: every journal has every broker in its route, so each broker
    // cut touches all of them, and a broker missing shows as journals short of brokers.
    await createSumAppJournals(cluster, layout, { replication: 3 });
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 1 }));
    await waitForShardsPrimary(group.address, shardIds(), 60_000, { standbys: true });
    pids = processes().map((p) => p.pid!);
    client = new JournalClient({ address: cluster.brokers[2]!.endpoint });
    load = new Load(client, sources());
    load.start();
  });

  after(async () => {
    await load?.stop();
    client?.close();
    await toxi?.healAll().catch(() => undefined);
    await netns?.heal().catch(() => undefined);
    await group?.stop();
    await cluster?.stop();
    await toxi?.stop();
    await netns?.stop();
    if (toxiDir) await rm(toxiDir, { recursive: true, force: true });
  });

  /** Everything the issue asks of a healed split, checked after each one. */
  async function checkHealed(t: TestContext, what: string, healedAt: number): Promise<void> {
    const r = await health(['--exit-when-healthy', '--timeout', '120s', '--interval', '1s'], 150_000);
    assert.equal(r.code, 0, `${what}: gazctl health --exit-when-healthy\n${describeResult(['health'], r)}`);
    // One JSON document per line, printed whenever the problems changed: what was still wrong.
    const rounds = r.stdout.toString().trim().split('\n').slice(0, -1);
    const still = rounds.map((l) => (JSON.parse(l) as { problems: Array<{ line: string }> }).problems.map((p) => p.line).join('; '));
    t.diagnostic(`${what}: healthy again ${((Date.now() - healedAt) / 1000).toFixed(1)} s after the heal${still.length ? `; until then: ${still.join(' | ')}` : ''}`);

    processes().forEach((p, i) => {
      assert.equal(p.alive?.(), true, `${what}: ${p.id} exited\n${p.describe?.()}`);
      assert.equal(p.pid, pids[i], `${what}: ${p.id} was restarted`);
    });

    const listed = await waitForShardsPrimary(group!.address, shardIds(), 60_000);
    for (const [id, s] of listed) {
      const failed = [...shardReplicaCodes(s)].filter(([, c]) => c === ReplicaStatus_Code.FAILED);
      assert.deepEqual(failed, [], `${what}: shard ${id} has a FAILED replica: ${JSON.stringify(s.status)}`);
    }

    // Every source takes appends again (the appenders' own), every recovery log an empty one.
    await pollUntil(
      `${what}: an append to every source started after the heal`,
      async () => sources().every((j) => load!.acks.some((a) => a.journal === j && a.startedAt >= healedAt)),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    for (const s of layout.shards) {
      await appendOnce(client!, s.recoveryLog, [], { timeoutMs: 30_000 });
    }

    // The consumers process again: every shard reads through what was acknowledged so far.
    const heads = new Map<string, bigint>();
    for (const a of load!.acks) if (a.end > (heads.get(a.journal) ?? 0n)) heads.set(a.journal, a.end);
    const shards = new ShardClient({ address: group!.address });
    try {
      await Promise.all(
        layout.shards.map((s) =>
          shards.stat(s.id, { readThrough: Object.fromEntries(s.sources.map((j) => [j, heads.get(j) ?? 0n])), timeoutMs: 60_000 }),
        ),
      );
    } finally {
      shards.close();
    }
    t.diagnostic(`${what}: every shard read through the acknowledged appends ${((Date.now() - healedAt) / 1000).toFixed(1)} s after the heal`);
  }

  /**
   * Cut, check health reports it within the cut (and run `during`, if given), hold the cut for
   * SPLIT_MS, heal, check.
   */
  async function split(t: TestContext, what: string, cut: () => Promise<void>, heal: () => Promise<void>, during?: () => Promise<void>): Promise<void> {
    const acksBefore = load!.acks.length;
    const failedBefore = load!.failed.length;
    await cut();
    const cutAt = Date.now();
    let seen: GazctlResult | undefined;
    await pollUntil(
      `${what}: gazctl health to exit 1 during the cut`,
      async () => {
        const r = await health(['--timeout', '5s'], 60_000);
        assert.ok(!r.timedOut, `${what}: gazctl health --timeout 5s did not exit by itself\n${describeResult(['health'], r)}`);
        assert.ok(r.code === 0 || r.code === 1, `${what}: gazctl health\n${describeResult(['health'], r)}`);
        if (r.code === 1) seen = r;
        return r.code === 1;
      },
      { timeoutMs: SPLIT_MS - 2000, intervalMs: 500 },
    );
    t.diagnostic(`${what}: gazctl health exit 1 ${((Date.now() - cutAt) / 1000).toFixed(1)} s into the cut:\n${problems(seen!)}`);
    await during?.();
    await delay(Math.max(0, cutAt + SPLIT_MS - Date.now()));
    await heal();
    const healedAt = Date.now();
    await checkHealed(t, what, healedAt);
    t.diagnostic(
      `${what}: ${load!.acks.length - acksBefore} appends acknowledged, ${load!.failed.length - failedBefore} failed (ambiguous) since the cut` +
        (load!.failed.length > failedBefore ? `; e.g. ${load!.failed[failedBefore]!.err}` : ''),
    );
  }

  test('broker 0 (the allocator) cut from etcd for 30 s', async (t) => {
    await split(t, 'broker 0 from etcd', () => etcdLinks[0]!.cut(), () => etcdLinks[0]!.heal());
  });

  test('broker 1 cut from its peers (and everyone but etcd), both ways, for 30 s', async (t) => {
    const etcdPort = Number(etcdLinks[1]!.listen.split(':').pop());
    const [b0, b1, b2] = cluster!.brokers.map((b) => new URL(b.endpoint));
    await split(t, 'broker 1 from peers', () => netns!.cut({ except: [etcdPort] }), () => netns!.heal(), async () => {
      // The cut is what it says: silence both ways between broker 1 and its peers (no refusal),
      // while broker 1's etcd link still answers.
      const seen = {
        // From the test process: the host's network, where brokers 0 and 2 run.
        'host -> broker 1': await probeTcp(b1!.hostname, Number(b1!.port)),
        'broker 1 -> broker 0': await probeTcp(b0!.hostname, Number(b0!.port), { wrap: netns!.wrap }),
        'broker 1 -> broker 2': await probeTcp(b2!.hostname, Number(b2!.port), { wrap: netns!.wrap }),
        'broker 1 -> its etcd link': await probeTcp(netns!.hostAddress, etcdPort, { wrap: netns!.wrap }),
      };
      assert.deepEqual(seen, { 'host -> broker 1': 'silent', 'broker 1 -> broker 0': 'silent', 'broker 1 -> broker 2': 'silent', 'broker 1 -> its etcd link': 'connected' });
    });
  });

  test('consumer 0 cut from its brokers for 30 s', async (t) => {
    await split(t, 'consumer 0 from brokers', () => consumerLinks[0]!.cut(), () => consumerLinks[0]!.heal());
  });

  test('etcd stopped for 30 s, then started again on its data directory', async (t) => {
    await split(t, 'etcd restarted', () => cluster!.etcd.halt('SIGTERM'), () => cluster!.etcd.resume());
  });

  test('nothing acknowledged is lost, nothing is there twice, and the consumers summed it exactly', async (t) => {
    await load!.stop();
    const content = new Map<string, Buffer>();
    for (const j of sources()) {
      const parts: Buffer[] = [];
      for await (const c of client!.read({ journal: j, offset: 0n })) parts.push(Buffer.from(c.content));
      content.set(j, Buffer.concat(parts));
    }
    for (const a of load!.acks) {
      const got = content.get(a.journal)!.subarray(Number(a.begin), Number(a.end));
      assert.ok(got.equals(a.bytes), `acknowledged append of ${a.journal} records ${a.first}-${a.last} at [${a.begin}, ${a.end}) reads back as ${JSON.stringify(got.toString().slice(0, 200))}`);
    }
    const totals = new Map<string, number>();
    let landed = 0;
    for (const [j, buf] of content) {
      const seqs = new Set<number>();
      let sum = 0;
      for (const line of buf.toString().split('\n')) {
        if (line === '') continue;
        const r = JSON.parse(line) as { key: string; value: number; seq: number };
        assert.ok(!seqs.has(r.seq), `${j}: record ${r.seq} is there twice`);
        seqs.add(r.seq);
        sum += r.value;
      }
      totals.set(j, sum);
      landed += load!.failed.filter((f) => f.journal === j && seqs.has(f.first)).length;
    }
    t.diagnostic(`${load!.acks.length} appends acknowledged, all read back at their offsets; ${load!.failed.length} failed, of which ${landed} are in their journal`);

    // The consumers read through every source's head, then Go gazctl recovers each shard's
    // state.json from its recovery log: exactly the sums of the content, and its offsets.
    const shards = new ShardClient({ address: group!.address });
    try {
      await Promise.all(
        layout.shards.map((s) =>
          shards.stat(s.id, { readThrough: Object.fromEntries(s.sources.map((j) => [j, BigInt(content.get(j)!.length)])), timeoutMs: 60_000 }),
        ),
      );
    } finally {
      shards.close();
    }
    for (const s of layout.shards) {
      const dir = await mkdtemp(join(cluster!.tempDir, `recover-${s.id}-`));
      const r = await runGoGazctlShards(['shards', 'recover', '--id', s.id, '--dir', dir], {
        consumerAddress: group!.address,
        brokerAddress: cluster!.brokers[2]!.endpoint,
        timeoutMs: 60_000,
      });
      assert.equal(r.code, 0, `shards recover ${s.id}: exit ${r.code}\n${r.stderr}`);
      const st = await readJsonFileState(dir);
      const want = Object.fromEntries(s.sources.map((j) => [j.split('/').pop()!, totals.get(j)!]));
      assert.deepEqual(st.state, want, `totals of ${s.id}`);
      for (const j of s.sources) assert.equal(BigInt(st.offsets[j] ?? 0), BigInt(content.get(j)!.length), `read-through offset of ${j}`);
    }
  });
});
