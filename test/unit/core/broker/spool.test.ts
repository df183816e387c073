import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';

import { applyRegisters } from '../../../../src/core/broker/append.js';
import { emptyFragment, fragmentEquals, Spool } from '../../../../src/core/broker/spool.js';
import { sumFromDigest, sumToHex } from '../../../../src/lib/protocol/fragment.js';
import { CompressionCodec } from '../../../../src/lib/protocol/gen/broker/protocol.js';

const sha1 = (s: string) => sumToHex(sumFromDigest(createHash('sha1').update(s).digest()));

test('staged bytes commit into the fragment with the running SHA-1 of its content', () => {
  const s = new Spool(emptyFragment('a/b', 100n, CompressionCodec.NONE, 'file:///'));
  s.stage(Buffer.from('hello '));
  assert.equal(s.fragment.end, 100n, 'staging does not move the end');
  const next = s.nextFragment();
  assert.equal(next.end, 106n);
  assert.equal(s.matches(next), 'next');
  assert.equal(s.matches(s.fragment), 'current');
  s.commit();
  assert.ok(fragmentEquals(s.fragment, next));
  s.stage(Buffer.from('world'));
  s.commit();
  assert.equal(s.fragment.begin, 100n);
  assert.equal(s.fragment.end, 111n);
  assert.equal(sumToHex(s.fragment.sum), sha1('hello world'));
  assert.equal(s.read(106n, 100).toString(), 'world');
});

test('roll-back drops staged bytes only', () => {
  const s = new Spool(emptyFragment('a/b', 0n, CompressionCodec.NONE, ''));
  s.stage(Buffer.from('kept'));
  s.commit();
  s.stage(Buffer.from('dropped'));
  assert.equal(s.pending, 7);
  s.rollback();
  assert.equal(s.pending, 0);
  assert.equal(s.content().toString(), 'kept');
  assert.equal(s.matches(s.nextFragment()), 'current', 'with nothing staged the next fragment is the current one');
});

test('a proposal differing in any field is no match', () => {
  const s = new Spool(emptyFragment('a/b', 0n, CompressionCodec.NONE, 'file:///'));
  s.stage(Buffer.from('x'));
  const next = s.nextFragment();
  assert.equal(s.matches({ ...next, backing_store: 's3://other/' }), undefined);
  assert.equal(s.matches({ ...next, compression_codec: CompressionCodec.GZIP }), undefined);
  assert.equal(s.matches({ ...next, end: next.end + 1n }), undefined);
});

test('registers: subtract removes a name whose values match, then the union adds, its values winning per name', () => {
  const l = (name: string, value: string) => ({ name, value, prefix: false });
  const cur = { labels: [l('b', '1'), l('c', '3')] };
  const out = applyRegisters(cur, { labels: [l('a', '2'), l('c', '9')] }, undefined);
  assert.deepEqual(out.labels.map((x) => `${x.name}=${x.value}`), ['a=2', 'b=1', 'c=9']);
  const sub = applyRegisters(out, undefined, { labels: [l('b', '1'), l('c', '3')] });
  assert.deepEqual(sub.labels.map((x) => `${x.name}=${x.value}`), ['a=2', 'c=9'], 'c=3 does not match c=9, so c stays');
  const both = applyRegisters(cur, { labels: [l('b', '5')] }, { labels: [l('b', '1')] });
  assert.deepEqual(both.labels.map((x) => `${x.name}=${x.value}`), ['b=5', 'c=3']);
});
