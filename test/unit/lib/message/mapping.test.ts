// Unit tests of src/lib/append/mapping.ts: 32-bit FNV-1a and the record → journal mappings of
// `journals append`. Expected values were computed independently (Python, the
// FNV reference vectors).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { fnv1a32, JournalSet } from '../../../../src/lib/message/mapping.js';
import { GazctlError } from '../../../../src/lib/protocol/errors.js';

const b = (s: string | number[]) => (typeof s === 'string' ? Buffer.from(s, 'utf8') : Buffer.from(s));

describe('fnv1a32', () => {
  const vectors: [string | number[], number][] = [
    ['', 0x811c9dc5],
    ['a', 0xe40c292c],
    ['foobar', 0xbf9cf968],
    ['acme/events/part-000', 0x92d40e76],
    ['key-1', 0x57e03446],
    [[0xff, 0x00, 0x80], 0xa36cd47e],
  ];
  for (const [input, want] of vectors) {
    it(`${JSON.stringify(input)} → 0x${want.toString(16)}`, () => assert.equal(fnv1a32(b(input)), want));
  }

  it('is an unsigned 32-bit integer', () => {
    for (let i = 0; i < 500; i++) {
      const h = fnv1a32(b(`k${i}`));
      assert.ok(Number.isInteger(h) && h >= 0 && h <= 0xffffffff, String(h));
    }
  });
});

describe('JournalSet.pick', () => {
  const names = ['acme/p-0', 'acme/p-1', 'acme/p-2', 'acme/p-3'];
  const set = new JournalSet(names);

  it('modulo: index = FNV-1a(key) mod count', () => {
    assert.equal(set.pick('modulo', b('key-1')), 'acme/p-2');
    assert.equal(set.pick('modulo', b('key-2')), 'acme/p-3');
    assert.equal(set.pick('modulo', b('user:42')), 'acme/p-2');
    assert.equal(set.pick('modulo', b('')), 'acme/p-1'); // 0x811c9dc5 mod 4
  });

  it('rendezvous: the journal maximising FNV-1a(key) XOR FNV-1a(name)', () => {
    assert.equal(set.pick('rendezvous', b('key-1')), 'acme/p-2');
    assert.equal(set.pick('rendezvous', b('key-2')), 'acme/p-1');
    assert.equal(set.pick('rendezvous', b('user:42')), 'acme/p-3');
    assert.equal(set.pick('rendezvous', b('')), 'acme/p-0');
  });

  it('rendezvous: removing another journal never moves a key', () => {
    for (let k = 0; k < 300; k++) {
      const key = b(`key-${k}`);
      const chosen = set.pick('rendezvous', key);
      for (const gone of names) {
        if (gone === chosen) continue;
        const smaller = new JournalSet(names.filter((n) => n !== gone));
        assert.equal(smaller.pick('rendezvous', key), chosen, `key-${k} moved when ${gone} left`);
      }
    }
  });

  it('modulo and rendezvous depend only on the key', () => {
    for (let k = 0; k < 50; k++) {
      assert.equal(set.pick('modulo', b(`k${k}`)), set.pick('modulo', b(`k${k}`)));
      assert.equal(set.pick('rendezvous', b(`k${k}`)), set.pick('rendezvous', b(`k${k}`)));
    }
  });

  it('direct: the key is the journal name, among all matched journals (D5)', () => {
    for (const n of names) assert.equal(set.pick('direct', b(n)), n);
    assert.throws(
      () => set.pick('direct', b('acme/p-9')),
      (err: unknown) => err instanceof GazctlError && /journal "acme\/p-9" not found/.test(err.message),
    );
  });

  it('random: uniform over the journals, from the given source', () => {
    assert.equal(set.pick('random', undefined, () => 0), 'acme/p-0');
    assert.equal(set.pick('random', undefined, () => 0.26), 'acme/p-1');
    assert.equal(set.pick('random', undefined, () => 0.999999), 'acme/p-3');
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) seen.add(set.pick('random', undefined));
    assert.deepEqual([...seen].sort(), names);
  });

  it('an empty set is an error for every mapping', () => {
    const empty = new JournalSet([]);
    assert.equal(empty.size, 0);
    for (const m of ['random', 'modulo', 'rendezvous', 'direct'] as const) {
      assert.throws(() => empty.pick(m, b('k')), (err: unknown) => err instanceof GazctlError && /no journals match/.test(err.message));
    }
  });
});
