// The mixed cluster: our brokers and the reference Go brokers on one etcd, serving the same
// journals at replication 3, so every route holds both implementations and primaries replicate
// to the other side. Run once with a Go broker as the allocating member (the oldest member key)
// and once with one of ours. Appends and reads go through every broker, with both gazctls; a
// kill -9 of a journal's primary during a stream of appends loses nothing acknowledged.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { goBroker, runGoGazctl, startCluster, tsBroker, waitForJournalsAssigned, type BrokerImpl, type Cluster } from '../../src/testing/index.js';
import { gzOk } from '../helpers/journals.js';
import { assertReadsBack, readRaw, startAppendLoad } from '../helpers/core.js';

const JOURNALS = ['mixed/a', 'mixed/b', 'mixed/c', 'mixed/d'];
const SPECS = `name: mixed/
replication: 3
labels:
- name: app
  value: mixed
fragment:
  length: 4096
  compression_codec: NONE
  stores:
  - file:///
  refresh_interval: 1s
children:
${JOURNALS.map((j) => `- name: ${j}`).join('\n')}
`;

async function goOk(endpoint: string, args: string[], input?: string): Promise<string> {
  const r = await runGoGazctl(args, { brokerAddress: endpoint, input, timeoutMs: 30_000 });
  assert.equal(r.code, 0, `Go gazctl ${args.join(' ')} via ${endpoint} failed (code ${r.code}):\n${r.stderr}`);
  return r.stdout.toString('utf8');
}

for (const [leader, other] of [
  [goBroker, tsBroker],
  [tsBroker, goBroker],
] as [BrokerImpl, BrokerImpl][]) {
  describe(`a mixed cluster, ${leader.name} broker allocating (2 ${leader.name} + 2 ${other.name}, replication 3)`, { timeout: 240_000 }, () => {
    let cluster: Cluster | undefined;

    before(async () => {
      // Broker 0 starts first and so allocates.
      cluster = await startCluster({ brokerImpls: [leader, other, leader, other], ordered: true });
      await gzOk(cluster, ['journals', 'apply', '--specs', '-'], { input: SPECS });
    });
    after(() => cluster?.stop());

    test('every journal gets a route over both implementations, seen alike by every broker', async (t) => {
      const c = cluster!;
      const listed = await waitForJournalsAssigned(c, JOURNALS, 60_000);
      const implOf = new Map(c.brokers.map((b, i) => [b.id, c.implOf(i).name]));
      for (const name of JOURNALS) {
        const route = listed.get(name)!.route!;
        assert.equal(route.members.length, 3, `${name} has 3 members`);
        const impls = new Set(route.members.map((m) => implOf.get(m.suffix)));
        assert.deepEqual([...impls].sort(), ['go', 'ts'], `${name} is replicated across both implementations`);
      }
      const primaries = new Set(JOURNALS.map((n) => { const r = listed.get(n)!.route!; return implOf.get(r.members[r.primary]!.suffix); }));
      // Not asserted (the allocator's choice), but worth seeing in the output.
      t.diagnostic(`primaries are ${[...primaries].join(' and ')} brokers`);
    });

    test('appends through any broker read back identically through every broker, with both gazctls', async () => {
      const c = cluster!;
      await waitForJournalsAssigned(c, JOURNALS, 60_000);
      const expected = new Map<string, string>(JOURNALS.map((j) => [j, '']));
      for (const [i, b] of c.brokers.entries()) {
        for (const j of JOURNALS) {
          const ours = `ours via ${b.id} (${c.implOf(i).name}) to ${j}\n`;
          await gzOk(c, ['journals', 'append', '-l', `name=${j}`], { input: ours, env: { BROKER_ADDRESS: b.endpoint } });
          const go = `go via ${b.id} (${c.implOf(i).name}) to ${j}\n`;
          await goOk(b.endpoint, ['journals', 'append', '-l', `name=${j}`], go);
          expected.set(j, expected.get(j)! + ours + go);
        }
      }
      for (const b of c.brokers) {
        for (const j of JOURNALS) {
          assert.equal(await goOk(b.endpoint, ['journals', 'read', '-l', `name=${j}`]), expected.get(j), `Go gazctl reads ${j} via ${b.id}`);
          const ours = await gzOk(c, ['journals', 'read', '-l', `name=${j}`], { env: { BROKER_ADDRESS: b.endpoint } });
          assert.equal(ours.stdout.toString('utf8'), expected.get(j), `our gazctl reads ${j} via ${b.id}`);
        }
      }
    });

    test('kill -9 of a primary during appends loses nothing acknowledged', async (t) => {
      const c = cluster!;
      const journal = 'mixed/a';
      const listed = await waitForJournalsAssigned(c, [journal], 60_000);
      const route = listed.get(journal)!.route!;
      const victim = c.brokers.findIndex((b) => b.id === route.members[route.primary]!.suffix);
      assert.ok(victim >= 0);
      const before = (await readRaw(c.brokerAddress, journal)).length;
      const load = startAppendLoad(journal, () => c.brokers.filter((_, j) => c.isRunning(j)).map((b) => b.endpoint), { tag: 'mixed' });
      let killedAt = 0;
      try {
        await load.until('appends before the kill', () => load.acked.length >= 30, 60_000);
        await c.stopBroker(victim, { graceful: false });
        killedAt = Date.now();
        const atKill = load.acked.length;
        await load.until('appends after the kill', () => load.acked.length >= atKill + 30, 90_000);
      } finally {
        await load.stop();
      }
      const first = load.acked.find((a) => a.at >= killedAt)!;
      t.diagnostic(`killed primary ${c.brokers[victim]!.id} (${c.implOf(victim).name}); appends resumed after ${first.at - killedAt} ms; ${load.failures.length} failed attempts`);
      assert.ok(load.acked.every((a) => a.begin >= BigInt(before)), 'the load appended after the earlier content');
      for (const [i, b] of c.brokers.entries()) {
        if (c.isRunning(i)) await assertReadsBack(b.endpoint, journal, load.acked, `${b.id} (${c.implOf(i).name})`);
      }
    });
  });
}
