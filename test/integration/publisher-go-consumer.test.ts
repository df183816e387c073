// Our Publisher's transactional messages, consumed by Gazette's own code: a Go sum-consumer
// (Gazette v0.103.0) sums NDJSON records that our Publishers write into two source journals on
// real brokers: committed transactions spanning both journals, committed (OUTSIDE_TXN) messages of
// another producer, a sequence rolled back by the re-sent ACKs of an earlier transaction (what a
// producer that recovered an older checkpoint does), a producer's sequence left pending while
// another commits, an uncommitted tail that is never acknowledged, and plain lines without a UUID.
// Go gazctl `shards recover` must then show sums of exactly the committed messages. The journals'
// bytes are also run through Gazette's JSON framing and Sequencer (seq-oracle read) and through
// ours: both must take the same messages as committed. The other way round, Gazette's own
// Publisher (seq-oracle publish) writes such transactions and our Sequencer must apply exactly
// the committed messages.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { JournalClient, ShardClient, appendOnce } from '../../src/lib/index.js';
import { Publisher } from '../../src/lib/client/publisher.js';
import { jsonEncoder, type MessageEncoder } from '../../src/lib/message/encoder.js';
import { Sequencer, isCommitOutcome, type Envelope } from '../../src/lib/message/sequencer.js';
import { decodeJsonMessage } from '../../src/lib/message/json.js';
import { flagsName, formatUUID, getFlags } from '../../src/lib/message/uuid.js';
import {
  applySumAppShards,
  createSumAppJournals,
  goConsumer,
  peerBinary,
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

type Rec = { key: string; value: number };

describe('our Publisher, read by a Go sum-consumer and by Gazette\'s sequencer', { timeout: 180_000 }, () => {
  let cluster: Cluster | undefined;
  let group: ConsumerGroup | undefined;
  let journals: JournalClient;
  let layout: SumAppLayout;
  const expected: Record<string, number> = {};
  const add = (key: string, value: number) => void (expected[key] = (expected[key] ?? 0) + value);
  const heads = new Map<string, bigint>();

  before(async () => {
    cluster = await startCluster({ brokers: 1 });
    group = await startConsumers(cluster, { count: 1, impl: goConsumer });
    layout = sumAppLayout({ name: 'pubs', shards: 1, sourcesPerShard: 2 });
    await createSumAppJournals(cluster, layout);
    await applySumAppShards(group.address, sumAppShardSpecs(layout, { hotStandbys: 0 }));
    await waitForShardsPrimary(group.address, [layout.shards[0]!.id], 60_000);
    journals = new JournalClient({ address: cluster.brokerAddress });
  });

  after(async () => {
    journals?.close();
    await group?.stop();
    await cluster?.stop();
  });

  test('Go sums exactly the committed messages; rolled-back and uncommitted ones are not applied', async () => {
    const shard = layout.shards[0]!;
    const [j0, j1] = shard.sources as [string, string];
    // Go's sum-consumer record: the acknowledgement is a zero record.
    const enc: MessageEncoder<Rec> = jsonEncoder<Rec>(() => ({ key: '', value: 0 }));
    const to = (j: string) => () => j;
    const txn = new Publisher(journals);
    const other = new Publisher(journals);
    const late = new Publisher(journals);

    // 1. A transaction over both journals, committed. Every ACK a Go consumer applies is a record
    //    with key "" and value 0 (sum-consumer does not skip ACKs), hence the "" key.
    for (let i = 0; i < 20; i++) {
      const r = { key: `k${i % 4}`, value: i + 1 };
      txn.publishUncommitted(to(i % 2 ? j1 : j0), enc, r);
      add(r.key, r.value);
    }
    const first = txn.buildAckIntents();
    assert.deepEqual(first.map((a) => a.journal), [j0, j1]);
    await txn.writeAckIntents(first);
    add('', 0);

    // 2. Another producer's committed (OUTSIDE_TXN) messages.
    for (let i = 0; i < 10; i++) {
      const r = { key: `c${i % 3}`, value: 100 + i };
      await other.publishCommitted(to(j0), enc, r).committed;
      add(r.key, r.value);
    }

    // 3. A sequence rolled back: messages, then the first transaction's ACKs again (same clocks).
    for (let i = 0; i < 12; i++) txn.publishUncommitted(to(i % 2 ? j1 : j0), enc, { key: 'rolled-back', value: 1_000_000 });
    txn.buildAckIntents(); // never written
    await txn.writeAckIntents(first);

    // 4. A producer's sequence pending in j0 while the first producer commits another transaction
    //    over both journals; then the pending one commits too.
    for (let i = 0; i < 3; i++) {
      late.publishUncommitted(to(j0), enc, { key: 'late', value: 7 });
      add('late', 7);
    }
    for (let i = 0; i < 15; i++) {
      const r = { key: `k${i % 5}`, value: -(i + 3) };
      txn.publishUncommitted(to(i % 3 ? j0 : j1), enc, r);
      add(r.key, r.value);
    }
    await txn.writeAckIntents(txn.buildAckIntents());
    await late.writeAckIntents(late.buildAckIntents());

    // 5. Plain lines without a UUID: committed at once.
    await appendOnce(journals, j1, [Buffer.from('{"key":"plain","value":5}\n{"key":"plain","value":6}\n')], { timeoutMs: 30_000 });
    add('plain', 11);

    // 6. An uncommitted tail, never acknowledged.
    for (let i = 0; i < 6; i++) txn.publishUncommitted(to(i % 2 ? j1 : j0), enc, { key: 'uncommitted', value: 1_000_000 });
    await txn.flush();

    // A last plain line per journal, so the shard's read-through reaches the write heads (a
    // pending sequence alone does not complete a transaction).
    for (const j of [j0, j1]) {
      const res = await appendOnce(journals, j, [Buffer.from('{"key":"end","value":1}\n')], { timeoutMs: 30_000 });
      heads.set(j, res.commit!.end);
      add('end', 1);
    }

    const shards = new ShardClient({ address: group!.address });
    try {
      await shards.stat(shard.id, { readThrough: Object.fromEntries(heads), timeoutMs: 60_000 });
    } finally {
      shards.close();
    }
    const dir = await mkdtemp(join(cluster!.tempDir, 'recover-'));
    const r = await runGoGazctlShards(['shards', 'recover', '--id', shard.id, '--dir', dir], {
      consumerAddress: group!.address,
      brokerAddress: cluster!.brokerAddress,
      timeoutMs: 30_000,
    });
    assert.equal(r.code, 0, `shards recover: exit ${r.code}\n${r.stderr}`);
    const st = await readJsonFileState(dir);
    assert.deepEqual(st.state, expected);
    for (const j of [j0, j1]) assert.equal(BigInt(st.offsets[j]!), heads.get(j), `read-through of ${j}`);
  });

  test('Gazette\'s JSON framing and Sequencer take the same messages as committed as ours do', async () => {
    const input: string[] = [];
    const ours: string[] = [];
    const seq = new Sequencer<Rec>(undefined, [], 1024);
    const content = new Map<string, Envelope<Rec>[]>();
    for (const j of layout.shards[0]!.sources) {
      const parts: Buffer[] = [];
      for await (const c of journals.read({ journal: j, offset: 0n })) parts.push(Buffer.from(c.content));
      const text = Buffer.concat(parts).toString('utf8');
      let at = 0n;
      for (const line of text.split('\n').slice(0, -1)) {
        input.push(`${j}\t${line}`);
        const { doc, uuid } = decodeJsonMessage(line);
        const env: Envelope<Rec> = { journal: j, begin: at, end: at + BigInt(Buffer.byteLength(line) + 1), message: doc as Rec, uuid };
        at = env.end;
        const list = content.get(j) ?? [];
        list.push(env);
        content.set(j, list);
        const outcome = seq.queue(env);
        if (outcome === 'ackCommitReplay') {
          const rr = seq.replayRange();
          seq.startReplay(list.filter((e) => e.begin >= rr.begin && e.end <= rr.end)[Symbol.iterator]());
        }
        if (!isCommitOutcome(outcome)) continue;
        while (seq.step()) {
          const d = seq.dequeued!;
          ours.push(`${d.journal} ${d.begin} ${d.end} ${formatUUID(d.uuid)} ${flagsName(getFlags(d.uuid))} ${JSON.stringify(d.message.key)} ${d.message.value}`);
        }
      }
    }
    const res = spawnSync(peerBinary('seq-oracle'), ['read'], { input: input.join('\n') + '\n', maxBuffer: 1 << 26 });
    assert.equal(res.status, 0, res.stderr.toString());
    const go = res.stdout.toString().trimEnd().split('\n');
    assert.deepEqual(ours, go);
    // And what Gazette took as committed sums to the expected totals.
    const sums: Record<string, number> = {};
    for (const l of go) {
      const m = /^\S+ \d+ \d+ \S+ \S+ ("(?:[^"\\]|\\.)*") (-?\d+)$/.exec(l);
      assert.ok(m, l);
      const key = JSON.parse(m[1]!) as string;
      sums[key] = (sums[key] ?? 0) + Number(m[2]);
    }
    assert.deepEqual(sums, expected);
    assert.ok(go.some((l) => l.includes(' ACK_TXN ')) && go.some((l) => l.includes(' CONTINUE_TXN ')) && go.some((l) => l.includes(' OUTSIDE_TXN ')));
  });

  test('pending appends, published offsets, and ACK intents of journals that do not exist', async () => {
    const [j0] = layout.shards[0]!.sources as [string];
    const enc = jsonEncoder<Rec>(() => ({ key: '', value: 0 }));
    const p = new Publisher(journals);
    const first = p.publishUncommitted(() => j0, enc, { key: 'pending', value: 1 });
    const waits = p.pending();
    assert.equal(waits.length, 1, 'one journal has appends in flight');
    await Promise.all(waits);
    await first.committed;
    assert.deepEqual(p.pending(), [], 'nothing left in flight');
    const intents = p.buildAckIntents();
    assert.equal(intents.length, 1);
    const ends = await p.writeAckIntents(intents);
    assert.deepEqual(p.publishedThrough(), ends);
    // What a recovered checkpoint may hold: an intent for a journal deleted since.
    const gone = [{ journal: `${layout.name}/deleted`, intent: intents[0]!.intent }];
    const missing: string[] = [];
    assert.deepEqual(await p.writeAckIntents(gone, { onMissing: (j) => missing.push(j) }), new Map());
    assert.deepEqual(missing, [`${layout.name}/deleted`]);
    await assert.rejects(new Publisher(journals).writeAckIntents(gone), /JOURNAL_NOT_FOUND/);
  });

  test('our Sequencer applies exactly the committed messages of Gazette\'s own Publisher', async () => {
    const gl = sumAppLayout({ name: 'gopub', shards: 1, sourcesPerShard: 2 });
    await createSumAppJournals(cluster!, gl);
    const [j0, j1] = gl.shards[0]!.sources as [string, string];
    const want: Record<string, number> = {};
    const put = (k: string, v: number) => void (want[k] = (want[k] ?? 0) + v);
    const script: string[] = [];
    // A transaction over both journals; another producer's committed messages.
    for (let i = 0; i < 10; i++) script.push(`U p1 ${i % 2 ? j1 : j0} g${i % 3} ${i + 1}`), put(`g${i % 3}`, i + 1);
    script.push('A p1');
    for (let i = 0; i < 5; i++) script.push(`C p2 ${j0} c ${10 * i}`), put('c', 10 * i);
    // Rolled back: published, then p1's last acknowledgements re-sent.
    for (let i = 0; i < 6; i++) script.push(`U p1 ${i % 2 ? j1 : j0} rolled-back 1000000`);
    script.push('R p1');
    for (let i = 0; i < 4; i++) script.push(`U p1 ${i % 2 ? j1 : j0} after ${i}`), put('after', i);
    script.push('A p1');
    // p3 pending in j0 while p1 commits again; then p3 commits.
    for (let i = 0; i < 3; i++) script.push(`U p3 ${j0} late 7`), put('late', 7);
    for (let i = 0; i < 4; i++) script.push(`U p1 ${j1} g1 -2`), put('g1', -2);
    script.push('A p1', 'A p3');
    // An uncommitted tail.
    for (let i = 0; i < 5; i++) script.push(`U p1 ${i % 2 ? j1 : j0} uncommitted 1000000`);
    const res = spawnSync(peerBinary('seq-oracle'), ['publish', cluster!.brokerAddress], { input: script.join('\n') + '\n', timeout: 60_000 });
    assert.equal(res.status, 0, res.stderr.toString());
    const acks = res.stdout.toString().trimEnd().split('\n');
    assert.equal(acks.pop(), 'DONE');
    // p1's first (2 journals), its re-sent ones (2), after the rollback (2), j1 only (1), p3's (1).
    assert.equal(acks.filter((l) => l.startsWith('ACK ')).length, 8);

    // Read both journals uncommitted and sequence them with ours.
    const seq = new Sequencer<Rec>(undefined, [], 8);
    const content = new Map<string, Envelope<Rec>[]>();
    const got: Record<string, number> = {};
    let acked = 0;
    const input: string[] = [];
    for (const j of [j0, j1]) {
      const parts: Buffer[] = [];
      for await (const c of journals.read({ journal: j, offset: 0n })) parts.push(Buffer.from(c.content));
      let at = 0n;
      for (const line of Buffer.concat(parts).toString('utf8').split('\n').slice(0, -1)) {
        input.push(`${j}\t${line}`);
        const { doc, uuid } = decodeJsonMessage(line);
        const env: Envelope<Rec> = { journal: j, begin: at, end: at + BigInt(Buffer.byteLength(line) + 1), message: doc as Rec, uuid };
        at = env.end;
        const list = content.get(j) ?? [];
        list.push(env);
        content.set(j, list);
        const outcome = seq.queue(env);
        if (outcome === 'ackCommitReplay') {
          const rr = seq.replayRange();
          seq.startReplay(list.filter((e) => e.begin >= rr.begin && e.end <= rr.end)[Symbol.iterator]());
        }
        if (!isCommitOutcome(outcome)) continue;
        while (seq.step()) {
          const m = seq.dequeued!.message;
          if (flagsName(getFlags(seq.dequeued!.uuid)) === 'ACK_TXN') acked++;
          got[m.key] = (got[m.key] ?? 0) + m.value;
        }
      }
    }
    assert.equal(acked, 6, "ACKs applied (the 2 re-sent ones roll back instead)");
    delete got['']; // the acknowledgements (zero records)
    assert.deepEqual(got, want);
    // Gazette's own reading agrees message for message.
    const go = spawnSync(peerBinary('seq-oracle'), ['read'], { input: input.join('\n') + '\n' });
    const goSums: Record<string, number> = {};
    for (const l of go.stdout.toString().trimEnd().split('\n')) {
      const m = / ("(?:[^"\\]|\\.)*") (-?\d+)$/.exec(l)!;
      const k = JSON.parse(m[1]!) as string;
      if (k !== '') goSums[k] = (goSums[k] ?? 0) + Number(m[2]);
    }
    assert.deepEqual(goSums, want);
  });
});
