// The gazette-sum application's codecs: records as Go's sum-consumer decodes them, and its totals
// as Go's encoding/json writes a map[string]int64 (the checkpoint lines are the JSON file store's,
// tested with it).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { SUMS_CODEC, decodeSumRecord } from '../../../../src/core/consumer/sum-app.js';
import { MessageFlags, buildUUID, formatUUID } from '../../../../src/lib/message/uuid.js';

describe('gazette-sum records', () => {
  test('key, value and UUID as Go decodes them (field names case-insensitive, unknown fields ignored)', () => {
    const r = decodeSumRecord(Buffer.from('{"key":"apple","value":-12,"other":[1,2]}\n'));
    assert.equal(r.key, 'apple');
    assert.equal(r.value, -12n);
    assert.deepEqual([...r.uuid], new Array(16).fill(0));
    const uuid = buildUUID(Uint8Array.from([1, 2, 3, 4, 5, 6]), 12345n << 4n, MessageFlags.ACK_TXN);
    const ack = decodeSumRecord(Buffer.from(`{"uuid":"${formatUUID(uuid)}","KEY":"","Value":0}\n`));
    assert.deepEqual([...ack.uuid], [...uuid]);
    assert.equal(ack.key, '');
    assert.equal(decodeSumRecord(Buffer.from('{"key":"big","value":9007199254740993}')).value, 9007199254740993n);
    assert.equal(decodeSumRecord(Buffer.from('{"key":null,"value":null,"UUID":null}')).value, 0n);
  });

  test('a record that is not a JSON object with an integer value is refused', () => {
    assert.throws(() => decodeSumRecord(Buffer.from('[1]\n')), /not a JSON object/);
    assert.throws(() => decodeSumRecord(Buffer.from('{"key":"a","value":1.5}\n')), /not an integer/);
    assert.throws(() => decodeSumRecord(Buffer.from('{"key":"a","value":"1"}\n')), /not an integer/);
    assert.throws(() => decodeSumRecord(Buffer.from('{"key":"a"')), /not valid JSON/);
  });
});

describe('gazette-sum totals in state.json', () => {
  test('encoded as Go writes a map[string]int64 (sorted keys, escapes, int64 beyond 2^53) and read back exactly', () => {
    const sums = new Map<string, bigint>([
      ['cherry', -3n],
      ['apple', 9007199254740993n],
      ['a<b', 1n],
      ['', 0n],
    ]);
    const text = SUMS_CODEC.encode(sums);
    assert.equal(text, '{"":0,"a\\u003cb":1,"apple":9007199254740993,"cherry":-3}');
    assert.deepEqual(SUMS_CODEC.decode(text), sums);
    assert.deepEqual(SUMS_CODEC.decode('null'), new Map());
    assert.throws(() => SUMS_CODEC.decode('{"a":1.5}'), /not an integer/);
  });
});
