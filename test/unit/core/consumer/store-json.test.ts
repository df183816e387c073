// JsonFileStore: state.json exactly as Go's JSONFileStore writes it, commits recorded as upstream
// records them (next.json written with O_TRUNC, then renamed), restore and the legacy fold.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryLogSource } from '../../../../src/lib/recoverylog/memory-source.js';
import { takeOverLog } from '../../../../src/lib/recoverylog/recorder.js';
import { emptyHints } from '../../../../src/lib/recoverylog/hints.js';
import { decodeFrames } from '../../../../src/lib/recoverylog/framing.js';
import type { Checkpoint } from '../../../../src/lib/protocol/gen/consumer/protocol.js';
import {
  JsonFileStore,
  decodeCheckpointJson,
  encodeCheckpointJson,
  encodeGoJson,
  parseJsonFileStore,
  splitJsonDocuments,
  GO_JSON_CODEC,
} from '../../../../src/core/consumer/store-json.js';
import { MemoryAppends } from '../../lib/recoverylog/memory-appends.js';
import { tempDir } from '../../lib/recoverylog/helpers.js';

const LOG = 'recovery/sums/shard-000';

function checkpoint(): Checkpoint {
  return {
    sources: {
      'sums/j2': { read_through: 200n, producers: [] },
      'sums/j1': {
        read_through: 100n,
        producers: [{ id: Buffer.from([1, 2, 3, 4, 5, 6]), state: { last_ack: 0x1234567890abcdefn, begin: -1n } }],
      },
    },
    ack_intents: { 'sums/j1': Buffer.from('ack\n') },
  };
}

const STATE_JSON =
  '{"sums/j1":100,"sums/j2":200}\n' +
  '{"apple":3,"banana":-2}\n' +
  '{"sources":{"sums/j1":{"read_through":100,"producers":[{"id":"AQIDBAUG","state":{"last_ack":1311768467294899695,"begin":-1}}]},' +
  '"sums/j2":{"read_through":200,"producers":null}},"ack_intents":{"sums/j1":"YWNrCg=="}}\n';

describe('JsonFileStore encoding', () => {
  it('writes the checkpoint as Go encoding/json writes consumer.Checkpoint', () => {
    assert.equal(encodeCheckpointJson(checkpoint()), STATE_JSON.split('\n')[2]);
    // Zero values: read_through, id, last_ack, begin omitted; no ack_intents key when empty.
    assert.equal(
      encodeCheckpointJson({ sources: { j: { read_through: 0n, producers: [{ id: Buffer.alloc(0), state: { last_ack: 0n, begin: 0n } }] } }, ack_intents: {} }),
      '{"sources":{"j":{"producers":[{"state":{}}]}}}',
    );
    assert.equal(encodeCheckpointJson({ sources: {}, ack_intents: {} }), '{"sources":{}}');
  });

  it('encodes plain states as Go maps (sorted keys, HTML-safe strings, exact bigints)', () => {
    assert.equal(encodeGoJson({ b: 2n, a: [1, 'x<y>&z'], c: null }), '{"a":[1,"x\\u003cy\\u003e\\u0026z"],"b":2,"c":null}');
    assert.equal(encodeGoJson(new Map<string, number | bigint>([['z', 1], ['m', 9007199254740993n]])), '{"m":9007199254740993,"z":1}');
  });

  it('reads back what it writes, exactly (64-bit clocks included)', () => {
    const { state, checkpoint: cp, offsets } = parseJsonFileStore(STATE_JSON, GO_JSON_CODEC);
    assert.deepEqual(state, { apple: 3, banana: -2 });
    assert.deepEqual(cp, { ...checkpoint(), sources: { 'sums/j1': checkpoint().sources['sums/j1']!, 'sums/j2': checkpoint().sources['sums/j2']! } });
    assert.deepEqual(offsets, new Map([['sums/j1', 100n], ['sums/j2', 200n]]));
    assert.equal(encodeCheckpointJson(decodeCheckpointJson(STATE_JSON.split('\n')[2]!)), STATE_JSON.split('\n')[2]);
  });

  it('folds the offsets document into the checkpoint (offsets-only files of old releases)', () => {
    const { checkpoint: cp } = parseJsonFileStore('{"a":5,"b":7}\n{"k":1}\n', GO_JSON_CODEC);
    assert.deepEqual(cp, { sources: { a: { read_through: 5n, producers: [] }, b: { read_through: 7n, producers: [] } }, ack_intents: {} });
    // The offsets override a checkpoint's read-through, keeping its producers.
    const cp2 = parseJsonFileStore('{"sums/j1":150}\n{}\n' + STATE_JSON.split('\n')[2] + '\n', GO_JSON_CODEC).checkpoint;
    assert.equal(cp2.sources['sums/j1']!.read_through, 150n);
    assert.equal(cp2.sources['sums/j1']!.producers.length, 1);
  });

  it('splits JSON documents as a stream decoder does, and names what is wrong', () => {
    assert.deepEqual(splitJsonDocuments('{"a":"}{"} [1,{"b":[]}]\n"s\\"x" 12 null'), ['{"a":"}{"}', '[1,{"b":[]}]', '"s\\"x"', '12', 'null']);
    assert.throws(() => parseJsonFileStore('{"a":1}\n', GO_JSON_CODEC), /expected offsets, state and checkpoint documents, found 1/);
    assert.throws(() => parseJsonFileStore('{"a":1}\n{}\n{"sources":{"a":{"read_through":"x"}}}\n', GO_JSON_CODEC), /sources\[a\]\.read_through is not an integer/);
    assert.throws(() => parseJsonFileStore('{"a":1}\n{\n', GO_JSON_CODEC), /cut short/);
  });
});

describe('JsonFileStore commits', () => {
  it('records next.json and its rename as upstream, and a played log restores the store', async () => {
    const src = new MemoryLogSource();
    const client = new MemoryAppends(src);
    const dir = tempDir('store');
    const { recorder } = await takeOverLog({ client, source: src, hints: emptyHints(LOG), dir, author: 0x77 });
    const store = await JsonFileStore.open<Record<string, number>>(recorder, { initial: () => ({}) });
    assert.deepEqual(await store.restoreCheckpoint(), { sources: {}, ack_intents: {} });
    store.state = { banana: -2, apple: 3 };
    const appendsBefore = client.appends.length;
    await store.startCommit(undefined, checkpoint(), []);
    assert.equal(readFileSync(join(dir, 'state.json'), 'utf8'), STATE_JSON);
    // The commit's seven ops went to the log in one append (one round trip per commit).
    assert.deepEqual(client.appends.slice(appendsBefore).map((a) => a.ok), [true]);
    store.state = { apple: 4, banana: -2 };
    let release!: () => void;
    const acked = new Promise<void>((r) => (release = r));
    const committed = store.startCommit(undefined, { ...checkpoint(), ack_intents: {} }, [acked]);
    release();
    await committed;
    assert.equal(client.appends.length, appendsBefore + 2, 'the second commit in one append too');

    await src.head(LOG);
    const ops: string[] = [];
    for await (const ev of decodeFrames(LOG, 0n, src.read(LOG, 0n))) {
      if (ev.kind !== 'op') continue;
      const op = ev.op;
      ops.push(
        op.create ? `create ${op.create.path}` : op.write ? `write ${op.write.fnode} +${op.write.length}` : op.link ? `link ${op.link.fnode} ${op.link.path}` : op.unlink ? `unlink ${op.unlink.fnode} ${op.unlink.path}` : 'noop',
      );
    }
    const lines = STATE_JSON.split('\n').map((l) => BigInt(l.length + 1));
    const third = BigInt(encodeCheckpointJson({ ...checkpoint(), ack_intents: {} }).length + 1);
    assert.deepEqual(ops, [
      'noop',
      'create /next.json',
      `write 2 +${lines[0]}`,
      `write 2 +${lines[1]}`,
      `write 2 +${lines[2]}`,
      'link 2 /state.json',
      'unlink 2 /next.json',
      'create /next.json',
      `write 8 +${lines[0]}`,
      `write 8 +${lines[1]}`,
      `write 8 +${third}`,
      'unlink 2 /state.json',
      'link 8 /state.json',
      'unlink 8 /next.json',
    ]);

    // Another member recovers the store from the log.
    const dir2 = tempDir('store');
    const taken = await takeOverLog({ client, source: src, hints: await recorder.buildHints(), dir: dir2, author: 0x78 });
    const restored = await JsonFileStore.open<Record<string, number>>(taken.recorder, { initial: () => ({}) });
    assert.deepEqual(restored.state, { apple: 4, banana: -2 });
    assert.deepEqual(await restored.restoreCheckpoint(), { ...checkpoint(), ack_intents: {}, sources: parseJsonFileStore(STATE_JSON, GO_JSON_CODEC).checkpoint.sources });
    // The old primary is fenced off: its next commit fails.
    await assert.rejects(store.startCommit(undefined, checkpoint(), []), /REGISTER_MISMATCH/);
    await restored.destroy();
  });
});
