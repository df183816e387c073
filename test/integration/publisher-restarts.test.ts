// Our Publisher while brokers are killed (-9) and restarted under it: every publish and every ACK
// still commits (appends are retried, ambiguous ones too, as Gazette's publisher does), and
// Gazette's own JSON framing and Sequencer (seq-oracle read) read each committed message exactly
// once from the journals, whatever re-sends the retries left in them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import { Publisher } from '../../src/lib/client/publisher.js';
import { jsonEncoder } from '../../src/lib/message/encoder.js';
import { createSumAppJournals, peerBinary, startCluster, sumAppLayout, type Cluster, type SumAppLayout } from '../../src/testing/index.js';

type Rec = { key: string; value: number };

describe('Publisher across broker restarts', { timeout: 240_000 }, () => {
  let cluster: Cluster | undefined;
  let journals: JournalClient;
  let layout: SumAppLayout;

  before(async () => {
    cluster = await startCluster({ brokers: 3 });
    layout = sumAppLayout({ name: 'restarts', shards: 1, sourcesPerShard: 2 });
    await createSumAppJournals(cluster, layout, { replication: 2, fragmentLength: 64n * 1024n });
    journals = new JournalClient({ address: cluster.brokerAddress });
  });

  after(async () => {
    journals?.close();
    await cluster?.stop();
  });

  test('every committed message is read once by Gazette\'s sequencer; no publish fails', async () => {
    const sources = layout.shards[0]!.sources;
    const enc = jsonEncoder<Rec>(() => ({ key: '', value: 0 }));
    const pub = new Publisher(journals, { append: { onRetry: () => retries++ } });
    let retries = 0;
    const want = new Set<string>();
    let n = 0;
    /** One transaction of `count` messages over both journals, acknowledged. */
    const txn = async (count: number) => {
      const committed: Promise<void>[] = [];
      for (let i = 0; i < count; i++, n++) {
        const key = `m${n}`;
        want.add(key);
        committed.push(pub.publishUncommitted(() => sources[n % 2]!, enc, { key, value: 1 }).committed);
      }
      await Promise.all(committed);
      await pub.writeAckIntents(pub.buildAckIntents());
    };

    await txn(200);
    for (const broker of [0, 1, 2]) {
      // Appends in flight while a broker is killed and comes back.
      const inFlight = txn(3000);
      await cluster!.restartBroker(broker);
      await inFlight;
    }
    await txn(200);

    // Gazette's reading of the journals.
    const input: string[] = [];
    for (const j of sources) {
      const parts: Buffer[] = [];
      // A blocking read to the end the publisher's last append reported: a non-blocking one may end
      // early while a restarted broker's replica does not yet serve the journal's older content.
      const end = pub.publishedThrough().get(j)!;
      for await (const c of journals.read({ journal: j, offset: 0n, end_offset: end, block: true })) parts.push(Buffer.from(c.content));
      const all = Buffer.concat(parts);
      assert.equal(BigInt(all.length), end, `${j} read to its end`);
      for (const line of all.toString('utf8').split('\n').slice(0, -1)) input.push(`${j}\t${line}`);
    }
    const res = spawnSync(peerBinary('seq-oracle'), ['read'], { input: input.join('\n') + '\n', maxBuffer: 1 << 28 });
    assert.equal(res.status, 0, res.stderr.toString());
    const seen = new Map<string, number>();
    for (const l of res.stdout.toString().trimEnd().split('\n')) {
      const m = /^\S+ \d+ \d+ \S+ (\S+) "(.*)" (-?\d+)$/.exec(l);
      assert.ok(m, l);
      if (m[1] === 'ACK_TXN') continue;
      assert.equal(m[1], 'CONTINUE_TXN', l);
      seen.set(m[2]!, (seen.get(m[2]!) ?? 0) + 1);
    }
    const twice = [...seen].filter(([, c]) => c !== 1);
    assert.deepEqual(twice, [], 'each message committed once');
    assert.equal(seen.size, want.size);
    for (const k of want) assert.ok(seen.has(k), `${k} was committed`);
    const duplicates = input.length - want.size;
    console.log(`# ${want.size} messages, ${input.length} lines in the journals (re-sent records and ACKs included: ${duplicates}), ${retries} append retries`);
  });
});
