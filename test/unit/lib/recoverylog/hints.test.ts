import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FSMHints } from '../../../../src/lib/protocol/gen/recoverylog/recorded_op.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';
import { decodeHints, encodeHints, emptyHints, validateHints } from '../../../../src/lib/recoverylog/hints.js';

// As Go's encoding/json writes FSMHints (struct order, omitempty, null lists).
const GO_JSON =
  '{"log":"recovery/logs/shard-007","live_nodes":[' +
  '{"fnode":42,"segments":[{"author":2000000001,"first_seq_no":42,"first_offset":5000,"first_checksum":123456789,"last_seq_no":47,"last_offset":7300}]},' +
  '{"fnode":51,"segments":[{"author":2000000001,"first_seq_no":51,"first_offset":7300,"first_checksum":987654321,"last_seq_no":53}]}],' +
  '"properties":[{"path":"/IDENTITY","content":"some-db-guid\\n"}]}';

const BIG = 9007199254740993n; // 2^53 + 1: not a double

describe('hints JSON', () => {
  it('decodes and re-encodes Go JSON byte for byte', () => {
    const h = decodeHints(GO_JSON);
    assert.equal(h.log, 'recovery/logs/shard-007');
    assert.deepEqual(h.live_nodes.map((n) => n.fnode), [42n, 51n]);
    assert.deepEqual(h.live_nodes[1]!.segments[0], {
      author: 2000000001,
      first_seq_no: 51n,
      first_offset: 7300n,
      first_checksum: 987654321,
      last_seq_no: 53n,
      last_offset: 0n,
      log: '',
    });
    assert.deepEqual(h.properties, [{ path: '/IDENTITY', content: 'some-db-guid\n' }]);
    assert.equal(encodeHints(h), GO_JSON);
    assert.equal(encodeHints(decodeHints(Buffer.from(GO_JSON))), GO_JSON);
  });

  it('writes null for empty lists and omits zero fields', () => {
    assert.equal(encodeHints(emptyHints('a/log')), '{"log":"a/log","live_nodes":null,"properties":null}');
    const h = decodeHints('{"log":"a/log","live_nodes":null,"properties":null}');
    assert.deepEqual(h, emptyHints('a/log'));
    assert.equal(encodeHints({ log: '', live_nodes: [{ fnode: 0n, segments: [] }], properties: [{ path: '', content: '' }] }), '{"live_nodes":[{"segments":null}],"properties":[{}]}');
  });

  it('keeps int64 values beyond 2^53 exact, and escapes as Go does', () => {
    const json =
      `{"log":"a/log","live_nodes":[{"fnode":${BIG},"segments":[{"author":4294967295,"first_seq_no":${BIG},"first_offset":${BIG},"first_checksum":4294967295,"last_seq_no":${BIG + 5n},"last_offset":${BIG + 100n},"log":"a/fork\\u003cx\\u003e"}]}],"properties":null}`;
    const h = decodeHints(json, { validate: false });
    assert.equal(h.live_nodes[0]!.fnode, BIG);
    assert.equal(h.live_nodes[0]!.segments[0]!.last_offset, BIG + 100n);
    assert.equal(h.live_nodes[0]!.segments[0]!.log, 'a/fork<x>');
    assert.equal(encodeHints(h), json);
  });

  it('matches keys case-insensitively, ignores unknown keys and whitespace', () => {
    const h = decodeHints(' \n{ "LOG" : "a/log", "Live_Nodes": [ {"FNODE": 3, "segments": [{"Author": 1, "first_seq_no": 3, "LAST_SEQ_NO": 3}]} ], "other": {"x": [1, 2.5, true]} }');
    assert.equal(h.log, 'a/log');
    assert.equal(h.live_nodes[0]!.segments[0]!.author, 1);
  });

  it('rejects what Go would not decode', () => {
    for (const bad of [
      '{"log":"a/log","live_nodes":[{"fnode":1.5,"segments":[]}]}',
      '{"log":"a/log","live_nodes":[{"fnode":"1","segments":[]}]}',
      '{"log":"a/log","live_nodes":[{"fnode":9223372036854775808,"segments":[]}]}',
      '{"log":"a/log","live_nodes":[{"fnode":1,"segments":[{"author":4294967296}]}]}',
      '{"log":"a/log","live_nodes":{}}',
      '{"log":"a/log"',
      '{"log":"a/log"} x',
    ]) {
      assert.throws(() => decodeHints(bad, { validate: false }), ValidationError, bad);
    }
  });

  it('reads binary protobuf hints when the value does not start with {', () => {
    const h = decodeHints(GO_JSON);
    const bin = FSMHints.encode(h).finish();
    assert.notEqual(bin[0], 0x7b);
    assert.deepEqual(decodeHints(bin), h);
    assert.throws(() => decodeHints(Uint8Array.of(0xff, 0xff, 0xff)), ValidationError);
  });
});

describe('validateHints', () => {
  const good = () => decodeHints(GO_JSON);
  const cases: [string, (h: FSMHints) => void, RegExp][] = [
    ['no log', (h) => (h.log = ''), /log is not set/],
    ['a node without segments', (h) => (h.live_nodes[0]!.segments = []), /must start with a segment/],
    ['a first segment not at the fnode', (h) => (h.live_nodes[0]!.segments[0]!.first_seq_no = 41n), /must start with a segment/],
    ['fnodes out of order', (h) => h.live_nodes.reverse(), /increasing fnode order/],
    ['a segment repeating the hints log', (h) => (h.live_nodes[0]!.segments[0]!.log = h.log), /repeats the hints' log/],
    ['author zero', (h) => (h.live_nodes[0]!.segments[0]!.author = 0), /author is zero/],
    ['last before first seq', (h) => (h.live_nodes[0]!.segments[0]!.last_seq_no = 41n), /last_seq_no < first_seq_no/],
    ['last offset before first', (h) => (h.live_nodes[0]!.segments[0]!.last_offset = 4000n), /last_offset <= first_offset/],
    ['a bad segment log', (h) => (h.live_nodes[0]!.segments[0]!.log = 'bad log!'), /segment log/],
    ['inconsistent segments', (h) => (h.live_nodes[1]!.segments[0]!.first_offset = 100n), /first_offset decreases/],
    ['last segment in another log', (h) => (h.live_nodes[1]!.segments[0]!.log = 'other/log'), /open-ended segment precedes one of another log|not in the hints' log/],
  ];
  for (const [what, mutate, re] of cases) {
    it(`rejects ${what}`, () => {
      const h = good();
      mutate(h);
      assert.throws(() => validateHints(h), (e: Error) => e instanceof ValidationError && re.test(e.message));
    });
  }
  it('accepts good hints and checks the expected log', () => {
    validateHints(good());
    assert.throws(() => decodeHints(GO_JSON, { log: 'recovery/logs/other' }), /expected recovery\/logs\/other/);
  });
});
