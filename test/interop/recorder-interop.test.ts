// The recovery-log write side against Go, on real Go brokers and etcd, one sum shard:
// 1. A Go sum-consumer processes input and is killed (-9). Its log's frames re-encode byte for
//    byte with our encoder, and its state.json re-encodes byte for byte with our JsonFileStore
//    encoding.
// 2. We take the shard's log over from the hints Go left in etcd (our player, hand-off with the
//    author fence, our Recorder), open the JsonFileStore: it holds Go's exact totals and
//    checkpoint. We consume more input ourselves, commit, and store hints as a primary does.
// 3. A Go sum-consumer starts again and takes the shard from our hints: it recovers our state
//    (log written by ours plays on Go), processes more input, and Go gazctl `shards recover`
//    gives the exact totals of all input. Go's recovery also rotated our backup hints down.
import assert from 'node:assert/strict';
import { mkdtemp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient, ShardClient, appendOnce } from '../../src/lib/index.js';
import { Keyspace } from '../../src/lib/keyspace/client.js';
import { decodeFrames, encodeOpFrame } from '../../src/lib/recoverylog/framing.js';
import { decodeHints, encodeHints } from '../../src/lib/recoverylog/hints.js';
import { journalLogSource, playLog } from '../../src/lib/recoverylog/player.js';
import { randomAuthor } from '../../src/lib/recoverylog/record.js';
import { takeOverLog } from '../../src/lib/recoverylog/recorder.js';
import { fetchHints, hintBackupKeys, pickFirstHints, storeRecordedHints, storeRecoveredHints } from '../../src/core/consumer/hints.js';
import { JsonFileStore, encodeCheckpointJson, encodeFlattenedOffsets, encodeGoJson, parseJsonFileStore, GO_JSON_CODEC } from '../../src/core/consumer/store-json.js';
import type { ShardSpec } from '../../src/lib/protocol/gen/consumer/protocol.js';
import {
  applySumAppShards,
  createSumAppJournals,
  goConsumer,
  readJsonFileState,
  runGoGazctlShards,
  startCluster,
  startConsumers,
  sumAppLayout,
  sumAppShardSpecs,
  waitForShardsPrimary,
  type Cluster,
  type ConsumerGroup,
  type SumAppLayout,
} from '../../src/testing/index.js';
import { lcg } from '../helpers/random.js';

const KEYS = ['apple', 'banana', 'cherry', 'date', 'elder'];

describe('recovery log written by ours plays on Go, and the other way round', { timeout: 240_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let journals: JournalClient;
  let ks: Keyspace;
  let layout: SumAppLayout;
  let spec: ShardSpec;
  const next = lcg(20261206);
  const sums: Record<string, number> = {};
  let head = 0n;

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    layout = sumAppLayout({ name: 'rsums', shards: 1 });
    await createSumAppJournals(cluster, layout);
    group = await startConsumers(cluster, { count: 1, impl: goConsumer });
    spec = sumAppShardSpecs(layout, { hotStandbys: 0, hintBackups: 2 })[0]!;
    await applySumAppShards(group.address, [spec]);
    await waitForShardsPrimary(group.address, [spec.id], 60_000);
    journals = new JournalClient({ address: cluster.brokerAddress });
    ks = new Keyspace({ endpoints: cluster.etcd.endpoint });
  });

  after(async () => {
    journals?.close();
    ks?.close();
    await group?.stop();
    await cluster?.stop();
  });

  const source = () => layout.shards[0]!.sources[0]!;
  const log = () => layout.shards[0]!.recoveryLog;

  /** Appends `n` records to the shard's source, adding them to the expected totals. */
  async function appendRecords(n: number): Promise<void> {
    const lines: string[] = [];
    for (let i = 0; i < n; i++) {
      const key = KEYS[next() % KEYS.length]!;
      const value = (next() % 2001) - 1000;
      sums[key] = (sums[key] ?? 0) + value;
      lines.push(JSON.stringify({ key, value }));
    }
    const res = await appendOnce(journals, source(), [Buffer.from(lines.join('\n') + '\n')], { timeoutMs: 30_000 });
    head = res.commit!.end;
  }

  async function waitProcessed(): Promise<void> {
    const shards = new ShardClient({ address: group!.address });
    try {
      await shards.stat(spec.id, { readThrough: { [source()]: head }, timeoutMs: 60_000 });
    } finally {
      shards.close();
    }
  }

  async function goRecover(tag: string): Promise<string> {
    const dir = await mkdtemp(join(cluster!.tempDir, `recover-${tag}-`));
    const r = await runGoGazctlShards(['shards', 'recover', '--id', spec.id, '--dir', dir], {
      consumerAddress: group!.address,
      brokerAddress: cluster!.brokerAddress,
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 0, `shards recover (${tag}): exit ${r.code}\n${r.stderr}`);
    return dir;
  }

  /** The log's raw bytes, for frame comparisons. */
  async function logBytes(): Promise<Buffer> {
    const src = journalLogSource(journals);
    await src.head(log());
    const parts: Buffer[] = [];
    for await (const c of src.read(log(), 0n)) parts.push(Buffer.from(c.content));
    return Buffer.concat(parts);
  }

  test('Go writes: frames and state.json re-encode byte for byte with ours', async () => {
    for (const n of [60, 40, 30, 20]) {
      await appendRecords(n);
      await waitProcessed();
    }
    const dir = await goRecover('go');
    const text = await readFile(join(dir, 'state.json'), 'utf8');
    const parsed = parseJsonFileStore(text, GO_JSON_CODEC);
    assert.deepEqual(parsed.state, sums);
    assert.equal(
      encodeFlattenedOffsets(parsed.checkpoint) + '\n' + encodeGoJson(parsed.state) + '\n' + encodeCheckpointJson(parsed.checkpoint) + '\n',
      text,
      'state.json as our JsonFileStore writes it',
    );

    const bytes = await logBytes();
    let ops = 0;
    let writes = 0;
    async function* whole() {
      yield { offset: 0n, content: new Uint8Array(bytes) };
    }
    for await (const ev of decodeFrames(log(), 0n, whole())) {
      if (ev.kind !== 'op') continue;
      const op = ev.op;
      const frameEnd = Number(op.last_offset - (op.write?.length ?? 0n));
      const raw = bytes.subarray(Number(op.first_offset), frameEnd);
      const data = op.write ? bytes.subarray(frameEnd, Number(op.last_offset)) : undefined;
      const ours = encodeOpFrame(op, data);
      assert.equal(Buffer.from(ours).toString('hex'), Buffer.concat([raw, data ?? Buffer.alloc(0)]).toString('hex'), `op at ${op.first_offset}`);
      ops++;
      if (op.write) writes++;
    }
    assert.ok(ops >= 20 && writes >= 12, `compared ${ops} ops (${writes} writes)`);
  });

  test('ours takes a Go log over after kill -9, continues it, and a Go consumer recovers ours', async () => {
    await group!.killConsumer(0);

    // Take over from the hints Go left (its primary hints if stored yet, else its backup).
    const fetched = await fetchHints(ks, spec);
    assert.ok(fetched.primary ?? fetched.backups[0], 'Go stored hints');
    const hints = pickFirstHints(fetched, log());
    const dir = await mkdtemp(join(cluster!.tempDir, 'ours-'));
    const author = randomAuthor();
    const { recorder, recoveredHints } = await takeOverLog({ client: journals, source: journalLogSource(journals), hints, dir, author });
    const store = await JsonFileStore.open<Record<string, number>>(recorder, { initial: () => ({}) });
    assert.deepEqual(store.state, sums, 'the totals Go committed');
    const cp = await store.restoreCheckpoint();
    assert.equal(cp.sources[source()]?.read_through, head, 'the read-through Go committed');

    // Consume more input ourselves, in two transactions.
    for (const n of [25, 35]) {
      const before = { ...sums };
      await appendRecords(n);
      // A key no input has: Go can only have it by playing our log (a Go member that skipped our
      // ops would read the same input from the source and get the same sums otherwise).
      sums['written-by-ours'] = (sums['written-by-ours'] ?? 0) + 1;
      for (const [k, v] of Object.entries(sums)) store.state[k] = v;
      assert.notDeepEqual(before, store.state);
      await store.startCommit(undefined, { sources: { [source()]: { read_through: head, producers: cp.sources[source()]!.producers } }, ack_intents: {} }, []);
    }

    // Store hints as a primary does, guarded on an assignment-like key of ours.
    const guard = `${group!.etcdPrefix}/test-guard/${spec.id}`;
    await ks.put(guard, 'held');
    const held = (await ks.get(guard))!;
    const asn = { key: guard, createRevision: held.createRevision };
    await storeRecoveredHints(ks, spec, asn, recoveredHints);
    const primary = await recorder.buildHints();
    assert.equal(await storeRecordedHints(ks, spec, asn, primary), true);
    assert.equal(await storeRecordedHints(ks, spec, { key: guard, createRevision: held.createRevision + 1n }, primary), false, 'a changed assignment is not written');
    const stored = await fetchHints(ks, spec);
    assert.equal(encodeHints(stored.primary!), encodeHints(primary));
    assert.equal(encodeHints(stored.backups[0]!), encodeHints(recoveredHints));

    // Our player reads our log to the same state.
    const check = await mkdtemp(join(cluster!.tempDir, 'check-'));
    await playLog(journalLogSource(journals), stored.primary!, check, { clearDir: true });
    assert.deepEqual(parseJsonFileStore(await readFile(join(check, 'state.json'), 'utf8'), GO_JSON_CODEC).state, sums);

    // A Go consumer takes the shard from our hints, recovers our state and goes on.
    await group!.restartConsumer(0);
    await waitForShardsPrimary(group!.address, [spec.id], 60_000);
    await appendRecords(30);
    await waitProcessed();
    const dirGo = await goRecover('after-ours');
    const st = await readJsonFileState(dirGo);
    assert.deepEqual(st.state, sums, 'Go recovered our totals and added its input exactly');
    assert.equal((st.state as Record<string, number>)['written-by-ours'], 2);
    assert.equal(BigInt(st.offsets[source()]!), head);

    // Go's recovery rotated the backups: our recovered hints moved from .backup.0 to .backup.1.
    const backup1 = (await ks.get(hintBackupKeys(spec)[1]!))?.value;
    assert.ok(backup1, 'backup.1 is set');
    assert.equal(encodeHints(decodeHints(backup1)), encodeHints(recoveredHints));

    // The old recorder is fenced off by Go's hand-off.
    await assert.rejects(store.startCommit(undefined, cp, []), /REGISTER_MISMATCH/);
    await ks.delete(guard);
  });
});
