// The gazette-sum application's codecs: records as Go's sum-consumer decodes them, and state.json
// lines as Go's JSON file store writes them (encoding/json of the offsets, the totals and the
// consumer Checkpoint with its generated struct's field tags).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { decodeSumRecord, goCheckpointJson, goJsonString, parseGoCheckpoint } from '../../../../src/core/consumer/sum-app.js';
import { MinimalSequencer, buildTxnCheckpoint } from '../../../../src/core/consumer/transaction.js';
import { MessageFlags, buildUUID, formatUUID } from '../../../../src/lib/message/uuid.js';

describe('gazette-sum records', () => {
  test('key, value and UUID as Go decodes them (field names case-insensitive, unknown fields ignored)', () => {
    const r = decodeSumRecord(Buffer.from('{"key":"apple","value":-12,"other":[1,2]}\n'));
    assert.equal(r.key, 'apple');
    assert.equal(r.value, -12n);
    assert.deepEqual([...r.uuid], new Array(16).fill(0));
    const uuid = buildUUID(Uint8Array.from([1, 2, 3, 4, 5, 6]), 12345n << 4n, MessageFlags.ACK_TXN);
    const ack = decodeSumRecord(Buffer.from(`{"UUID":"${formatUUID(uuid)}","KEY":"","Value":0}\n`));
    assert.deepEqual([...ack.uuid], [...uuid]);
    assert.equal(ack.key, '');
    assert.equal(decodeSumRecord(Buffer.from('{"key":"big","value":9007199254740993}')).value, 9007199254740993n);
  });

  test('a record that is not a JSON object with an integer value is refused', () => {
    assert.throws(() => decodeSumRecord(Buffer.from('[1]\n')), /not a JSON object/);
    assert.throws(() => decodeSumRecord(Buffer.from('{"key":"a","value":1.5}\n')), /not an integer/);
    assert.throws(() => decodeSumRecord(Buffer.from('{"key":"a"')), SyntaxError);
  });
});

describe('state.json lines in Go encoding/json shape', () => {
  test('a checkpoint of plain lines: read_through, producers null, no ack_intents (as a Go sum-consumer wrote it)', () => {
    const cp = buildTxnCheckpoint(new Map([['sums/input/part-000', 5437n]]), [], []);
    assert.equal(goCheckpointJson(cp), '{"sources":{"sums/input/part-000":{"read_through":5437,"producers":null}}}');
  });

  test('producers, ACK intents, zero values omitted, sorted keys, clocks beyond 2^53 exact, and back', () => {
    const producer = Uint8Array.from([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    const cp = buildTxnCheckpoint(
      new Map([
        ['b/j', 0n],
        ['a/j', 10n],
      ]),
      [{ journal: 'a/j', producer, lastAck: (1n << 62n) + 7n, begin: -1n }, { journal: 'b/j', producer, lastAck: 0n, begin: 0n }],
      [{ journal: 'out/<x>', intent: Buffer.from('{"ack":1}\n') }],
    );
    const text = goCheckpointJson(cp);
    assert.equal(
      text,
      '{"sources":{"a/j":{"read_through":10,"producers":[{"id":"qrvM3e7/","state":{"last_ack":4611686018427387911,"begin":-1}}]},' +
        '"b/j":{"producers":[{"id":"qrvM3e7/","state":{}}]}},"ack_intents":{"out/\\u003cx\\u003e":"eyJhY2siOjF9Cg=="}}',
    );
    const back = parseGoCheckpoint(text);
    assert.equal(back.sources['a/j']!.read_through, 10n);
    assert.equal(back.sources['a/j']!.producers[0]!.state!.last_ack, (1n << 62n) + 7n);
    assert.equal(back.sources['a/j']!.producers[0]!.state!.begin, -1n);
    assert.deepEqual([...back.sources['b/j']!.producers[0]!.id], [...producer]);
    assert.equal(back.ack_intents['out/<x>']!.toString(), '{"ack":1}\n');
  });

  test('strings escape as Go does (<, >, & and the line separators)', () => {
    assert.equal(goJsonString('a<b>&c\u2028'), '"a\\u003cb\\u003e\\u0026c\\u2028"');
  });
});

describe('MinimalSequencer (until the Sequencer lands)', () => {
  const env = (flags: number, begin: bigint) => ({
    journal: 'j',
    begin,
    end: begin + 10n,
    message: undefined,
    uuid: flags < 0 ? new Uint8Array(16) : buildUUID(Uint8Array.from([1, 1, 1, 1, 1, 1]), 100n << 4n, flags),
  });

  test('zero UUIDs, OUTSIDE_TXN and ACK_TXN dequeue at once; offsets move once stepped past', () => {
    const s = new MinimalSequencer(new Map([['j', 0n]]));
    assert.equal(s.queue(env(-1, 0n)), 'outsideCommit');
    assert.equal(s.step(), true);
    assert.equal(s.dequeued?.begin, 0n);
    assert.equal(s.checkpoint().offsets.get('j'), 0n);
    assert.equal(s.step(), false);
    assert.equal(s.checkpoint().offsets.get('j'), 10n);
    assert.equal(s.queue(env(MessageFlags.ACK_TXN, 10n)), 'ackEmpty');
    assert.equal(s.step(), true);
    assert.equal(s.step(), false);
    assert.equal(s.checkpoint().offsets.get('j'), 20n);
  });

  test('a CONTINUE_TXN message is refused rather than applied uncommitted', () => {
    const s = new MinimalSequencer(new Map());
    assert.throws(() => s.queue(env(MessageFlags.CONTINUE_TXN, 0n)), /needs the exactly-once sequencer/);
  });
});
