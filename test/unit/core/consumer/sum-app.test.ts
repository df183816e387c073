// The gazette-sum application's codecs: records as Go's sum-consumer decodes them, and its totals
// as Go's encoding/json writes a map[string]int64 (the checkpoint lines are the JSON file store's,
// tested with it).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { SUMS_CODEC, decodeSumRecord, decodeSumRecordGeneral, decodeSumRecordRange } from '../../../../src/core/consumer/sum-app.js';
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

/** The outcome of a decoder on a line: its record, or its error's message. */
function outcome(decode: (b: Buffer) => unknown, line: Buffer): unknown {
  try {
    const r = decode(line) as { key: string; value: bigint; uuid: Uint8Array };
    return { key: r.key, value: r.value, uuid: [...r.uuid] };
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}

describe('gazette-sum records: the byte scanner agrees with parsing the whole document', () => {
  const U = '9f2952b2-a3b0-11ee-8001-0123456789ab';
  const cases = [
    '{"key":"k1","value":-1000}\n',
    `{"UUID":"${U}","key":"k96","value":999}\n`,
    ` { "key" : "a" , "value" : 0 , "uuid" : "${U.toUpperCase()}" } \r\n`,
    '{"key":"a","value":-0}',
    '{"key":"a","value":123456789012345}',
    '{"key":"a","value":1234567890123456}',
    '{"key":"a","value":9007199254740993}',
    '{"key":"a","value":01}',
    '{"key":"a","value":-}',
    '{"key":"a","value":1e3}',
    '{"key":"a","value":1.0}',
    '{"key":"a","value":1E3}',
    '{"key":"a","value":"1"}',
    '{"key":1,"value":1}',
    '{"key":"a","value":null}',
    '{"key":null,"value":2,"UUID":null}',
    '{"KEY":"x","Value":3,"Uuid":"' + U + '"}',
    '{"key":"a","key":"b","value":1}',
    '{"key":"a","KEY":"b","key":"c","value":1}',
    '{"value":1,"value":2}',
    '{"\u212aey":"kelvin","value":1}',
    '{"ke\u0079":"escaped name","value":1}',
    '{"key":"caf\u00e9","value":1}',
    '{"key":"café","value":1}',
    '{"key":"a\\"b","value":1}',
    '{"key":"tab\there","value":1}',
    '{"key":"a","value":1,"other":[1,2],"more":{"x":1}}',
    '{"key":"a","value":1,"other":true}',
    '{"key":"a","value":1,"other":"s","n":12345678901234567890}',
    `{"UUID":"{${U}}","key":"a","value":1}`,
    `{"UUID":"urn:uuid:${U}","key":"a","value":1}`,
    `{"UUID":"${U.replace(/-/g, '')}","key":"a","value":1}`,
    `{"UUID":"${U.slice(0, 35)}g","key":"a","value":1}`,
    `{"UUID":"${U.slice(1)}","key":"a","value":1}`,
    `{"UUID":"${U.replace('-', 'x')}","key":"a","value":1}`,
    `{"UUID":"é${U.slice(2)}","key":"a","value":1}`,
    '{"key":"a","value":1,}',
    '{"key":"a","value":1}x',
    '{"key":"a","value":1}{}',
    '{}',
    '{ }',
    '[1]',
    'null',
    '',
    '{"key":"a"',
    '{"key":"a","value":1',
    '{"key":"a" "value":1}',
    '{"key"::"a"}',
    '{key:"a"}',
    '{"key":"a","value":nul}',
    '{"key":"a","value":nulls}',
  ];
  // decodeSumRecordRange of a line inside a larger buffer, between bytes that would change the
  // outcome if the scanner read past either end of its range.
  const PRE = Buffer.from('{"key":"p","value":5,');
  const RANGED = ['}', ',"value":2}\n', 'null}', '0}', '{"key":"q"}', ' ', '"'].map((suffix) => (line: Buffer) => {
    const buf = Buffer.concat([PRE, line, Buffer.from(suffix)]);
    return decodeSumRecordRange(buf, PRE.length, PRE.length + line.length);
  });
  test('on hand-picked lines: the same record or the same error', () => {
    for (const c of cases) {
      const line = Buffer.from(c);
      assert.deepEqual(outcome(decodeSumRecord, line), outcome(decodeSumRecordGeneral, line), c);
      for (const r of RANGED) assert.deepEqual(outcome(r, line), outcome(decodeSumRecordGeneral, line), c);
    }
    // Invalid UTF-8 inside a key decodes as the whole line's text does.
    const bad = Buffer.concat([Buffer.from('{"key":"a'), Buffer.from([0xc3, 0xff, 0xe2, 0x82]), Buffer.from('","value":1}\n')]);
    assert.deepEqual(outcome(decodeSumRecord, bad), outcome(decodeSumRecordGeneral, bad));
  });

  test('on every one-byte change of typical lines', () => {
    const alphabet = Buffer.from(' "\\,:{}[]-+.0123456789eEnulKkVvaAyY\n\r\t\u0001');
    for (const c of cases.slice(0, 3)) {
      const base = Buffer.from(c);
      for (let at = 0; at < base.length; at++) {
        for (const byte of alphabet) {
          const line = Buffer.from(base);
          line[at] = byte;
          assert.deepEqual(outcome(decodeSumRecord, line), outcome(decodeSumRecordGeneral, line), line.toString('latin1'));
          const cut = Buffer.concat([base.subarray(0, at), base.subarray(at + 1)]);
          assert.deepEqual(outcome(decodeSumRecord, cut), outcome(decodeSumRecordGeneral, cut), cut.toString('latin1'));
          for (const r of RANGED) {
            assert.deepEqual(outcome(r, line), outcome(decodeSumRecordGeneral, line), line.toString('latin1'));
            assert.deepEqual(outcome(r, cut), outcome(decodeSumRecordGeneral, cut), cut.toString('latin1'));
          }
        }
      }
    }
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
