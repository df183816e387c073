import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { FragmentObjectParser, fragmentObjectFromListing } from '../../../../src/lib/fragment/objects.js';
import { ValidationError } from '../../../../src/lib/protocol/errors.js';

const J = 'acme/events';
const S = 'file:///';
const SUM = '0123456789abcdef0123456789abcdef01234567';

/** The outcome of a full parse: the object, or the error class and message. */
function full(journal: string, rel: string): unknown {
  try {
    return fragmentObjectFromListing(journal, S, rel, 10, 20);
  } catch (e) {
    return { error: (e as Error).constructor.name, message: (e as Error).message };
  }
}

function cached(p: FragmentObjectParser, rel: string): unknown {
  try {
    return p.parse(S, rel, 10, 20);
  } catch (e) {
    return { error: (e as Error).constructor.name, message: (e as Error).message };
  }
}

const NAMES = [
  `0000000000000000-0000000000000400-${SUM}.raw`,
  `0000000000000400-0000000000000800-${SUM}.gz`,
  `date=2024-01-02/0000000000000400-0000000000000800-${SUM}.gz`,
  `date=2024-01-02/0000000000000800-0000000000000c00-${SUM}.gz`,
  `0000000000000800-0000000000000400-${SUM}.gz`, // begin after end
  `8000000000000000-8000000000000001-${SUM}.gz`, // overflows int64
  `7fffffffffffffff-7fffffffffffffff-${SUM}.raw`,
  `0000000000000000-0000000000000400-${SUM}.lz4`, // unknown extension
  `0000000000000000-0000000000000400-${SUM}`, // no extension: offloaded gzip
  `0000000000000000-0000000000000400-${SUM.toUpperCase()}.raw`,
  `0-400-${SUM}.raw`, // short hex offsets
  `0000000000000000-0000000000000400-${SUM.slice(1)}.raw`,
  `bad//postfix/0000000000000000-0000000000000400-${SUM}.raw`,
  `../0000000000000000-0000000000000400-${SUM}.raw`,
  'notes.txt',
  `0000000000000000-0000000000000400-${SUM}.RAW`,
];

describe('FragmentObjectParser', () => {
  it('accepts and rejects exactly what a full parse does, in any order, twice over', () => {
    const p = new FragmentObjectParser(J);
    for (const round of [0, 1]) {
      for (const rel of round === 0 ? NAMES : [...NAMES].reverse()) {
        assert.deepEqual(cached(p, rel), full(J, rel), `${rel} (round ${round})`);
      }
    }
  });

  it('still rejects every object of a journal whose name is invalid', () => {
    const p = new FragmentObjectParser('bad//journal');
    for (const rel of NAMES.slice(0, 3)) {
      const got = cached(p, rel) as { error?: string };
      assert.equal(got.error, ValidationError.name, rel);
      assert.deepEqual(got, full('bad//journal', rel));
    }
  });
});
