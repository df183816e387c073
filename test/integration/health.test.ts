// `gazctl health` end to end through the real binary, on one cluster: etcd, two brokers (a long
// broker lease, so a killed broker stays in the journals' routes), one consumer (Go sum-consumer
// by default) running a small sum app. In order: healthy (exit 0, the summary counts, --watch
// printing once and leaving with 0 on Ctrl-C); a file:// store whose directory is missing; a
// shard that cannot run (its journals do not exist: FAILED or without a serving primary); a broker
// killed (exit 1 naming it, within --timeout); --exit-when-healthy while that broker restarts
// (exit 0 once it is back); a three-member etcd, then one member left without a leader; etcd
// stopped (exit 1 with --etcd.address).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { JournalClient } from '../../src/lib/index.js';
import { JournalSpec } from '../../src/lib/protocol/gen/broker/protocol.js';
import { label, labelSet } from '../../src/lib/protocol/labels.js';
import { nanosToDuration } from '../../src/lib/protocol/duration.js';
import {
  applySumAppShards,
  createSumAppJournals,
  freePorts,
  pollUntil,
  startCluster,
  startEtcd,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  waitForJournalsAssigned,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type EtcdProcess,
} from '../../src/testing/index.js';
import { describeResult, runGazctl, spawnGazctl } from '../helpers/cli.js';

let cluster: Cluster | undefined;
let group: ConsumerGroup | undefined;
const APP = 'hl';
const BAD_STORE_JOURNAL = 'hl-store/missing';

const brokerEnv = () => ({ BROKER_ADDRESS: cluster!.brokerAddress });
const allEnv = () => ({ ...brokerEnv(), CONSUMER_ADDRESS: group!.address, ETCD_ADDRESS: cluster!.etcd.endpoint });
const lines = (out: Buffer | string) => out.toString().trimEnd().split('\n');
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('gazctl health on a real cluster', { timeout: 120_000 }, () => {
  before(async () => {
    // Broker 0 is the configured address throughout; broker 1 is the one killed and restarted.
    cluster = await startCluster({ brokers: 2, ordered: true, brokerArgs: ['--etcd.lease=30s'] });
    group = await startConsumers(cluster, { count: 1 });
    const layout = sumAppLayout({ name: APP, shards: 2 });
    await createSumAppJournals(cluster, layout, { replication: 2 });
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 0 }));
    await waitForShardsPrimary(group.address, layout.shards.map((s) => s.id), 60_000);
  });

  after(async () => {
    await group?.stop();
    await cluster?.stop();
  });

  test('healthy: exit 0, a summary counting what was checked; --watch prints once, Ctrl-C exits 0', async (t) => {
    const args = ['health', '-l', `app=${APP}`, '-v'];
    const r = await runGazctl(args, { env: allEnv() });
    t.diagnostic(r.stdout.toString());
    assert.equal(r.code, 0, describeResult(args, r));
    const out = lines(r.stdout);
    // 2 shards' sources and recovery logs, on both brokers; the sum app's one store.
    assert.equal(out.at(-1), 'healthy: 2 brokers, 4 journals, 1 store, 1 consumer, 2 shards, 1 etcd member', describeResult(args, r));
    assert.ok(out.some((l) => /^ok: etcd http:\/\/127\.0\.0\.1:\d+: member [0-9a-f]+ \(etcd [\d.]+\), leader [0-9a-f]+$/.test(l)), out.join('\n'));
    assert.ok(out.some((l) => l === 'ok: store file:///: healthy'), out.join('\n'));
    assert.ok(out.some((l) => l.startsWith(`ok: broker ${cluster!.zone}/${cluster!.brokers[1]!.id} (${cluster!.brokers[1]!.endpoint}): answered List`)), out.join('\n'));

    const watch = spawnGazctl(['health', '-l', `app=${APP}`, '--watch', '--interval', '200ms'], { env: allEnv(), timeoutMs: 30_000 });
    await pollUntil('the first --watch report', async () => watch.stdoutText().includes('healthy:'), { timeoutMs: 20_000, intervalMs: 50 });
    await sleep(1000); // several more rounds, none of them a change
    watch.child.kill('SIGINT');
    const w = await watch.result;
    assert.equal(w.code, 0, describeResult(['health', '--watch'], w));
    assert.equal(lines(w.stdout).filter((l) => l.startsWith('healthy:')).length, 1, w.stdout.toString());
  });

  test('a file:// store whose directory does not exist: exit 1, the store named', async (t) => {
    const client = new JournalClient({ address: cluster!.brokerAddress });
    try {
      const spec = JournalSpec.fromPartial({
        name: BAD_STORE_JOURNAL,
        replication: 1,
        labels: labelSet(label('app', 'hl-store')),
        fragment: { length: 1024n, stores: ['file:///no-such-dir/'], compression_codec: 1, refresh_interval: nanosToDuration(30_000_000_000n) },
      });
      await client.apply([{ expect_mod_revision: 0n, upsert: spec, delete: '' }]);
    } finally {
      client.close();
    }
    await waitForJournalsAssigned(cluster!, [BAD_STORE_JOURNAL], 30_000);
    const args = ['health', '-l', 'app=hl-store'];
    const r = await runGazctl(args, { env: brokerEnv() });
    t.diagnostic(r.stdout.toString());
    assert.equal(r.code, 1, describeResult(args, r));
    const out = lines(r.stdout);
    assert.match(out[0]!, /^store file:\/\/\/no-such-dir\/: unhealthy: .+/, describeResult(args, r));
    assert.equal(out.at(-1), 'unhealthy: 1 problem');
  });

  test('a shard that cannot run (its journals do not exist): exit 1, the shard named', async (t) => {
    const bad = sumAppLayout({ name: 'hlbad', shards: 1 });
    await applySumAppShards(group!.address, sumAppShardSpecs(bad, { hotStandbys: 0 }));
    const args = ['health', '-l', 'app=hlbad', '-o', 'json'];
    const r = await runGazctl(args, { env: allEnv() });
    t.diagnostic(r.stdout.toString());
    assert.equal(r.code, 1, describeResult(args, r));
    const doc = JSON.parse(r.stdout.toString()) as { healthy: boolean; problems: { component: string; line: string }[] };
    assert.equal(doc.healthy, false);
    const shardLines = doc.problems.filter((p) => p.component === 'shard' || p.component === 'shards').map((p) => p.line);
    assert.equal(shardLines.length, 1, JSON.stringify(doc.problems));
    // FAILED once recovery gave up; before that assigned and recovering, or not yet assigned.
    assert.match(shardLines[0]!, /^(shard hlbad-000: FAILED on .+|shards: 1 enabled without a serving primary: hlbad-000( \(primary .+ is (IDLE|BACKFILL|STANDBY)\))?)$/);
  });

  test('a broker killed: exit 1 within --timeout, a line naming it; --exit-when-healthy exits 0 once it is back', async (t) => {
    const b1 = cluster!.brokers[1]!;
    await cluster!.stopBroker(1, { graceful: false, releaseLease: false });
    const args = ['health', '-l', `app=${APP}`, '--timeout', '5s'];
    const r = await runGazctl(args, { env: brokerEnv(), timeoutMs: 20_000 });
    t.diagnostic(r.stdout.toString());
    assert.equal(r.code, 1, describeResult(args, r));
    assert.equal(r.timedOut, false);
    assert.match(r.stdout.toString(), new RegExp(`^broker ${esc(`${cluster!.zone}/${b1.id} (${b1.endpoint})`)}: List failed: .+$`, 'm'), describeResult(args, r));
    assert.match(lines(r.stdout).at(-1)!, /^unhealthy: \d+ problems?$/);

    const wait = spawnGazctl(['health', '-l', `app=${APP}`, '--exit-when-healthy', '--timeout', '90s', '--interval', '250ms'], { env: brokerEnv(), timeoutMs: 100_000 });
    // It has seen the cluster unhealthy before the broker comes back.
    await pollUntil('a first unhealthy report', async () => wait.stdoutText().includes('unhealthy:'), { timeoutMs: 20_000, intervalMs: 50 });
    await cluster!.restartBroker(1);
    const w = await wait.result;
    t.diagnostic(w.stdout.toString());
    assert.equal(w.code, 0, describeResult(['health', '--exit-when-healthy'], w));
    assert.match(lines(w.stdout).at(-1)!, /^healthy: 2 brokers, 4 journals, 1 store/, w.stdout.toString());
  });

  test('a three-member etcd: healthy with all three; a member left alone has no leader: exit 1, named', async (t) => {
    // A cluster of its own (the brokers' etcd is a single member, which always leads itself).
    const ports = await freePorts(6);
    const names = ['h0', 'h1', 'h2'];
    const initial = names.map((n, i) => `${n}=http://127.0.0.1:${ports[2 * i + 1]}`).join(',');
    const members: EtcdProcess[] = await Promise.all(
      names.map((n, i) =>
        startEtcd({ clientPort: ports[2 * i]!, peerPort: ports[2 * i + 1]!, extraArgs: [`--name=${n}`, `--initial-cluster=${initial}`, '--initial-cluster-token=gazctl-health'] }),
      ),
    );
    try {
      const eps = members.map((m) => m.endpoint);
      const args = ['health', '-l', `app=${APP}`, '--etcd.address', eps.join(',')];
      const ok = await runGazctl(args, { env: brokerEnv() });
      t.diagnostic(ok.stdout.toString());
      assert.equal(ok.code, 0, describeResult(args, ok));
      assert.match(lines(ok.stdout).at(-1)!, /, 3 etcd members$/);

      await members[1]!.halt('SIGKILL');
      await members[2]!.halt('SIGKILL');
      // Once its election timeout passes, the member left knows no leader.
      const alone = ['health', '-l', `app=${APP}`, '--etcd.address', eps[0]!, '--timeout', '3s'];
      const r = await pollUntil(
        'the member left alone to report no leader',
        async () => {
          const x = await runGazctl(alone, { env: brokerEnv() });
          return x.code === 1 && x.stdout.toString().includes('has no leader') ? x : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      t.diagnostic(r.stdout.toString());
      assert.match(r.stdout.toString(), new RegExp(`^etcd ${esc(eps[0]!)}: member [0-9a-f]+ has no leader$`, 'm'));
      assert.equal(lines(r.stdout).at(-1), 'unhealthy: 1 problem');
    } finally {
      await Promise.all(members.map((m) => m.stop()));
    }
  });

  test('etcd stopped: exit 1 with --etcd.address, the member named', async (t) => {
    const ep = cluster!.etcd.endpoint;
    await cluster!.etcd.halt('SIGKILL');
    const args = ['health', '-l', `app=${APP}`, '--etcd.address', ep, '--timeout', '3s'];
    const r = await runGazctl(args, { env: brokerEnv(), timeoutMs: 20_000 });
    t.diagnostic(r.stdout.toString());
    assert.equal(r.code, 1, describeResult(args, r));
    assert.match(r.stdout.toString(), new RegExp(`^etcd ${esc(ep)}: Status (failed: .+|did not answer within .+)$`, 'm'), describeResult(args, r));
  });
});
