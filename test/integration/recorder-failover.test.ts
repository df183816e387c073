// The Recorder rides out the kill -9 of its log's primary broker: three Go brokers, the recovery
// log replicated twice, our client dialing the broker outside the log's route. JSON store commits
// go on while the primary is killed; they stall until the dead broker's lease expires and the
// journal has a new primary, the recorder retries, and no commit fails. The log then plays back
// to the last committed state, from the recorder's hints and from the start.
import assert from 'node:assert/strict';
import { mkdtemp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient } from '../../src/lib/index.js';
import { emptyHints } from '../../src/lib/recoverylog/hints.js';
import { journalLogSource, playLog } from '../../src/lib/recoverylog/player.js';
import { randomAuthor } from '../../src/lib/recoverylog/record.js';
import { takeOverLog, type RecorderRetryInfo } from '../../src/lib/recoverylog/recorder.js';
import { JsonFileStore, parseJsonFileStore, GO_JSON_CODEC } from '../../src/core/consumer/store-json.js';
import { createSumAppJournals, pollUntil, startCluster, sumAppLayout, waitForJournalsAssigned, type Cluster, type SumAppLayout } from '../../src/testing/index.js';

describe('Recorder across a primary broker failover', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;
  let layout: SumAppLayout;

  before(async () => {
    cluster = await startCluster({ brokers: 3, brokerArgs: ['--etcd.lease=3s'] });
    layout = sumAppLayout({ name: 'rfail', shards: 1 });
    // A short store refresh: see the playback below.
    await createSumAppJournals(cluster, layout, { replication: 2, refreshIntervalSec: 1 });
  });
  after(async () => {
    await cluster?.stop();
  });

  test('commits keep going through a kill -9 of the log primary, and the log plays back whole', async () => {
    const log = layout.shards[0]!.recoveryLog;
    const route = (await waitForJournalsAssigned(cluster!, [log], 30_000)).get(log)!.route!;
    const members = new Set(route.members.map((m) => m.suffix));
    const pi = cluster!.brokers.findIndex((b) => b.id === route.members[route.primary]?.suffix);
    const via = cluster!.brokers.findIndex((b) => !members.has(b.id));
    assert.ok(pi >= 0 && via >= 0, `route ${JSON.stringify(route)}`);
    const client = new JournalClient({ address: cluster!.brokers[via]!.endpoint });
    try {
      const dir = await mkdtemp(join(cluster!.tempDir, 'store-'));
      const retries: RecorderRetryInfo[] = [];
      const { recorder } = await takeOverLog({ client, source: journalLogSource(client), hints: emptyHints(log), dir, author: randomAuthor(), onRetry: (r) => retries.push(r) });
      const store = await JsonFileStore.open<Record<string, number>>(recorder, { initial: () => ({}) });
      const COMMITS = 30;
      for (let i = 1; i <= COMMITS; i++) {
        store.state = { commits: i, total: (store.state.total ?? 0) + i };
        const committing = store.startCommit(undefined, { sources: { 'rfail/input/part-000': { read_through: BigInt(i * 100), producers: [] } }, ack_intents: {} }, []);
        if (i === 10) await cluster!.stopBroker(pi, { graceful: false });
        await committing;
      }
      assert.equal(recorder.error, undefined);
      assert.ok(retries.length > 0, 'appends were retried while the journal had no live primary');
      const want = { commits: COMMITS, total: (COMMITS * (COMMITS + 1)) / 2 };

      for (const [tag, hints] of [['hints', await recorder.buildHints()], ['whole log', emptyHints(log)]] as const) {
        // A fragment the dead primary persisted just before dying is missing from the new
        // primary's index until its next store refresh: until then playback stops at that
        // offset ("content ends at offset ..., before the head"), as a consumer's recovery
        // would, and retries.
        const out = await mkdtemp(join(cluster!.tempDir, 'play-'));
        await pollUntil(
          `playback of ${log} (${tag})`,
          async () => {
            try {
              await playLog(journalLogSource(client), hints, out, { clearDir: true });
              return true;
            } catch (err) {
              if (/content ends at offset \d+, before the head/.test((err as Error).message)) return undefined;
              throw err;
            }
          },
          { timeoutMs: 60_000, intervalMs: 500 },
        );
        const st = parseJsonFileStore(await readFile(join(out, 'state.json'), 'utf8'), GO_JSON_CODEC);
        assert.deepEqual(st.state, want, tag);
        assert.equal(st.checkpoint.sources['rfail/input/part-000']?.read_through, BigInt(COMMITS * 100), tag);
      }
      process.stdout.write(`# ${retries.length} append retries during the failover\n`);
    } finally {
      client.close();
    }
  });
});
